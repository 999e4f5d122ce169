package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// apiError is every error body: what went wrong and what to do about it.
type apiError struct {
	Error string `json:"error"`
	Fix   string `json:"fix,omitempty"`
	// Diagnostics explain a pipeline that does not validate.
	Diagnostics any `json:"diagnostics,omitempty"`
}

func writeError(w http.ResponseWriter, status int, msg, fix string) {
	writeJSON(w, status, apiError{Error: msg, Fix: fix})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // JSON, served as such with nosniff: "<token>" stays readable
	_ = enc.Encode(v)
}

// readJSON decodes a JSON request body of at most limit bytes into v,
// answering the client itself when it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) bool {
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("the body must be JSON, not %q", r.Header.Get("Content-Type")),
			"send Content-Type: application/json")
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", limit), "send a smaller request")
			return false
		}
		writeError(w, http.StatusBadRequest, "the body is not valid JSON for this endpoint: "+err.Error(),
			"see docs/openapi.yaml for the request schema")
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "the body has data after its JSON object", "send exactly one JSON object")
		return false
	}
	return true
}

// queryInt reads an optional integer query parameter.
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := strings.TrimSpace(r.URL.Query().Get(name))
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s=%q: want an integer from %d to %d", name, s, lo, hi)
	}
	return n, nil
}
