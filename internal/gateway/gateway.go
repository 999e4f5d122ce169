// Package gateway is the model gateway: an HTTP reverse proxy on the host
// through which every agent container reaches its model API (the Anthropic
// Messages API, and OpenAI-compatible APIs).
//
// An agent never holds a real credential. Each container is admitted with a
// random token (Admit) bound to its run, node and group; the gateway checks
// the token, refuses a call when a budget is spent, swaps in the real key,
// forwards the call (streaming intact) and reads the usage from the
// response — the numbers a run reports, authoritative because the agent
// cannot change them. A token dies with its container (Pass.Revoke).
package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Config configures a Gateway. Zero values get the documented defaults.
type Config struct {
	// Anthropic is the Messages API the /anthropic/ routes go to.
	Anthropic Upstream
	// OpenAI is the OpenAI-compatible API the /openai/ routes go to.
	OpenAI Upstream
	// Prices per model (longest matching prefix wins); nil = DefaultPrices.
	Prices Prices
	// GroupDaily and GlobalDaily bound what one group, and everyone
	// together, may spend per UTC day (zero: no limit).
	GroupDaily  Limit
	GlobalDaily Limit
	// Ledger keeps the days' spend beyond this process (the store); nil
	// counts them in memory only, from zero at every start.
	Ledger Ledger
	// Transport reaches the upstreams (default: a pooled http.Transport).
	Transport http.RoundTripper
	Logger    *slog.Logger
	// Now is the clock that decides the day (default time.Now).
	Now func() time.Time
}

// Upstream is a model API and the real credential for it, which exists
// nowhere but in this process.
type Upstream struct {
	// BaseURL: default https://api.anthropic.com (Anthropic),
	// https://api.openai.com (OpenAI). Paths are appended as the agent sent them.
	BaseURL string
	// APIKey is sent as x-api-key (Anthropic) or a bearer token (OpenAI).
	APIKey string
	// OAuthToken (Anthropic only, Claude subscriptions) is sent as a bearer
	// token when there is no APIKey.
	OAuthToken string
}

// Default upstreams.
const (
	DefaultAnthropicURL = "https://api.anthropic.com"
	DefaultOpenAIURL    = "https://api.openai.com"
)

// Binding is what an admitted container's calls are charged to.
type Binding struct {
	Run, Node, Group string
	// Container names the container (logs only).
	Container string
	// Node and run budgets (from the graph's max_tokens, max_cost_usd; zero: none).
	NodeLimit, RunLimit Limit
	// RunSpent is what the run had already spent when this container was
	// admitted, as the run's record says (a run resumed by a new process):
	// the run meter starts there.
	RunSpent Usage
}

// Gateway is the model gateway. It is an http.Handler.
type Gateway struct {
	cfg    Config
	log    *slog.Logger
	proxy  http.Handler
	meters *meters

	mu     sync.Mutex
	passes map[[32]byte]*Pass // by the token's hash: lookups leak nothing through timing
}

// New returns a gateway; serve it with Serve or mount it as a handler.
func New(cfg Config) (*Gateway, error) {
	if cfg.Anthropic.BaseURL == "" {
		cfg.Anthropic.BaseURL = DefaultAnthropicURL
	}
	if cfg.OpenAI.BaseURL == "" {
		cfg.OpenAI.BaseURL = DefaultOpenAIURL
	}
	if cfg.Prices == nil {
		cfg.Prices = DefaultPrices()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		t.ForceAttemptHTTP2 = true
		cfg.Transport = t
	}
	g := &Gateway{cfg: cfg, log: cfg.Logger.With("component", "gateway"), passes: map[[32]byte]*Pass{}}
	mc := cfg
	mc.Logger = g.log
	g.meters = newMeters(mc)
	proxy, err := g.newProxy()
	if err != nil {
		return nil, err
	}
	g.proxy = proxy
	return g, nil
}

// Pass is one container's admission: its token, and what its calls cost.
type Pass struct {
	g       *Gateway
	key     [32]byte
	token   string
	binding Binding

	mu       sync.Mutex
	spent    Usage
	refusal  string
	refusals int
	revoked  bool
}

// Admit issues a token for one container. Revoke the pass when the
// container ends.
func (g *Gateway) Admit(b Binding) *Pass {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // no entropy: nothing can be issued safely
	}
	token := "nhgw-" + hex.EncodeToString(raw[:])
	p := &Pass{g: g, key: sha256.Sum256([]byte(token)), token: token, binding: b}
	g.meters.seedRun(b.Run, b.RunSpent)
	g.mu.Lock()
	g.passes[p.key] = p
	g.mu.Unlock()
	return p
}

// Token is the credential the container gets in place of the key.
func (p *Pass) Token() string { return p.token }

// Spent is what this container's calls have cost so far, as the gateway
// metered them.
func (p *Pass) Spent() Usage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spent
}

// Refusal is the last budget refusal this container's calls got ("" for
// none) and how many calls were refused in all.
func (p *Pass) Refusal() (string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refusal, p.refusals
}

// Revoke invalidates the token: every later call with it is refused.
func (p *Pass) Revoke() {
	p.g.mu.Lock()
	delete(p.g.passes, p.key)
	p.g.mu.Unlock()
	p.mu.Lock()
	p.revoked = true
	p.mu.Unlock()
}

// lookup finds the live pass a token belongs to.
func (g *Gateway) lookup(token string) *Pass {
	if token == "" {
		return nil
	}
	key := sha256.Sum256([]byte(token))
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passes[key]
}

// Admitted is the number of live passes (tests, metrics).
func (g *Gateway) Admitted() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.passes)
}

// charge books a call's usage on the pass and every meter it counts against.
func (p *Pass) charge(model string, u Usage) {
	p.mu.Lock()
	p.spent = p.spent.Add(u)
	p.mu.Unlock()
	p.g.meters.charge(p.binding, model, u)
}

func (p *Pass) refused(msg string) {
	p.mu.Lock()
	p.refusal = msg
	p.refusals++
	p.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.proxy.ServeHTTP(w, r) }

// Serve answers on l until it is closed.
func (g *Gateway) Serve(l net.Listener) error {
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 30 * time.Second}
	err := srv.Serve(l)
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Totals is what the gateway metered, by group and by model, since it started.
func (g *Gateway) Totals() []Total { return g.meters.list() }

// ServeSocket serves the gateway on a new unix socket at path until the
// returned stop is called (see ServeSocket).
func (g *Gateway) ServeSocket(path string) (stop func(), err error) { return ServeSocket(path, g) }

// ServeSocket serves h on a new unix socket at path until the returned
// stop is called. Agent containers reach it through a bind mount; anyone
// may connect (mode 0666): the container's token is the credential.
func ServeSocket(path string, h http.Handler) (stop func(), err error) {
	os.Remove(path) // a socket left by a killed earlier process
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("socket %s: %w", path, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(l)
	}()
	return func() {
		srv.Close()
		<-done
		os.Remove(path)
	}, nil
}
