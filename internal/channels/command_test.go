package channels

import (
	"nanohost/internal/runs"
	"reflect"
	"strings"
	"testing"

	"nanohost/internal/pipeline"
)

const rsiDOT = `digraph Feature {
  graph [goal="Add RSI indicator"]
  start [shape=Mdiamond]
  done [shape=Msquare]
  start -> done [label="go"]
}`

func TestParseCommandForms(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want Command
	}{
		{"empty is help", "", Command{Kind: CmdHelp}},
		{"help", "help", Command{Kind: CmdHelp}},
		{"with slash prefix", "/pipeline list", Command{Kind: CmdList}},
		{"inline DOT", rsiDOT, Command{Kind: CmdRunDOT, DOT: rsiDOT}},
		{"run inline DOT", "run " + rsiDOT, Command{Kind: CmdRunDOT, DOT: rsiDOT}},
		{"named run", "run feature", Command{Kind: CmdRunNamed, Name: "feature"}},
		{"named run with goal", "run feature Add RSI indicator", Command{Kind: CmdRunNamed, Name: "feature", Goal: "Add RSI indicator"}},
		{"named run with quoted goal", `run feature "Add RSI indicator"`, Command{Kind: CmdRunNamed, Name: "feature", Goal: "Add RSI indicator"}},
		{"status all", "status", Command{Kind: CmdStatus}},
		{"status run", "status r-42", Command{Kind: CmdStatus, RunID: "r-42"}},
		{"cancel", "cancel r-42", Command{Kind: CmdCancel, RunID: "r-42"}},
		{"resume", "RESUME r-42", Command{Kind: CmdResume, RunID: "r-42"}},
		{"answer by key", "answer 3f9a Y", Command{Kind: CmdAnswer, RunID: "3f9a", Answer: "Y"}},
		{"answer with text", `answer 3f9a "split it in two"`, Command{Kind: CmdAnswer, RunID: "3f9a", Answer: "split it in two"}},
		{"validate", "validate " + rsiDOT, Command{Kind: CmdValidate, DOT: rsiDOT}},
		{"verbosity first", "--verbosity verbose run feature", Command{Kind: CmdRunNamed, Name: "feature", Verbosity: runs.VerbosityVerbose}},
		{"verbosity last", "run feature Add RSI --verbosity=minimal", Command{Kind: CmdRunNamed, Name: "feature", Goal: "Add RSI", Verbosity: runs.VerbosityMinimal}},
		{"named run with inputs", `run deploy repo=acme/shop ref="release 2" ship it`, Command{Kind: CmdRunNamed, Name: "deploy", Goal: "ship it", Inputs: map[string]string{"repo": "acme/shop", "ref": "release 2"}}},
		{"inputs end at the goal", `run deploy repo=a set x=1`, Command{Kind: CmdRunNamed, Name: "deploy", Goal: "set x=1", Inputs: map[string]string{"repo": "a"}}},
		{"an empty input", `run deploy ref= now`, Command{Kind: CmdRunNamed, Name: "deploy", Goal: "now", Inputs: map[string]string{"ref": ""}}},
		{"verbosity middle", "run --verbosity Standard feature", Command{Kind: CmdRunNamed, Name: "feature", Verbosity: runs.VerbosityStandard}},
		{"verbosity after DOT", rsiDOT + " --verbosity verbose", Command{Kind: CmdRunDOT, DOT: rsiDOT, Verbosity: runs.VerbosityVerbose}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCommand(tt.in)
			if err != nil {
				t.Fatalf("ParseCommand(%q): %v", tt.in, err)
			}
			got.DOT = strings.TrimSpace(got.DOT)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseCommand(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseCommandRepairsSlackMangledPaste(t *testing.T) {
	// What Slack delivers when a user pastes rsiDOT inside a code fence on
	// a Mac: fences kept, quotes curled, arrows escaped as entities.
	mangled := "```dot\ndigraph Feature {\n  graph [goal=\u201cAdd RSI indicator\u201d]\n" +
		"  start [shape=Mdiamond]\n  done [shape=Msquare]\n  start -&gt; done [label=\u201cgo\u201d]\n}```"
	got, err := ParseCommand(mangled + " \u2014verbosity verbose")
	if err != nil {
		t.Fatal(err)
	}
	if got.Kind != CmdRunDOT || strings.TrimSpace(got.DOT) != rsiDOT {
		t.Errorf("repaired DOT:\n%s\nwant:\n%s", got.DOT, rsiDOT)
	}
	if got.Verbosity != runs.VerbosityVerbose {
		t.Errorf("verbosity = %q, want verbose (em dash autocorrected from --)", got.Verbosity)
	}
}

func TestCleanPasted(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a -&gt; b &amp;&amp; c &lt;d&gt;", "a -> b && c <d>"},
		{"&amp;lt; stays an entity", "&lt; stays an entity"},
		{"see <https://example.com/x|example.com/x>", "see example.com/x"},
		{"mail <mailto:a@b.c|a@b.c> or <https://x.y>", "mail a@b.c or https://x.y"},
		{"ping <@U123> in <#C9|ops>", "ping @U123 in #ops"},
		{"`digraph G {}`", "digraph G {}"},
		{"```digraph G { a -> b }```", "digraph G { a -> b }"},
		{"\u2018single\u2019 and \u201cdouble\u201d\u00a0quotes", `'single' and "double" quotes`},
	}
	for _, tt := range tests {
		if got := CleanPasted(tt.in); got != tt.want {
			t.Errorf("CleanPasted(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseCommandLeavesQuotedFlagInDOT(t *testing.T) {
	dot := `digraph G { a [label="try --verbosity verbose"] }`
	got, err := ParseCommand(dot)
	if err != nil {
		t.Fatal(err)
	}
	if got.DOT != dot || got.Verbosity != "" {
		t.Errorf("got %+v; a flag inside a DOT string must stay part of the DOT", got)
	}
}

func TestParseCommandErrorsSayWhatToFix(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{"lsit", `unknown subcommand "lsit" (did you mean "list"?)`},
		{"frobnicate now", "must start with `digraph`"},
		{"run", "run needs a pipeline name: /pipeline run <name>"},
		{"cancel", "cancel needs exactly one run id"},
		{"resume a b", "resume needs exactly one run id"},
		{"status a b", "status takes at most one run id"},
		{"list all", "list takes no arguments"},
		{"validate", "validate needs a pipeline"},
		{"run x --verbosity loud", `unknown verbosity "loud" (want minimal, standard or verbose)`},
		{"run x --verbosity", "--verbosity needs a value"},
	}
	for _, tt := range tests {
		_, err := ParseCommand(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseCommand(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
		}
	}
}

func TestCommandChanges(t *testing.T) {
	for kind, want := range map[CommandKind]bool{
		CmdRunDOT: true, CmdRunNamed: true, CmdResume: true, CmdCancel: true,
		CmdList: false, CmdStatus: false, CmdValidate: false, CmdHelp: false,
	} {
		if got := (Command{Kind: kind}).Changes(); got != want {
			t.Errorf("%s.Changes() = %v, want %v", kind, got, want)
		}
	}
}

func TestFormatDiagnosticsListsErrorsFirstWithLines(t *testing.T) {
	ds := []pipeline.Diagnostic{
		{Rule: "prompt_on_llm_nodes", Severity: pipeline.SeverityWarning, Message: "no prompt", NodeID: "plan", Line: 7, Column: 3},
		{Rule: "start_node", Severity: pipeline.SeverityError, Message: "no start node", Fix: "add start [shape=Mdiamond]", Line: 1},
	}
	got := FormatDiagnostics("pipeline.dot", ds)
	want := "✗ The pipeline has 1 error(s) and 1 other finding(s):\n" +
		"pipeline.dot:1: error [start_node] no start node (fix: add start [shape=Mdiamond])\n" +
		"pipeline.dot:7:3: warning [prompt_on_llm_nodes] node plan: no prompt"
	if got != want {
		t.Errorf("FormatDiagnostics:\n%s\nwant:\n%s", got, want)
	}
}

func FuzzParseCommand(f *testing.F) {
	for _, s := range []string{rsiDOT, "run x --verbosity=verbose", "```dot\n" + rsiDOT + "```", "<https://a|b> &amp;", "--verbosity", `run d a=1 b="x y" goal`, `run d a="open`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cmd, err := ParseCommand(s)
		if err == nil && cmd.Kind == "" {
			t.Fatalf("ParseCommand(%q) returned no kind and no error", s)
		}
		for k := range cmd.Inputs {
			if !runs.ValidInputKey(k) {
				t.Fatalf("ParseCommand(%q) took %q as an input name", s, k)
			}
		}
	})
}

func TestAnswerNeedsARunAndAnAnswer(t *testing.T) {
	for _, in := range []string{"answer", "answer 3f9a"} {
		if _, err := ParseCommand(in); err == nil || !strings.Contains(err.Error(), "/pipeline answer <run> <key|choice|text>") {
			t.Errorf("ParseCommand(%q) = %v; want the usage of answer", in, err)
		}
	}
}

// A message that is a /pipeline command typed wrong gets a hint with the
// command it probably meant; anything else is chat.
func TestMistypedCommand(t *testing.T) {
	for text, want := range map[string]string{
		"/pipelin list":       "/pipelin is not a command — did you mean /pipeline list?",
		"/pipline run demo":   "did you mean /pipeline run demo?",
		"/pipelines":          "did you mean /pipeline?",
		"/Pipelin stauts 3f9": "did you mean /pipeline help?",
		"/pipelin " + rsiDOT:  "did you mean /pipeline digraph …?",
		"/status 3f9":         "/status is not a command — did you mean /pipeline status 3f9?",
		"/runs":               "did you mean /pipeline list?",
		"/cancel":             "did you mean /pipeline cancel?",
		"/help":               "/pipeline list ",
		"/pipe":               "/pipe is not a command (/pipeline help lists the commands",
		"/deploy now":         "/deploy is not a command",
	} {
		if got := MistypedCommand(text); !strings.Contains(got, want) {
			t.Errorf("MistypedCommand(%q) = %q; want it to say %q", text, got, want)
		}
	}
	for _, text := range []string{"/pipeline list", "hello there", "pipeline list please", "/register C1 team", "/tmp/x is full", "y", ""} {
		if got := MistypedCommand(text); got != "" {
			t.Errorf("MistypedCommand(%q) = %q; want no hint", text, got)
		}
	}
}

// A pipeline pasted over several lines is open until its closing brace or
// fence; braces in strings and comments do not count.
func TestPasteOpen(t *testing.T) {
	for text, want := range map[string]bool{
		"/pipeline digraph G {":                       true,
		"/pipeline digraph G":                         true,
		"/pipeline digraph G {\n a -> b\n}":           false,
		"/pipeline " + rsiDOT:                         false,
		"/pipeline run digraph G {\n a [label=\"}\"]": true,
		"/pipeline validate digraph G { // }\n":       true,
		"/pipeline digraph G { /* } */ a }":           false,
		"/pipeline digraph G {\n# }\n}":               false,
		"/pipeline --verbosity verbose digraph G {":   true,
		"/pipeline ```dot":                            true,
		"/pipeline ```dot\ndigraph G { a }\n```":      false,
		"/pipeline run demo":                          false,
		"/pipeline run demo fix the graph {":          false,
		"/pipeline status":                            false,
		"/pipeline":                                   false,
		"digraph G {":                                 false,
		"/pipelinedigraph G {":                        false,
	} {
		if got := PasteOpen(text); got != want {
			t.Errorf("PasteOpen(%q) = %v, want %v", text, got, want)
		}
	}
}
