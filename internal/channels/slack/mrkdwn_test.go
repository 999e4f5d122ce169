package slack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
)

func TestEscapeMrkdwnNeutralisesMarkup(t *testing.T) {
	got := escapeMrkdwn("<!channel> <@U1> <#C1|x> <https://evil|ok> a&b @here @everyone")
	want := "&lt;!channel&gt; &lt;@U1&gt; &lt;#C1|x&gt; &lt;https://evil|ok&gt; a&amp;b @\u2060here @\u2060everyone"
	if got != want {
		t.Errorf("escapeMrkdwn = %q, want %q", got, want)
	}
}

var danglingEntity = regexp.MustCompile(`&[a-z]{0,3}$`)

func TestEscapeLimitedCutsBetweenCharacters(t *testing.T) {
	note := "\n… (truncated)"
	for _, raw := range []string{
		strings.Repeat("<", 5000),
		strings.Repeat("a&", 3000),
		strings.Repeat("ü€😀", 2000),
		strings.Repeat("@channel ", 600),
	} {
		got := escapeLimited(raw, maxSectionText, note)
		if n := len(utf16.Encode([]rune(got))); n > maxSectionText {
			t.Errorf("%d characters, over the %d limit", n, maxSectionText)
		}
		body, found := strings.CutSuffix(got, note)
		if !found {
			t.Errorf("no truncation note on a cut text")
		}
		if danglingEntity.MatchString(body) || !utf8.ValidString(body) {
			t.Errorf("cut inside an entity or a character: …%q", body[max(0, len(body)-10):])
		}
	}
	if exact := strings.Repeat("a", maxSectionText-5) + "&"; escapeLimited(exact, maxSectionText, note) != exact[:len(exact)-1]+"&amp;" {
		t.Error("a text that fits the limit exactly must not be cut")
	}
	if got := escapeLimited("```go\n"+strings.Repeat("x", 200)+"\n```", 100, note); !strings.HasSuffix(got, "\n```"+note) {
		t.Errorf("a cut inside a code block must close it before the note: …%q", got[max(0, len(got)-40):])
	}
	if got := plainLimited(strings.Repeat("😀", 40), 75); len(utf16.Encode([]rune(got))) > 75 || !strings.HasSuffix(got, "…") {
		t.Errorf("button text %q is over 75 UTF-16 units or was not marked as cut", got)
	}
	if got := escapeLimited("short & sweet", 100, "note"); got != "short &amp; sweet" {
		t.Errorf("a text within the limit must not be cut: %q", got)
	}
}

func TestMentionOnlyForUserIDs(t *testing.T) {
	if got := mention("U0ALICE"); got != "<@U0ALICE>" {
		t.Errorf("mention(U0ALICE) = %q", got)
	}
	if got := mention("<!channel>"); got != "&lt;!channel&gt;" {
		t.Errorf("a non-id must be escaped, got %q", got)
	}
}

func noGates(string) string { return "" }

func TestGateButtonsRoundTripAndRejectTampering(t *testing.T) {
	p := runs.Gate{RunID: "run-1", GateID: "review-1", Nonce: "abc123", Choices: []engine.Option{{Key: "A", Label: "[A] Approve", To: "ship"}}}
	// Read the button back as Slack receives it.
	raw, err := json.Marshal(renderPromptPages(p, nil)[0].blocks)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []struct {
		Type     string `json:"type"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
		} `json:"elements"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		t.Fatal(err)
	}
	var actionID, value string
	for _, b := range blocks {
		if b.Type == "actions" {
			actionID, value = b.Elements[0].ActionID, b.Elements[0].Value
		}
	}
	got, ok := decodeGateAction(actionID, value, noGates)
	if !ok || got != (runs.GateAnswer{RunID: "run-1", GateID: "review-1", Nonce: "abc123", Option: 1}) {
		t.Fatalf("decode(%q, %q) = %+v, %v", actionID, value, got, ok)
	}
	if _, ok := decodeGateAction(actionID, strings.Replace(value, "abc123", "zzz999", 1), noGates); ok {
		t.Error("a value whose nonce disagrees with its action_id was accepted")
	}
	if _, ok := decodeGateAction("some.other.button", value, noGates); ok {
		t.Error("a button that is not a gate button was accepted")
	}
}

// BenchmarkRenderLongAgentText measures the cost of posting a 40 kB agent
// response (escaped, truncated to Slack's limits) in a run thread.
func BenchmarkRenderLongAgentText(b *testing.B) {
	m := channels.Message{Text: "💬 Implement", Detail: strings.Repeat("a <b> & @channel ", 2500), LogRef: "runs/r1"}
	b.ReportAllocs()
	for b.Loop() {
		render(m)
	}
}

// BenchmarkRenderHugeGatePrompt measures rendering a gate at every limit:
// 520 choices with long labels over three messages, a long question, node
// id and approvers list, all held to Block Kit's limits.
func BenchmarkRenderHugeGatePrompt(b *testing.B) {
	p := runs.Gate{RunID: "run-1", GateID: strings.Repeat("deploy<&>", 400), Nonce: "abc123"}
	p.Text = strings.Repeat("Ship it to <everyone> & everything? ", 200)
	p.Approvers = strings.Repeat("U0PEOPLE001,", 300)
	for i := range 520 {
		p.Choices = append(p.Choices, engine.Option{Key: strconv.Itoa(i),
			Label: fmt.Sprintf("[%d] region %d %s", i, i, strings.Repeat("with a long explanation ", 20))})
	}
	b.ReportAllocs()
	for b.Loop() {
		renderPromptPages(p, nil)
	}
}

// A button's value carries the gate id while it fits Slack's 2,000
// characters, and leaves it out (the channel remembers it) past that.
func TestButtonValueAtTheLimit(t *testing.T) {
	p := runs.Gate{RunID: "run-1", Nonce: "abc123", Choices: []engine.Option{{Key: "A", Label: "Approve"}}}
	base := len(buttonValue(p, 1, true))
	p.GateID = strings.Repeat("g", maxButtonValue-base-len(`,"g":""`))
	if v := buttonValue(p, 1, !longGateID(p)); len(v) != maxButtonValue || !strings.Contains(v, p.GateID) {
		t.Errorf("at the limit: value of %d characters, gate id kept %v", len(v), strings.Contains(v, p.GateID))
	}
	p.GateID += "g"
	if v := buttonValue(p, 1, !longGateID(p)); len(v) > maxButtonValue || strings.Contains(v, `"g"`) || !longGateID(p) {
		t.Errorf("past the limit: value of %d characters %q", len(v), v[:min(len(v), 80)])
	}
	answer, ok := decodeGateAction(gateActionPrefix+"abc123.0", buttonValue(p, 1, false), func(nonce string) string {
		if nonce == "abc123" {
			return p.GateID
		}
		return ""
	})
	if !ok || answer.GateID != p.GateID || answer.Option != 1 {
		t.Errorf("decoded %+v, %v; want the remembered gate id", answer.RunID, ok)
	}
}
