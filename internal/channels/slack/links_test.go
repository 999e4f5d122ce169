package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

// A gate prompt's links show under its buttons: linked when they have an
// http(s) URL, their text escaped, anything else shown as text only.
func TestGatePromptShowsItsLinks(t *testing.T) {
	p := runs.Gate{RunID: "r", GateID: "g", Nonce: "n", Text: "Ship it?",
		Choices: []engine.Option{{Key: "A", Label: "[A] Approve"}}}
	links := []channels.Link{
		{Text: "Changes since the run started: 2 files (+4 −1)", URL: "https://nano.example.com/runs/r#changes"},
		{Text: "<!channel> *bold*", URL: "javascript:alert(1)"},
	}
	data, err := json.Marshal(renderPromptPages(p, links)[0].blocks)
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	if !strings.Contains(got, "\\u003chttps://nano.example.com/runs/r#changes|Changes since the run started: 2 files (+4 −1)\\u003e") {
		t.Errorf("the changes link is not in the prompt: %s", got)
	}
	if strings.Contains(got, "javascript:") || strings.Contains(got, "<!channel>") || strings.Contains(got, "\\u003c!channel\\u003e") {
		t.Errorf("a hostile link was rendered live: %s", got)
	}
}
