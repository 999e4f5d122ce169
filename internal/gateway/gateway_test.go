package gateway_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"nanohost/internal/gateway"
	"nanohost/internal/gateway/modeltest"
)

// setup is a gateway in front of a fake model API, served on loopback.
func setup(t *testing.T, mutate func(*gateway.Config)) (*gateway.Gateway, *modeltest.API, *httptest.Server) {
	t.Helper()
	api := modeltest.Start(t)
	cfg := gateway.Config{
		Anthropic: gateway.Upstream{BaseURL: api.URL, APIKey: api.Key},
		OpenAI:    gateway.Upstream{BaseURL: api.URL, APIKey: api.Key},
		Logger:    slog.New(slog.DiscardHandler),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, api, srv
}

func post(t *testing.T, url, header, token, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if header == "bearer" {
		req.Header.Set("Authorization", "Bearer "+token)
	} else {
		req.Header.Set("X-Api-Key", token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(data)
}

const message = `{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":"hi"}]}`

func TestGatewaySwapsTheTokenForTheKey(t *testing.T) {
	g, api, srv := setup(t, nil)
	pass := g.Admit(gateway.Binding{Run: "r1", Node: "plan", Group: "team"})
	resp, body := post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", pass.Token(), message)
	if resp.StatusCode != 200 || !strings.Contains(body, "hello from the model") {
		t.Fatalf("call through the gateway: %d %s", resp.StatusCode, body)
	}
	calls := api.Calls()
	if len(calls) != 1 || !calls[0].Authorized || calls[0].Credential != api.Key {
		t.Fatalf("the fake API should have seen the real key once: %+v", calls)
	}
	// 12 in, 34 out at $3/$15 per million.
	want := gateway.Usage{InputTokens: 12, OutputTokens: 34, CostUSD: (12*3 + 34*15) / 1e6}
	if got := pass.Spent(); got.InputTokens != want.InputTokens || got.OutputTokens != want.OutputTokens || math.Abs(got.CostUSD-want.CostUSD) > 1e-12 {
		t.Fatalf("metered %+v, want %+v", got, want)
	}

	resp, body = post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", api.Key, message)
	if resp.StatusCode != 401 || !strings.Contains(body, "authentication_error") {
		t.Fatalf("the real key itself is no gateway token: %d %s", resp.StatusCode, body)
	}
	pass.Revoke()
	resp, body = post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", pass.Token(), message)
	if resp.StatusCode != 401 || !strings.Contains(body, "revoked") {
		t.Fatalf("a revoked token must be refused: %d %s", resp.StatusCode, body)
	}
	if n := len(api.Calls()); n != 1 {
		t.Fatalf("refused calls must not reach the API: %d calls", n)
	}
}

func TestGatewayPassesAnthropicStreamsIntact(t *testing.T) {
	g, api, srv := setup(t, nil)
	api.Usage = modeltest.Usage{InputTokens: 1500, OutputTokens: 420, CacheCreation: 100, CacheRead: 2000}
	api.Text = "a streamed answer in several events"
	pass := g.Admit(gateway.Binding{Run: "r1", Node: "plan", Group: "team"})
	resp, body := post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", pass.Token(), strings.Replace(message, `"max_tokens"`, `"stream":true,"max_tokens"`, 1))
	if want := modeltest.StreamText("claude-sonnet-4-5", api.Text, api.Usage); body != want {
		t.Fatalf("stream changed on its way:\n got %q\nwant %q", body, want)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("content type %q", ct)
	}
	got := pass.Spent()
	if got.InputTokens != 1500+100+2000 || got.OutputTokens != 420 || got.CacheRead != 2000 || got.CacheWrite != 100 {
		t.Fatalf("metered %+v", got)
	}
	wantCost := (1500*3 + 100*3.75 + 2000*0.3 + 420*15) / 1e6
	if math.Abs(got.CostUSD-wantCost) > 1e-12 {
		t.Fatalf("cost %v, want %v", got.CostUSD, wantCost)
	}
}

func TestGatewayCountsOpenAICallsAndUnknownModels(t *testing.T) {
	g, api, srv := setup(t, nil)
	pass := g.Admit(gateway.Binding{Run: "r1", Node: "n", Group: "team"})
	body := `{"model":"local-llama","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	resp, out := post(t, srv.URL+"/openai/v1/chat/completions", "bearer", pass.Token(), body)
	if resp.StatusCode != 200 || !strings.Contains(out, "[DONE]") {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	if c := api.Calls(); len(c) != 1 || c[0].Credential != api.Key {
		t.Fatalf("the API should have seen the real key: %+v", c)
	}
	got := pass.Spent()
	if got.InputTokens != 12 || got.OutputTokens != 34 || got.UnpricedCalls != 1 || got.CostUSD != 0 {
		t.Fatalf("an unpriced model counts tokens and says its cost is unknown: %+v", got)
	}
	totals := g.Totals()
	if len(totals) != 1 || totals[0].Group != "team" || totals[0].Model != "local-llama" || totals[0].Calls != 1 {
		t.Fatalf("totals %+v", totals)
	}
}

func TestGatewayRefusesCallsPastABudget(t *testing.T) {
	g, api, srv := setup(t, func(c *gateway.Config) { c.GroupDaily = gateway.Limit{Tokens: 1000} })
	api.Usage = modeltest.Usage{InputTokens: 40, OutputTokens: 20}
	pass := g.Admit(gateway.Binding{Run: "r1", Node: "plan", Group: "team", RunLimit: gateway.Limit{Tokens: 100}})
	for i := range 2 { // 60, then 120: the call that crosses the limit completes
		if resp, body := post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", pass.Token(), message); resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", pass.Token(), message)
	var e struct {
		Type  string
		Error struct{ Type, Message string }
	}
	json.Unmarshal([]byte(body), &e)
	if resp.StatusCode != 403 || e.Type != "error" || e.Error.Message != "nanohost: run budget exhausted: 120 of 100 tokens" {
		t.Fatalf("third call: %d %s", resp.StatusCode, body)
	}
	if msg, n := pass.Refusal(); n != 1 || !strings.Contains(msg, "run budget exhausted") {
		t.Fatalf("refusal %q ×%d", msg, n)
	}
	if n := len(api.Calls()); n != 2 {
		t.Fatalf("the refused call reached the API: %d calls", n)
	}

	// Another run of the group goes on until the group's day is spent.
	other := g.Admit(gateway.Binding{Run: "r2", Node: "plan", Group: "team", RunSpent: gateway.Usage{InputTokens: 900}})
	if resp, body := post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", other.Token(), message); resp.StatusCode != 200 {
		t.Fatalf("another run: %d %s", resp.StatusCode, body)
	}
	api.Usage = modeltest.Usage{InputTokens: 800, OutputTokens: 100}
	post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", other.Token(), message)
	_, body = post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", other.Token(), message)
	if !strings.Contains(body, "group team's daily budget exhausted: 1,080 of 1,000 tokens") {
		t.Fatalf("the group's daily budget: %s", body)
	}
}

func TestGatewayPassesAPIErrorsThrough(t *testing.T) {
	g, api, srv := setup(t, nil)
	pass := g.Admit(gateway.Binding{Run: "r1", Node: "plan", Group: "team"})
	api.FailNext(529, "overloaded_error")
	resp, body := post(t, srv.URL+"/anthropic/v1/messages", "x-api-key", pass.Token(), message)
	if resp.StatusCode != 529 || !strings.Contains(body, "overloaded_error") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if got := pass.Spent(); got != (gateway.Usage{}) {
		t.Fatalf("an error costs nothing: %+v", got)
	}
}
