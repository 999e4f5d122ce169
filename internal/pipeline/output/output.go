// Package output reads a stage's typed output: the JSON object an agent
// returns (the last fenced ```json block of its answer, or output.json in
// its stage directory), checked against the stage's output_schema (a JSON
// Schema, validated by santhosh-tekuri/jsonschema), and the context fields it
// gives the next stages (<node>.<field>, JSON types kept).
package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// english words the validator's messages as the library does by default.
var english = message.NewPrinter(language.English)

// Bounds: what an agent returns is untrusted.
const (
	MaxOutput = 1 << 20   // bytes of one output object
	MaxSchema = 256 << 10 // bytes of one schema
	maxDepth  = 32        // nesting of objects flattened into context keys
)

// File is the name of the output file in a stage directory.
const File = "output.json"

// Schema is a compiled output_schema.
type Schema struct {
	Source string
	s      *jsonschema.Schema
}

var (
	cacheMu sync.Mutex
	cache   = map[string]*Schema{} // by source: a run asks for the same schemas again and again
)

// Compile compiles a JSON Schema given as text. A $ref to anything but the
// JSON Schema meta-schemas is refused: a schema never reads files or URLs.
func Compile(text string) (*Schema, error) {
	cacheMu.Lock()
	s, ok := cache[text]
	cacheMu.Unlock()
	if ok {
		return s, nil
	}
	if len(text) > MaxSchema {
		return nil, fmt.Errorf("the schema is %d bytes, over the %d-byte limit", len(text), MaxSchema)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, isObject := doc.(map[string]any); !isObject {
		return nil, errors.New(`a schema is a JSON object, such as {"type": "object", "properties": {…}}`)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	const url = "https://nanohost.invalid/output_schema.json" // never fetched: refuseLoader
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	s = &Schema{Source: text, s: compiled}
	cacheMu.Lock()
	if len(cache) > 1024 {
		clear(cache)
	}
	cache[text] = s
	cacheMu.Unlock()
	return s, nil
}

type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: an output_schema cannot refer to other documents; put everything in one schema ($defs)", url)
}

// Problem is one way an output misses its schema.
type Problem struct {
	Path string // the field, as a JSON pointer ("/confidence"); "" for the whole object
	Msg  string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Check decodes raw as a JSON object and validates it. It returns the
// object when it is valid, else the problems (at least one), the first one
// first.
func (s *Schema) Check(raw []byte) (map[string]any, []Problem) {
	if len(raw) > MaxOutput {
		return nil, []Problem{{Msg: fmt.Sprintf("the output is %d bytes, over the %d-byte limit", len(raw), MaxOutput)}}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&v); err != nil {
		return nil, []Problem{{Msg: "not JSON: " + err.Error()}}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, []Problem{{Msg: "not one JSON value: text follows the object"}}
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, []Problem{{Msg: "not a JSON object: the output is one object, {\"field\": value, …}"}}
	}
	err := s.s.Validate(v)
	if err == nil {
		return obj, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, []Problem{{Msg: err.Error()}}
	}
	var out []Problem
	leaves(ve, &out)
	if len(out) == 0 {
		out = append(out, Problem{Msg: ve.Error()})
	}
	return nil, out
}

// leaves collects the innermost errors: the ones that name a field.
func leaves(e *jsonschema.ValidationError, out *[]Problem) {
	if len(e.Causes) == 0 {
		*out = append(*out, Problem{Path: pointer(e.InstanceLocation), Msg: e.ErrorKind.LocalizedString(english)})
		return
	}
	for _, c := range e.Causes {
		leaves(c, out)
	}
}

func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// Find returns the body of the last fenced ```json block in text.
func Find(text string) (string, bool) {
	var body string
	found := false
	lines := strings.SplitAfter(text, "\n")
	for i := 0; i < len(lines); i++ {
		fence, lang, ok := opening(lines[i])
		if !ok {
			continue
		}
		var b strings.Builder
		closed := false
		j := i + 1
		for ; j < len(lines); j++ {
			if isClosing(lines[j], fence) {
				closed = true
				break
			}
			b.WriteString(lines[j])
		}
		if closed && strings.EqualFold(lang, "json") {
			body, found = b.String(), true
		}
		i = j
	}
	return body, found
}

// opening reads a fence line: ``` or ~~~ (three or more), then a language.
func opening(line string) (fence, lang string, ok bool) {
	s := strings.TrimLeft(line, " ")
	if len(line)-len(s) > 3 || len(s) < 3 || (s[0] != '`' && s[0] != '~') {
		return "", "", false
	}
	n := 0
	for n < len(s) && s[n] == s[0] {
		n++
	}
	if n < 3 {
		return "", "", false
	}
	info := strings.TrimSpace(s[n:])
	if s[0] == '`' && strings.Contains(info, "`") {
		return "", "", false
	}
	lang, _, _ = strings.Cut(info, " ")
	return s[:n], lang, true
}

func isClosing(line, fence string) bool {
	s := strings.TrimSpace(line)
	return strings.HasPrefix(s, fence) && strings.Trim(s, fence[:1]) == ""
}

// Fields are the context updates of a valid output of node: each field
// under <node>.<field>, objects flattened by dots, lists and values with
// their JSON types (numbers as float64, true/false as bool).
func Fields(node string, obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	flatten(node, obj, out, 0)
	return out
}

func flatten(prefix string, obj map[string]any, out map[string]any, depth int) {
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		key := prefix + "." + k
		if sub, ok := obj[k].(map[string]any); ok && depth < maxDepth && len(sub) > 0 {
			flatten(key, sub, out, depth+1)
			continue
		}
		out[key] = obj[k]
	}
}

// FieldTypes are the JSON types the schema gives the fields of an output
// of node, by context key (<node>.<field>, nested objects by dots): "number"
// (integer too), "boolean", "string", "array" or "object". A field whose
// type the schema leaves open is not listed.
func (s *Schema) FieldTypes(node string) map[string]string {
	var doc map[string]any
	if json.Unmarshal([]byte(s.Source), &doc) != nil {
		return nil
	}
	out := map[string]string{}
	fieldTypes(node, doc, out, 0)
	return out
}

func fieldTypes(prefix string, schema map[string]any, out map[string]string, depth int) {
	props, _ := schema["properties"].(map[string]any)
	for name, p := range props {
		ps, ok := p.(map[string]any)
		if !ok {
			continue
		}
		key := prefix + "." + name
		t := jsonType(ps)
		if t == "object" && depth < maxDepth {
			fieldTypes(key, ps, out, depth+1)
			continue
		}
		if t != "" {
			out[key] = t
		}
	}
}

// jsonType is the one type a property schema allows, "" when open.
func jsonType(ps map[string]any) string {
	var types []string
	switch t := ps["type"].(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				types = append(types, s)
			}
		}
	}
	if len(types) == 0 {
		if enum, ok := ps["enum"].([]any); ok && len(enum) > 0 {
			for _, v := range enum {
				if _, isString := v.(string); !isString {
					return ""
				}
			}
			return "string"
		}
		return ""
	}
	if len(types) != 1 {
		return ""
	}
	if types[0] == "integer" {
		return "number"
	}
	return types[0]
}
