package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
)

// Routes: an agent's ANTHROPIC_BASE_URL is <gateway>/anthropic, its
// OPENAI_BASE_URL <gateway>/openai/v1; the rest of the path goes upstream
// as the agent sent it.
const (
	AnthropicPrefix = "/anthropic"
	OpenAIPrefix    = "/openai"
)

type api int

const (
	apiAnthropic api = iota
	apiOpenAI
)

// call is one request in flight: which API, and whose pass.
type call struct {
	api    api
	pass   *Pass
	target *url.URL
	rest   string
}

type callKey struct{}

func (g *Gateway) newProxy() (http.Handler, error) {
	anthropic, err := parseUpstream("anthropic", g.cfg.Anthropic.BaseURL)
	if err != nil {
		return nil, err
	}
	openai, err := parseUpstream("openai", g.cfg.OpenAI.BaseURL)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:        g.rewrite,
		Transport:      g.cfg.Transport,
		FlushInterval:  -1,                                                  // every SSE event reaches the agent as it comes
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug), // an agent hanging up mid-stream is no news
		ModifyResponse: g.meter,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			c := r.Context().Value(callKey{}).(*call)
			g.log.Warn("model API unreachable", "run", c.pass.binding.Run, "node", c.pass.binding.Node, "err", err)
			apiError(w, c.api, http.StatusBadGateway, "api_error", "nanohost gateway: the model API is unreachable")
		},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := &call{}
		switch {
		case hasPrefix(r.URL.Path, AnthropicPrefix):
			c.api, c.target, c.rest = apiAnthropic, anthropic, strings.TrimPrefix(r.URL.Path, AnthropicPrefix)
		case hasPrefix(r.URL.Path, OpenAIPrefix):
			c.api, c.target, c.rest = apiOpenAI, openai, strings.TrimPrefix(r.URL.Path, OpenAIPrefix)
		default:
			http.Error(w, "nanohost gateway: unknown route (use /anthropic/… or /openai/…)", http.StatusNotFound)
			return
		}
		c.pass = g.lookup(agentToken(r))
		if c.pass == nil {
			apiError(w, c.api, http.StatusUnauthorized, "authentication_error", "nanohost gateway: unknown or revoked token")
			return
		}
		if msg := g.meters.refusal(r.Context(), c.pass.binding); msg != "" {
			c.pass.refused(msg)
			g.meters.countRefusal(c.pass.binding)
			b := c.pass.binding
			g.log.Info("model call refused", "run", b.Run, "node", b.Node, "group", b.Group, "reason", msg)
			apiError(w, c.api, http.StatusForbidden, "permission_error", "nanohost: "+msg)
			return
		}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
	}), nil
}

func hasPrefix(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

func parseUpstream(name, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("gateway: the %s upstream %q is not an http(s) URL", name, raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	return u, nil
}

// agentToken is the token the agent sent as its key: x-api-key (Anthropic
// SDKs and Claude Code) or a bearer token (OpenAI SDKs, ANTHROPIC_AUTH_TOKEN).
func agentToken(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

// rewrite points the call upstream and swaps the agent's token for the
// real credential.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest) {
	c := pr.In.Context().Value(callKey{}).(*call)
	out := pr.Out
	out.URL.Scheme, out.URL.Host = c.target.Scheme, c.target.Host
	out.URL.Path, out.URL.RawPath = c.target.Path+c.rest, ""
	out.URL.RawQuery = pr.In.URL.RawQuery
	out.Host = ""
	out.Header.Del("X-Api-Key")
	out.Header.Del("Authorization")
	out.Header.Del("Cookie")
	// Let the transport ask for (and undo) compression, so the body the
	// gateway reads is plain.
	out.Header.Del("Accept-Encoding")
	switch up := g.cfg.Anthropic; {
	case c.api == apiOpenAI:
		if k := g.cfg.OpenAI.APIKey; k != "" {
			out.Header.Set("Authorization", "Bearer "+k)
		}
	case up.APIKey != "":
		out.Header.Set("X-Api-Key", up.APIKey)
	case up.OAuthToken != "":
		out.Header.Set("Authorization", "Bearer "+up.OAuthToken)
		out.Header.Set("Anthropic-Beta", joinBeta(out.Header.Get("Anthropic-Beta"), "oauth-2025-04-20"))
	}
}

func joinBeta(have, want string) string {
	for _, b := range strings.Split(have, ",") {
		if strings.TrimSpace(b) == want {
			return have
		}
	}
	if have == "" {
		return want
	}
	return have + "," + want
}

// meter follows a successful response's body and charges its usage when
// the body ends (or the agent hangs up).
func (g *Gateway) meter(resp *http.Response) error {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil
	}
	c := resp.Request.Context().Value(callKey{}).(*call)
	resp.Body = &meteredBody{rc: resp.Body, u: newUsageReader(resp.Header.Get("Content-Type")), done: func(u *usageReader) {
		model, use, ok := u.finish(g.cfg.Prices)
		if !ok {
			return
		}
		c.pass.charge(model, use)
		b := c.pass.binding
		g.log.Debug("model call", "run", b.Run, "node", b.Node, "group", b.Group, "model", model,
			"input_tokens", use.InputTokens, "output_tokens", use.OutputTokens, "cost_usd", use.CostUSD)
	}}
	return nil
}

// meteredBody passes a response body through unchanged while the usage
// reader reads along.
type meteredBody struct {
	rc   io.ReadCloser
	u    *usageReader
	done func(*usageReader)
	once sync.Once
}

func (b *meteredBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		b.u.Write(p[:n])
	}
	if err == io.EOF {
		b.finish()
	}
	return n, err
}

func (b *meteredBody) Close() error {
	b.finish()
	return b.rc.Close()
}

func (b *meteredBody) finish() { b.once.Do(func() { b.done(b.u) }) }

// apiError answers in the error format of the agent's API, so its SDK
// shows the message.
func apiError(w http.ResponseWriter, a api, status int, typ, msg string) {
	var body any
	if a == apiOpenAI {
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": typ}}
	} else {
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}
