package ipc

import (
	"strings"
	"testing"
)

// TestAuthorize walks every row of the decision: who asks (from the
// directory), what they ask for, and which chat it touches.
func TestAuthorize(t *testing.T) {
	reg := newRegistry(
		Group{Folder: "main", Chat: "C-main", Main: true},
		Group{Folder: "team", Chat: "C-team"},
		Group{Folder: "other", Chat: "C-other"},
		Group{Folder: "homeless"}, // registered without a chat
	)
	all := []Action{ActionStartPipeline, ActionCancelPipeline, ActionPipelineStatus, ActionSendMessage}
	type row struct {
		actor    string
		target   string
		allowed  bool
		chat     string // resolved chat when allowed
		inReason string // part of the reason when denied
	}
	rows := []row{
		// A group acts on its own chat, named or implied.
		{"team", "", true, "C-team", ""},
		{"team", "C-team", true, "C-team", ""},
		// ...and on no other chat, registered or not.
		{"team", "C-other", false, "", "only"},
		{"team", "C-main", false, "", "only"},
		{"team", "C-nowhere", false, "", "only"},
		// The main group acts on its own chat and on every registered chat.
		{"main", "", true, "C-main", ""},
		{"main", "C-main", true, "C-main", ""},
		{"main", "C-team", true, "C-team", ""},
		{"main", "C-other", true, "C-other", ""},
		// ...but not on a chat the host does not serve.
		{"main", "C-nowhere", false, "", "not registered"},
		// Unregistered folders, unsafe names and the reserved name do nothing.
		{"stranger", "", false, "", "not registered"},
		{"stranger", "C-team", false, "", "not registered"},
		{"../main", "", false, "", "not allowed"},
		{".processing", "", false, "", "not allowed"},
		{"", "", false, "", "not allowed"},
		{"errors", "", false, "", "reserved"},
		// A group without a chat has nowhere to act.
		{"homeless", "", false, "", "no chat"},
	}
	for _, action := range all {
		for _, r := range rows {
			d := Authorize(r.actor, action, Target{Chat: r.target}, reg)
			name := string(action) + " by " + r.actor + " on " + r.target
			if d.Allowed != r.allowed {
				t.Errorf("%s: allowed=%v (%s), want %v", name, d.Allowed, d.Reason, r.allowed)
				continue
			}
			if r.allowed && d.Chat != r.chat {
				t.Errorf("%s: resolved chat %q, want %q", name, d.Chat, r.chat)
			}
			if !r.allowed && !strings.Contains(d.Reason, r.inReason) {
				t.Errorf("%s: reason %q does not mention %q", name, d.Reason, r.inReason)
			}
		}
	}
	if d := Authorize("main", Action("delete_everything"), Target{}, reg); d.Allowed || !strings.Contains(d.Reason, "unknown action") {
		t.Errorf("unknown action: %+v", d)
	}
}
