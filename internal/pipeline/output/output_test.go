package output

import (
	"strings"
	"testing"
)

const reviewSchema = `{
	"type": "object",
	"required": ["confidence", "verdict"],
	"properties": {
		"confidence": {"type": "number", "minimum": 0, "maximum": 1},
		"verdict": {"enum": ["ship", "hold"]},
		"findings": {"type": "array", "items": {"type": "string"}},
		"meta": {"type": "object", "properties": {"by": {"type": "string"}, "score": {"type": "integer"}}}
	}
}`

func TestCheckKeepsTypesAndNamesTheField(t *testing.T) {
	s, err := Compile(reviewSchema)
	if err != nil {
		t.Fatal(err)
	}
	obj, problems := s.Check([]byte(`{"confidence": 0.87, "verdict": "ship", "findings": ["a"], "meta": {"by": "x", "score": 3}}`))
	if problems != nil {
		t.Fatalf("problems %v", problems)
	}
	f := Fields("review", obj)
	if f["review.confidence"] != 0.87 || f["review.verdict"] != "ship" || f["review.meta.score"] != float64(3) || f["review.meta.by"] != "x" {
		t.Fatalf("fields %#v", f)
	}
	if l, ok := f["review.findings"].([]any); !ok || len(l) != 1 {
		t.Fatalf("findings %#v", f["review.findings"])
	}
	for _, tc := range []struct{ raw, want string }{
		{`{"confidence": "high", "verdict": "ship"}`, "/confidence: got string, want number"},
		{`{"confidence": 1.5, "verdict": "ship"}`, "/confidence: maximum: got 1.5, want 1"},
		{`{"verdict": "ship"}`, `missing property 'confidence'`},
		{`[1]`, "not a JSON object"},
		{`{"confidence": 0.5, "verdict": "ship"} trailing`, "text follows"},
		{`{"confidence": 0.5,`, "not JSON"},
	} {
		_, problems := s.Check([]byte(tc.raw))
		if len(problems) == 0 || !strings.Contains(problems[0].String(), tc.want) {
			t.Errorf("Check(%s) = %v, want first problem containing %q", tc.raw, problems, tc.want)
		}
	}
}

func TestSchemasNeverReadFilesOrURLs(t *testing.T) {
	for _, ref := range []string{"/etc/passwd", "file:///etc/passwd", "http://127.0.0.1:1/x.json", "other.json"} {
		if _, err := Compile(`{"$ref": "` + ref + `"}`); err == nil {
			t.Errorf("a $ref to %s compiled", ref)
		}
	}
	if _, err := Compile(`{"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}`); err != nil {
		t.Errorf("the 2020-12 meta-schema is refused: %v", err)
	}
}

func TestFindTakesTheLastJSONBlock(t *testing.T) {
	text := "Example:\n```json\n{\"confidence\": 0.1}\n```\nReal answer:\n```json\n{\"confidence\": 0.9}\n```\n[outcome:success]\n"
	body, ok := Find(text)
	if !ok || strings.TrimSpace(body) != `{"confidence": 0.9}` {
		t.Fatalf("Find = %q, %v", body, ok)
	}
	if _, ok := Find("```go\nx\n```\n```json\n{\"unterminated\": 1}\n"); ok {
		t.Fatal("an unclosed block was taken")
	}
	if body, ok := Find("~~~~JSON\n{}\n~~~~\n"); !ok || body != "{}\n" {
		t.Fatalf("tilde fence: %q %v", body, ok)
	}
}

func FuzzFind(f *testing.F) {
	f.Add("```json\n{}\n```")
	f.Add("````json\n```\n{}\n````\n")
	f.Fuzz(func(t *testing.T, text string) {
		body, ok := Find(text)
		if ok && !strings.Contains(text, body) {
			t.Fatalf("body %q is not part of the text", body)
		}
	})
}

// BenchmarkCheck2KB: validating a typical 2 KB output against its schema (target < 100 µs).
func BenchmarkCheck2KB(b *testing.B) {
	s, err := Compile(reviewSchema)
	if err != nil {
		b.Fatal(err)
	}
	var findings []string
	for i := 0; len(strings.Join(findings, ",")) < 1900; i++ {
		findings = append(findings, `"finding number `+strings.Repeat("x", i%20)+` in the code under review"`)
	}
	raw := []byte(`{"confidence": 0.87, "verdict": "ship", "meta": {"by": "sentinel", "score": 4}, "findings": [` + strings.Join(findings, ",") + `]}`)
	if len(raw) < 2000 || len(raw) > 2300 {
		b.Fatalf("output is %d bytes", len(raw))
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, p := s.Check(raw); p != nil {
			b.Fatal(p)
		}
	}
}

// FuzzCheck: whatever an agent returns, checking it never panics, and it
// is either an object (valid) or at least one problem.
func FuzzCheck(f *testing.F) {
	s, err := Compile(reviewSchema)
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{`{"confidence": 0.5, "verdict": "ship"}`, `{"confidence": "x"}`, `[]`, `{"meta": {"score": 1.5}}`, `{`, `{"a":1} {"b":2}`, `1e999`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		obj, problems := s.Check(raw)
		if (obj == nil) == (len(problems) == 0) {
			t.Fatalf("Check(%q) = %v, %v: want an object or problems", raw, obj, problems)
		}
		if obj != nil {
			Fields("n", obj)
		}
	})
}
