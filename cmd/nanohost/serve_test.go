package main

import (
	"strings"
	"testing"
)

// The console says when it can be typed at, and where the dashboard is —
// a browser cannot open 0.0.0.0, so an unspecified address becomes loopback.
func TestReadyNoticeNamesTheDashboard(t *testing.T) {
	tests := []struct {
		addr  string
		token bool
		want  string
	}{
		{"127.0.0.1:8377", false, "Dashboard: http://127.0.0.1:8377/"},
		{"0.0.0.0:9000", true, "Dashboard: http://127.0.0.1:9000/ (sign in with http.token)"},
		{"[::]:9000", true, "Dashboard: http://127.0.0.1:9000/"},
		{"[::1]:8377", false, "Dashboard: http://[::1]:8377/"},
	}
	for _, tt := range tests {
		got := readyNotice(tt.addr, tt.token)
		if !strings.HasPrefix(got, "nanohost is ready") || !strings.Contains(got, tt.want) {
			t.Errorf("readyNotice(%q) = %q, want it to contain %q", tt.addr, got, tt.want)
		}
	}
	if got := readyNotice("", false); strings.Contains(got, "Dashboard") {
		t.Errorf("no HTTP endpoint, yet %q", got)
	}
}
