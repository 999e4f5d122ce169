// Package modeltest is a fake model API on loopback for tests: the
// Anthropic Messages API (POST /v1/messages, JSON or SSE) and an
// OpenAI-compatible chat completions API (POST /v1/chat/completions),
// answering like the real ones — usage in every response (message_start and
// message_delta in a stream), the real error shapes — and recording the
// credential each call carried.
package modeltest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Usage is what the fake says each answer cost.
type Usage struct {
	InputTokens, OutputTokens, CacheCreation, CacheRead int64
}

// API is the fake. Set its fields before the first call.
type API struct {
	*httptest.Server
	// Key is the only credential it accepts (x-api-key or a bearer token).
	Key string
	// Usage is what each answer reports (default 12 in, 34 out).
	Usage Usage
	// Text is each answer's text (default "hello from the model").
	Text string

	mu    sync.Mutex
	calls []Call
	fail  []failure
}

// Call is one request the fake received.
type Call struct {
	Path, Model string
	Stream      bool
	// Credential is the key it carried, and whether it was the right one.
	Credential string
	Authorized bool
}

type failure struct {
	status int
	typ    string
}

// Start starts a fake on loopback, stopped with the test.
func Start(t testing.TB) *API {
	var raw [16]byte
	rand.Read(raw[:])
	a := &API{Key: "sk-ant-REAL-" + hex.EncodeToString(raw[:]), Usage: Usage{InputTokens: 12, OutputTokens: 34}, Text: "hello from the model"}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

// FailNext makes the next call fail with status and the API's error type
// (e.g. 529 "overloaded_error").
func (a *API) FailNext(status int, typ string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = append(a.fail, failure{status, typ})
}

// Calls are the requests received so far.
func (a *API) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Call(nil), a.calls...)
}

type request struct {
	Model         string `json:"model"`
	MaxTokens     int    `json:"max_tokens"`
	Stream        bool   `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []json.RawMessage `json:"messages"`
}

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	openai := r.URL.Path == "/v1/chat/completions"
	if r.Method != http.MethodPost || (!openai && r.URL.Path != "/v1/messages") {
		writeError(w, openai, http.StatusNotFound, "not_found_error", "Not found: "+r.URL.Path)
		return
	}
	cred := r.Header.Get("X-Api-Key")
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && cred == "" {
		cred = t
	}
	var req request
	decodeErr := json.NewDecoder(r.Body).Decode(&req)
	call := Call{Path: r.URL.Path, Model: req.Model, Stream: req.Stream, Credential: cred, Authorized: cred == a.Key}
	a.mu.Lock()
	a.calls = append(a.calls, call)
	var fail *failure
	if len(a.fail) > 0 {
		fail = &a.fail[0]
		a.fail = a.fail[1:]
	}
	use, text := a.Usage, a.Text
	a.mu.Unlock()
	switch {
	case !call.Authorized:
		writeError(w, openai, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
	case decodeErr != nil || req.Model == "" || len(req.Messages) == 0:
		writeError(w, openai, http.StatusBadRequest, "invalid_request_error", "model and messages are required")
	case !openai && req.MaxTokens <= 0:
		writeError(w, openai, http.StatusBadRequest, "invalid_request_error", "max_tokens: Field required")
	case fail != nil:
		writeError(w, openai, fail.status, fail.typ, "the fake API was told to fail this call")
	case openai && req.Stream:
		a.streamOpenAI(w, req, use, text)
	case openai:
		writeJSON(w, map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": use.InputTokens, "completion_tokens": use.OutputTokens, "total_tokens": use.InputTokens + use.OutputTokens}})
	case req.Stream:
		a.streamAnthropic(w, req, use, text)
	default:
		writeJSON(w, map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{map[string]any{"type": "text", "text": text}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": use.InputTokens, "output_tokens": use.OutputTokens,
				"cache_creation_input_tokens": use.CacheCreation, "cache_read_input_tokens": use.CacheRead}})
	}
}

// StreamText is the body of an Anthropic stream for text and use, event by
// event as the fake sends it (tests compare what the agent received).
func StreamText(model, text string, use Usage) string {
	var b strings.Builder
	for _, ev := range anthropicEvents(model, text, use) {
		b.WriteString(ev)
	}
	return b.String()
}

func anthropicEvents(model, text string, use Usage) []string {
	event := func(name string, data any) string {
		j, _ := json.Marshal(data)
		return fmt.Sprintf("event: %s\ndata: %s\n\n", name, j)
	}
	evs := []string{
		event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
			"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": []any{},
			"stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": use.InputTokens, "output_tokens": 1,
				"cache_creation_input_tokens": use.CacheCreation, "cache_read_input_tokens": use.CacheRead}}}),
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
		event("ping", map[string]any{"type": "ping"}),
	}
	for _, word := range strings.SplitAfter(text, " ") {
		evs = append(evs, event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": word}}))
	}
	return append(evs,
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
		event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": use.OutputTokens}}),
		event("message_stop", map[string]any{"type": "message_stop"}),
	)
}

func (a *API) streamAnthropic(w http.ResponseWriter, req request, use Usage, text string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	for _, ev := range anthropicEvents(req.Model, text, use) {
		if _, err := w.Write([]byte(ev)); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

func (a *API) streamOpenAI(w http.ResponseWriter, req request, use Usage, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	send := func(v any) {
		j, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", j)
		if flusher != nil {
			flusher.Flush()
		}
	}
	for _, word := range strings.SplitAfter(text, " ") {
		send(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": word}}}})
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": req.Model, "choices": []any{},
			"usage": map[string]any{"prompt_tokens": use.InputTokens, "completion_tokens": use.OutputTokens}})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, openai bool, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if openai {
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ}})
		return
	}
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
