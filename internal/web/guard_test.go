package web

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestHostGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	for _, tt := range []struct {
		listen, token, host string
		want                int
	}{
		{"127.0.0.1:8377", "", "127.0.0.1:8377", http.StatusTeapot},
		{"127.0.0.1:8377", "", "localhost:8377", http.StatusTeapot},
		{"127.0.0.1:8377", "", "evil.example:8377", http.StatusMisdirectedRequest},
		{"127.0.0.1:8377", "", "evil.example", http.StatusMisdirectedRequest},
		// With a token any name may be used: the handler checks the token.
		{"127.0.0.1:8377", "s3cret", "evil.example", http.StatusTeapot},
		{"0.0.0.0:8377", "s3cret", "ops.example.com", http.StatusTeapot},
		// Off loopback without a token nothing is served, whatever the name.
		{"0.0.0.0:8377", "", "localhost:8377", http.StatusForbidden},
		{"10.0.0.5:8377", "", "10.0.0.5:8377", http.StatusForbidden},
	} {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Host = tt.host
		rec := httptest.NewRecorder()
		HostGuard(tt.listen, tt.token, ok).ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("listen %s token %q Host %s: %d, want %d (%s)", tt.listen, tt.token, tt.host, rec.Code, tt.want, rec.Body)
		}
	}
}
