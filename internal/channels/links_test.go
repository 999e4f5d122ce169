package channels_test

import (
	"strings"
	"testing"

	"nanohost/internal/channels"
)

// Links under a plain-text message: each on its own line, with its URL
// when it has one.
func TestLinksText(t *testing.T) {
	got := channels.LinksText([]channels.Link{
		{Text: "Changes since the run started: 2 files (+4 −1)", URL: "http://127.0.0.1:8377/runs/r#changes"},
		{Text: "no dashboard"},
	})
	if !strings.HasPrefix(got, "\n   Changes since the run started: 2 files (+4 −1): http://127.0.0.1:8377/runs/r#changes") ||
		!strings.HasSuffix(got, "\n   no dashboard") {
		t.Errorf("LinksText = %q", got)
	}
	if channels.LinksText(nil) != "" {
		t.Error("no links add nothing")
	}
}
