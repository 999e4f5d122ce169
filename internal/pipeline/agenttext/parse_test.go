package agenttext

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestParseTags(t *testing.T) {
	tests := []struct {
		name  string
		text  string
		want  Parsed // Warnings compared by count only
		warns int
	}{
		{
			name: "no tags",
			text: "All done.\n",
			want: Parsed{Clean: "All done."},
		},
		{
			name: "outcome at the end",
			text: "Implemented the parser.\n\n[outcome:success]",
			want: Parsed{Status: "success", Clean: "Implemented the parser."},
		},
		{
			name: "case, spaces and hyphen",
			text: "Tests are flaky. [ OUTCOME : Partial-Success ]",
			want: Parsed{Status: "partial_success", Clean: "Tests are flaky."},
		},
		{
			name: "last outcome wins",
			text: "I was told to end with [outcome:success] or [outcome:fail].\nIt broke.\n[outcome:fail]",
			want: Parsed{Status: "fail", Clean: "I was told to end with or .\nIt broke."},
		},
		{
			name: "failed is fail",
			text: "[outcome:failed]",
			want: Parsed{Status: "fail"},
		},
		{
			name: "a custom outcome word is an outcome",
			text: "ok [outcome:success]\n[outcome:Needs-DoD]",
			want: Parsed{Status: "needs_dod", Clean: "ok"},
		},
		{
			name: "succeeded is success",
			text: "[outcome:succeeded]",
			want: Parsed{Status: "success"},
		},
		{
			name:  "a misspelt status is a custom outcome, with a warning",
			text:  "[outcome:succes]",
			want:  Parsed{Status: "succes"},
			warns: 1,
		},
		{
			name:  "a non-word outcome is removed, warned and does not override",
			text:  "ok [outcome:success]\n[outcome:<success|fail>]",
			want:  Parsed{Status: "success", Clean: "ok"},
			warns: 1,
		},
		{
			name:  "a non-word outcome alone leaves no status",
			text:  "[outcome:<success|fail>]",
			want:  Parsed{},
			warns: 1,
		},
		{
			name: "preferred label with accelerator brackets",
			text: "Looks good.\n[preferred_label:[A] Approve]\n[outcome:success]",
			want: Parsed{Status: "success", PreferredLabel: "[A] Approve", Clean: "Looks good."},
		},
		{
			name: "preferred label last non-empty wins, quotes stripped",
			text: `[preferred_label:Fix] [preferred_label:"Ship it"] [preferred_label:]`,
			want: Parsed{PreferredLabel: "Ship it"},
		},
		{
			name: "next appends in order without duplicates",
			text: "[next:review] [next: deploy, review ] [next:]",
			want: Parsed{Next: []string{"review", "deploy"}},
		},
		{
			name: "context later key wins, value keeps '='",
			text: "[context:tests=12 passing]\n[context:query=a=b]\n[context: tests = 13 passing ]",
			want: Parsed{Context: map[string]string{"tests": "13 passing", "query": "a=b"}},
		},
		{
			name:  "context without '=' is removed and warned",
			text:  "x [context:oops] y",
			want:  Parsed{Clean: "x y"},
			warns: 1,
		},
		{
			name: "inline code and bold wrappers go too",
			text: "Done `[outcome:success]`\nAlso **[next:deploy]**",
			want: Parsed{Status: "success", Next: []string{"deploy"}, Clean: "Done\nAlso"},
		},
		{
			name: "tags inside a fenced block still count",
			text: "```\nresult\n[outcome:retry]\n```",
			want: Parsed{Status: "retry", Clean: "```\nresult\n```"},
		},
		{
			name: "tag line between paragraphs leaves one blank line",
			text: "para one\n\n[next:x]\n\npara two",
			want: Parsed{Next: []string{"x"}, Clean: "para one\n\npara two"},
		},
		{
			name: "tag on the first line",
			text: "[outcome:success]\n\nSummary here",
			want: Parsed{Status: "success", Clean: "Summary here"},
		},
		{
			name: "CRLF line endings",
			text: "Done.\r\n[outcome:success]\r\n",
			want: Parsed{Status: "success", Clean: "Done."},
		},
		{
			name: "tags spliced by a removal are removed too",
			text: "x [outc[next:a]ome:fail] y",
			want: Parsed{Status: "fail", Next: []string{"a"}, Clean: "x y"},
		},
		{
			name: "a tag cannot span lines",
			text: "[outcome:\nsuccess]",
			want: Parsed{Clean: "[outcome:\nsuccess]"},
		},
		{
			name: "other brackets are left alone",
			text: "See [the docs](http://x) and [1] and [note: later] and arr[i]",
			want: Parsed{Clean: "See [the docs](http://x) and [1] and [note: later] and arr[i]"},
		},
		{
			name: "indentation survives a removed tag",
			text: "  - item [next:a]\n    more",
			want: Parsed{Next: []string{"a"}, Clean: "  - item\n    more"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Parse(tt.text)
			if len(got.Warnings) != tt.warns {
				t.Errorf("warnings = %q, want %d", got.Warnings, tt.warns)
			}
			got.Warnings = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q)\n got %#v\nwant %#v", tt.text, got, tt.want)
			}
		})
	}
}

func TestParseWarningSaysWhatToWrite(t *testing.T) {
	p := Parse("[outcome:done!]")
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], `"done!"`) || !strings.Contains(p.Warnings[0], "partial_success") {
		t.Fatalf("warning should name the bad value and the valid ones: %q", p.Warnings)
	}
}

func TestNormalizeStatus(t *testing.T) {
	for in, want := range map[string]string{
		"SUCCESS": "success", " partial success ": "partial_success", "Retry": "retry",
		"failure": "fail", "skipped": "skipped", "succeeded": "success", "done": "done", "needs-DoD": "needs_dod",
		"<success|fail>": "", "done!": "", "": "",
	} {
		if got := NormalizeStatus(in); got != want {
			t.Errorf("NormalizeStatus(%q) = %q, want %q", in, got, want)
		}
	}
}

// anyTag is an independent (regexp) definition of a recognised tag with a
// bracket-free value, used to check that Clean never shows one.
var anyTag = regexp.MustCompile(`(?i)\[[ \t]*(outcome|preferred[_-]label|next|context)[ \t]*:[^\[\]\n]*\]`)

func FuzzAgentTextParse(f *testing.F) {
	for _, seed := range []string{
		"done [outcome:success]",
		"[outc[outcome:x]ome:fail]",
		"[[next:a]next:b]",
		"`[outcome:success]`\n**[next:a]**",
		"[preferred_label:[A] Approve]",
		"[context:k=v]\r\n\r\n[context:=]",
		"[  Preferred-Label :  x ]",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p := Parse(text)
		if m := anyTag.FindString(p.Clean); m != "" {
			t.Fatalf("Clean still shows tag %q\ninput: %q\nclean: %q", m, text, p.Clean)
		}
		again := Parse(p.Clean)
		if again.Clean != p.Clean || again.Status != "" || again.PreferredLabel != "" || len(again.Next) != 0 || len(again.Context) != 0 || len(again.Warnings) != 0 {
			t.Fatalf("Clean still holds tags\ninput: %q\nclean: %q\nagain: %#v", text, p.Clean, again)
		}
		if p.Status != "" && NormalizeStatus(p.Status) != p.Status {
			t.Fatalf("status %q is not normalised", p.Status)
		}
	})
}

func BenchmarkParse(b *testing.B) {
	text := strings.Repeat("Some agent output line with [brackets] and code arr[i].\n", 2000) + "[outcome:success]\n[next:deploy]"
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Parse(text)
	}
}

func BenchmarkParseNested(b *testing.B) {
	// Adversarial: deeply spliced tags must stay linear.
	text := strings.Repeat("[outc", 20000) + "[outcome:success]" + strings.Repeat("ome:fail]", 20000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Parse(text)
	}
}
