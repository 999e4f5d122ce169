package web

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"
)

// errorPage is an error as a browser is shown it: the API's error body
// (what went wrong, what to do) on a page with the way back.
type errorPage struct {
	pageBase
	Status     int
	StatusText string
	apiError
}

// htmlErrors words the error answers of the dashboard's pages for people:
// a browser that asks for a page that is not there, or a run that does not
// exist, gets a page saying so with a link back instead of JSON. API paths
// and clients asking for JSON keep the JSON body every handler writes.
func (s *Server) htmlErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !wantsHTML(r) {
			next.ServeHTTP(w, r)
			return
		}
		cw := &errorCatcher{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if cw.status == 0 {
			return
		}
		var body apiError
		if err := json.Unmarshal(cw.body.Bytes(), &body); err != nil || body.Error == "" {
			body.Error = http.StatusText(cw.status)
		}
		body.Error, body.Fix = sentence(body.Error), sentence(body.Fix)
		w.Header().Del("Content-Length")
		s.render(w, s.pages.errorPage, cw.status, errorPage{pageBase: s.base(r, http.StatusText(cw.status)),
			Status: cw.status, StatusText: http.StatusText(cw.status), apiError: body})
	})
}

// errorCatcher holds back a JSON error answer (status ≥ 400) so it can
// be shown as a page; anything else passes straight through.
type errorCatcher struct {
	http.ResponseWriter
	status int // the held-back error's status; 0 when passing through
	body   bytes.Buffer
	passed bool
}

func (c *errorCatcher) WriteHeader(code int) {
	if !c.passed && c.status == 0 && code >= 400 &&
		strings.HasPrefix(c.Header().Get("Content-Type"), "application/json") {
		c.status = code
		return
	}
	c.passed = true
	c.ResponseWriter.WriteHeader(code)
}

func (c *errorCatcher) Write(b []byte) (int, error) {
	if c.status != 0 {
		return c.body.Write(b)
	}
	c.passed = true
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (c *errorCatcher) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// sentence starts s with a capital letter, as a page shows it.
func sentence(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}
