package channels_test

import (
	"testing"

	"nanohost/internal/channels"
)

func TestParseRegister(t *testing.T) {
	for _, tc := range []struct {
		text string
		want channels.RegisterCommand
		ok   bool
	}{
		{"/register slack:C0123 team", channels.RegisterCommand{Chat: "slack:C0123", Folder: "team"}, true},
		{"  /register C0123 team @bot  ", channels.RegisterCommand{Chat: "C0123", Folder: "team", Trigger: "@bot"}, true},
		{"/register", channels.RegisterCommand{}, false},
		{"/register C0123", channels.RegisterCommand{}, false},
		{"/register a b c d", channels.RegisterCommand{}, false},
	} {
		got, ok := channels.ParseRegister(tc.text)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseRegister(%q) = %+v, %v; want %+v, %v", tc.text, got, ok, tc.want, tc.ok)
		}
		if !channels.IsRegister(tc.text) {
			t.Errorf("IsRegister(%q) = false", tc.text)
		}
	}
	if channels.IsRegister("please /register me") {
		t.Error("a message that only mentions /register is taken as the command")
	}
}
