package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"nanohost/internal/runs"
)

// sessionCookie carries a login: name, expiry and an HMAC keyed by the
// token, so changing the token logs everyone out and the cookie never holds
// the token itself.
const sessionCookie = "nanohost_session"

// authenticator decides who a request comes from.
type authenticator struct {
	token    string
	tokenSum [32]byte // compared in constant time, whatever the lengths
	key      []byte   // session HMAC key
	listen   string
	ttl      time.Duration
	now      func() time.Time
}

func newAuthenticator(token, listen string, ttl time.Duration, now func() time.Time) *authenticator {
	a := &authenticator{token: token, listen: listen, ttl: ttl, now: now}
	if token != "" {
		a.tokenSum = sha256.Sum256([]byte(token))
		k := sha256.Sum256([]byte("nanohost web session\x00" + token))
		a.key = k[:]
	}
	return a
}

// tokenMatches compares a presented token with the configured one in
// constant time (hashing first makes the time independent of the length too).
func (a *authenticator) tokenMatches(presented string) bool {
	sum := sha256.Sum256([]byte(presented))
	return a.token != "" && subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

// identify returns the caller's name ("web:token", "web:ana", "web:local")
// or "" when the request is not authenticated.
func (a *authenticator) identify(r *http.Request) string {
	if a.token == "" {
		return "web:local"
	}
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, cred, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") && a.tokenMatches(strings.TrimSpace(cred)) {
			return "web:token"
		}
		return ""
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		if name, ok := a.checkSession(c.Value); ok {
			return "web:" + name
		}
	}
	return ""
}

var userNamePattern = regexp.MustCompile(`[^A-Za-z0-9._@-]+`)

// cleanUserName makes a login name safe to record ("web:<name>").
func cleanUserName(name string) string {
	name = userNamePattern.ReplaceAllString(strings.TrimSpace(name), "-")
	name = strings.Trim(name, "-")
	if len(name) > 40 {
		name = name[:40]
	}
	if name == "" {
		return "token"
	}
	return name
}

func (a *authenticator) newSession(name string) (value string, expires time.Time) {
	expires = a.now().Add(a.ttl)
	payload := base64.RawURLEncoding.EncodeToString([]byte(name)) + "." + strconv.FormatInt(expires.Unix(), 10)
	return payload + "." + a.mac(payload), expires
}

func (a *authenticator) checkSession(v string) (string, bool) {
	i := strings.LastIndexByte(v, '.')
	if i < 0 {
		return "", false
	}
	payload, sig := v[:i], v[i+1:]
	if !hmac.Equal([]byte(sig), []byte(a.mac(payload))) {
		return "", false
	}
	enc, exp, ok := strings.Cut(payload, ".")
	if !ok {
		return "", false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || a.now().Unix() >= unix {
		return "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(name), true
}

func (a *authenticator) mac(payload string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(payload))
	return hex.EncodeToString(m.Sum(nil))
}

// hostAllowed guards a server without a token against DNS rebinding: a
// page on evil.example whose name resolves to 127.0.0.1 would otherwise be
// "same origin" with the dashboard. Only loopback names (or the exact
// listen address) may be used to reach it.
func (a *authenticator) hostAllowed(r *http.Request) bool {
	if a.token != "" {
		return true
	}
	host := r.Host
	if host == a.listen {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return isLoopbackHost(host)
}

type userKey struct{}

// userOf returns the authenticated caller ("web:<name>").
func userOf(r *http.Request) string {
	u, _ := r.Context().Value(userKey{}).(string)
	return u
}

// principal is who a request acts as, for the runs service: the
// dashboard's endpoint, its signed-in user.
func (s *Server) principal(r *http.Request) runs.Principal {
	return runs.Principal{Endpoint: "web", User: userOf(r)}
}

// secure wraps the mux: security headers, the rebinding guard,
// authentication, then cross-origin protection for state changes.
func (s *Server) secure(mux *http.ServeMux) http.Handler {
	public := map[string]bool{}
	for _, rt := range s.routes() {
		if rt.Public {
			public[rt.Method+" "+rt.Path] = true
		}
	}
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Warn("cross-site request refused", "method", r.Method, "path", r.URL.Path,
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		writeError(w, http.StatusForbidden, "cross-site request refused",
			"state-changing requests must come from the dashboard's own pages (or from a non-browser client with the bearer token)")
	}))
	authed := cop.Handler(s.htmlErrors(mux))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setSecurityHeaders(w.Header())
		if !s.auth.hostAllowed(r) {
			writeError(w, http.StatusMisdirectedRequest, "this dashboard only answers to loopback host names",
				"open it as http://127.0.0.1:<port>/ or http://localhost:<port>/, or set http.token to serve other names")
			return
		}
		_, pattern := mux.Handler(r)
		user := s.auth.identify(r)
		if user == "" && !public[pattern] {
			s.unauthorized(w, r)
			return
		}
		ctx := context.WithValue(r.Context(), userKey{}, user)
		authed.ServeHTTP(w, r.WithContext(ctx))
	})
}

// unauthorized answers 401 to API clients and sends browsers to the login form.
func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && wantsHTML(r) && r.Header.Get("Authorization") == "" {
		http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="nanohost"`)
	writeError(w, http.StatusUnauthorized, "authentication required",
		"send the http.token as 'Authorization: Bearer <token>', or log in at /login")
}

// wantsHTML reports whether a request is a browser's for a page: the API
// (/pipelines…) and clients that ask for JSON get JSON.
func wantsHTML(r *http.Request) bool {
	if r.URL.Path == "/pipelines" || strings.HasPrefix(r.URL.Path, "/pipelines/") || strings.HasPrefix(r.URL.Path, "/static/") {
		return false
	}
	accept := r.Header.Get("Accept")
	return strings.Contains(accept, "text/html") && !strings.Contains(accept, "application/json")
}

func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}
