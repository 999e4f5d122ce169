package store

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"nanohost/internal/gateway"
	"nanohost/internal/gateway/modeltest"
)

// TestDailyBudgetsSurviveARestart: a gateway whose ledger is the store
// meters a group's calls; a new gateway on the reopened store (nanohost
// restarted) refuses that group's next call on its spent daily budget, and
// another group's once everyone's daily budget is spent; the next UTC day
// starts from zero. On SQLite and PostgreSQL.
func TestDailyBudgetsSurviveARestart(t *testing.T) {
	eachBackend(t, func(t *testing.T, url string) {
		api := modeltest.Start(t)
		api.Usage = modeltest.Usage{InputTokens: 40, OutputTokens: 20} // 60 tokens a call
		now := time.Date(2026, 11, 27, 23, 0, 0, 0, time.UTC)
		start := func(st *Store) (*gateway.Gateway, string) {
			g, err := gateway.New(gateway.Config{
				Anthropic:  gateway.Upstream{BaseURL: api.URL, APIKey: api.Key},
				GroupDaily: gateway.Limit{Tokens: 100}, GlobalDaily: gateway.Limit{Tokens: 150},
				Ledger: st, Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler),
			})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(g)
			t.Cleanup(srv.Close)
			return g, srv.URL
		}
		call := func(url string, p *gateway.Pass) (int, string) {
			req, _ := http.NewRequest(http.MethodPost, url+"/anthropic/v1/messages",
				strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set("X-Api-Key", p.Token())
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(body)
		}

		st := openURL(t, url)
		g, gw := start(st)
		team := g.Admit(gateway.Binding{Run: "r1", Node: "work", Group: "team"})
		for i := range 2 { // the second call crosses the group's 100 tokens
			if code, body := call(gw, team); code != 200 {
				t.Fatalf("call %d: %d %s", i+1, code, body)
			}
		}
		st.Close()

		// nanohost restarts: a new gateway, the store opened again.
		st = openURL(t, url)
		g, gw = start(st)
		team = g.Admit(gateway.Binding{Run: "r2", Node: "work", Group: "team"})
		code, body := call(gw, team)
		if code != http.StatusForbidden || !strings.Contains(body, "group team's daily budget exhausted: 120 of 100 tokens") {
			t.Fatalf("after the restart the group's call: %d %s; want it refused on the spent daily budget", code, body)
		}
		other := g.Admit(gateway.Binding{Run: "r3", Node: "work", Group: "other"})
		if code, body := call(gw, other); code != 200 { // everyone: 120 of 150 before it
			t.Fatalf("another group's call: %d %s", code, body)
		}
		code, body = call(gw, other)
		if code != http.StatusForbidden || !strings.Contains(body, "nanohost: daily budget exhausted: 180 of 150 tokens") {
			t.Fatalf("the call past everyone's daily budget: %d %s", code, body)
		}
		if n := len(api.Calls()); n != 3 {
			t.Fatalf("%d calls reached the API, want 3", n)
		}
		groupSpent, all, err := st.ModelSpend(t.Context(), "2026-11-27", "team")
		if err != nil || groupSpent.Tokens() != 120 || all.Tokens() != 180 || all.InputTokens != 120 || all.OutputTokens != 60 {
			t.Fatalf("stored spend: team %+v, all %+v (%v)", groupSpent, all, err)
		}
		if want := (120*3 + 60*15) / 1e6; all.CostUSD < want-1e-12 || all.CostUSD > want+1e-12 || all.CostUnknown() {
			t.Fatalf("stored cost %v (unknown %v), want %v", all.CostUSD, all.CostUnknown(), want)
		}

		now = now.Add(2 * time.Hour) // the next UTC day
		if code, body := call(gw, team); code != 200 {
			t.Fatalf("the next day the group's call: %d %s", code, body)
		}
	})
}

// A model without a price: its tokens are stored, its cost is unknown.
func TestModelSpendOfAnUnpricedModel(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		if err := s.AddModelSpend(ctx, "2026-11-27", "team", "claude-sonnet-4-5", gateway.Usage{InputTokens: 10, OutputTokens: 5, CostUSD: 0.5}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddModelSpend(ctx, "2026-11-27", "team", "local-llama", gateway.Usage{InputTokens: 7, OutputTokens: 3, UnpricedCalls: 1}); err != nil {
			t.Fatal(err)
		}
		mine, all, err := s.ModelSpend(ctx, "2026-11-27", "team")
		if err != nil || mine != all || mine.Tokens() != 25 || mine.CostUSD != 0.5 || mine.UnpricedCalls != 1 {
			t.Fatalf("team %+v, all %+v (%v): want 25 tokens, $0.5 known, the rest unknown", mine, all, err)
		}
		if mine, all, err := s.ModelSpend(ctx, "2026-11-28", "team"); err != nil || mine != (gateway.Usage{}) || all != (gateway.Usage{}) {
			t.Fatalf("a day without calls: %+v %+v (%v)", mine, all, err)
		}
	})
}
