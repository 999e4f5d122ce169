//go:build !lean

package main

// The model gateway serve and `pipeline run --backend docker|kubernetes`
// put between the agents and their model API (internal/gateway): the real
// credentials stay in this process, each container gets a token.

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/gateway"
)

// modelGateway is a running gateway and how containers reach it.
type modelGateway struct {
	*gateway.Gateway
	access *container.Gateway
	stop   func()
}

// startModelGateway starts the gateway with the model credentials among
// secrets. Docker containers reach it through a unix socket in a fresh
// private directory (short enough for a socket path); a remote runtime's
// containers through gc.Listen, as gc.URL. ledger (the store; nil for
// none) keeps the days' spend for the group/day and daily budgets.
func startModelGateway(gc config.Gateway, egress config.Egress, secrets map[string]string, remote bool, ledger gateway.Ledger, log *slog.Logger) (*modelGateway, error) {
	allow := egress.Allow
	egressConfig := gateway.EgressConfig{Allow: allow}
	for _, b := range egress.Secrets {
		egressConfig.Brokered = append(egressConfig.Brokered, gateway.BrokeredSecret{Host: b.Host, Header: b.Header, Value: b.Value.Reveal()})
	}
	prices := gateway.DefaultPrices().With(gc.Prices)
	g, err := gateway.New(gateway.Config{
		Anthropic:  gateway.Upstream{BaseURL: gc.AnthropicURL, APIKey: secrets["ANTHROPIC_API_KEY"], OAuthToken: firstSet(secrets, "CLAUDE_CODE_OAUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN")},
		OpenAI:     gateway.Upstream{BaseURL: gc.OpenAIURL, APIKey: secrets["OPENAI_API_KEY"]},
		Prices:     prices,
		GroupDaily: gc.GroupDaily, GlobalDaily: gc.Daily, Ledger: ledger,
		Logger: log,
	})
	if err != nil {
		return nil, err
	}
	mg := &modelGateway{Gateway: g, access: &container.Gateway{Admit: g.Admit}}
	if remote {
		if gc.Listen == "" || gc.URL == "" {
			return nil, fmt.Errorf("the model gateway needs gateway.listen and gateway.url for pods to reach it (docs/kubernetes.md)")
		}
		l, err := net.Listen("tcp", gc.Listen)
		if err != nil {
			return nil, fmt.Errorf("model gateway: %w", err)
		}
		var h http.Handler = g
		if len(allow) > 0 {
			// One address for both: proxy requests (CONNECT, absolute URLs) go to the egress proxy.
			h = withEgress(g, g.NewEgress(egressConfig))
			mg.access.EgressURL = gc.URL
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
		go srv.Serve(l)
		mg.access.URL, mg.stop = gc.URL, func() { srv.Close() }
		return mg, nil
	}
	dir, err := os.MkdirTemp("", "nanohost-gw-")
	if err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	socket := filepath.Join(dir, "gateway.sock")
	stop, err := g.ServeSocket(socket)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	mg.access.Socket = socket
	stopEgress := func() {}
	if len(allow) > 0 {
		socket := filepath.Join(dir, "egress.sock")
		if stopEgress, err = gateway.ServeSocket(socket, g.NewEgress(egressConfig)); err != nil {
			stop()
			os.RemoveAll(dir)
			return nil, err
		}
		mg.access.EgressSocket = socket
	}
	mg.stop = func() {
		stopEgress()
		stop()
		os.RemoveAll(dir)
	}
	return mg, nil
}

// withEgress routes proxy requests to egress, the rest to the gateway.
func withEgress(gw, egress http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect || r.URL.IsAbs() {
			egress.ServeHTTP(w, r)
			return
		}
		gw.ServeHTTP(w, r)
	})
}

func firstSet(m map[string]string, names ...string) string {
	for _, n := range names {
		if m[n] != "" {
			return m[n]
		}
	}
	return ""
}

// agentSecrets are the secrets agents still get: with the gateway, none of
// the model credentials.
func agentSecrets(all map[string]string, gatewayOn bool) map[string]string {
	out := map[string]string{}
	for k, v := range all {
		if gatewayOn && slices.Contains(container.ModelCredentials, k) {
			continue
		}
		out[k] = v
	}
	return out
}
