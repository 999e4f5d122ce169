package web

import "net/http"

// HostGuard applies the dashboard's rule about who may reach the server to
// a handler that is served beside it (the host's /healthz and /metrics),
// so every route on the listen address answers the same requests:
//
//   - without a token, only requests naming a loopback host (or the exact
//     listen address) are served — the DNS-rebinding guard: a page on
//     evil.example whose name resolves to 127.0.0.1 must not read the run
//     counts or metrics through a visitor's browser;
//   - without a token on a non-loopback bind nothing is served (New refuses
//     to build the dashboard then, and the configuration check refuses to
//     start): such a server would be open to the network.
//
// Authentication itself (the bearer token) stays with next.
func HostGuard(listen, token string, next http.Handler) http.Handler {
	auth := newAuthenticator(token, listen, 0, nil)
	open := token == "" && !IsLoopback(listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		switch {
		case open:
			writeError(w, http.StatusForbidden, listen+" is not a loopback address and no token is set",
				"bind http.listen to 127.0.0.1, or set http.token (NANOHOST_HTTP_TOKEN)")
		case !auth.hostAllowed(r):
			writeError(w, http.StatusMisdirectedRequest, "this server only answers to loopback host names",
				"use http://127.0.0.1:<port>/ or http://localhost:<port>/, or set http.token to serve other names")
		default:
			next.ServeHTTP(w, r)
		}
	})
}
