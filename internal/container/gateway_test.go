package container

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"nanohost/internal/container/containertest"

	"nanohost/internal/gateway"
	"nanohost/internal/gateway/modeltest"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/testkit"
)

// testGateway is a model gateway in front of a fake model API, served on a
// unix socket as serve runs it for Docker containers.
func testGateway(t testing.TB, api *modeltest.API, mutate func(*gateway.Config)) (*gateway.Gateway, *Gateway) {
	t.Helper()
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
	// A short directory: a socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "nhgw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "gw.sock")
	stop, err := g.ServeSocket(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return g, &Gateway{Admit: g.Admit, Socket: socket}
}

// callModel is a shell snippet calling the Messages API the way an SDK
// does: the base URL and the key from the environment.
func callModel(stream bool, out string) string {
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
	if stream {
		body = `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`
	}
	return `busybox wget -q -O ` + out + ` --header "x-api-key: $ANTHROPIC_API_KEY" --header "anthropic-version: 2023-06-01" ` +
		`--header "content-type: application/json" --post-data '` + body + `' "$ANTHROPIC_BASE_URL/v1/messages"`
}

func TestAgentNeverSeesTheKey(t *testing.T) {
	api := modeltest.Start(t)
	gw, access := testGateway(t, api, nil)
	// The agent dumps everything it can read — its environment, every
	// process's environment and command line it may open, every file — into
	// the workspace, then calls its model through the gateway.
	dump := `{ echo "== env"; env
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do echo "== $f"; cat "$f" 2>/dev/null | tr '\0' '\n'; done
find / \( -path /proc -o -path /sys -o -path /dev -o -path /tmp/dump.txt \) -prune -o -type f -print 2>/dev/null | while read -r f; do echo "== $f"; cat "$f" 2>/dev/null; done
} > /tmp/dump.txt; cp /tmp/dump.txt /workspace/group/dump.txt; ` + callModel(false, "-")
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: dump}
		c.Gateway = access
		// Configured as an agent secret too: with a gateway it stays on the host.
		c.Secrets = map[string]string{"ANTHROPIC_API_KEY": api.Key, "CLAUDE_CODE_OAUTH_TOKEN": api.Key}
	})
	res := h.mustRun(codergenReq("run-key", "leak", "full")) // full: the container stays for follow-ups, so docker inspect can look at it
	if !strings.Contains(res.Text, "hello from the model") {
		t.Fatalf("the call through the gateway failed: %q", res.Text)
	}
	calls := api.Calls()
	if len(calls) != 1 || !calls[0].Authorized {
		t.Fatalf("the fake API should have seen the real key on one call: %+v", calls)
	}
	if res.Usage != (engine.Usage{InputTokens: 12, OutputTokens: 34, CostUSD: (12*3 + 34*15) / 1e6}) {
		t.Errorf("the node's usage %+v is not the gateway's numbers", res.Usage)
	}
	data, err := os.ReadFile(filepath.Join(h.cfg.Workspace, "dump.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"== env", "ANTHROPIC_API_KEY=nhgw-", "ANTHROPIC_BASE_URL=http://127.0.0.1:", "/usr/local/bin/nanoagent", "== /proc/"} {
		if !strings.Contains(string(data), must) {
			t.Fatalf("the dump lacks %q: the agent did not look everywhere (%d bytes)", must, len(data))
		}
	}
	for where, text := range map[string]string{"the agent's dump": string(data), "the answer": res.Text, "the host's log": h.logs.String()} {
		if strings.Contains(text, api.Key) {
			t.Errorf("the real key is in %s", where)
		}
	}
	// What Docker holds of the container (its environment, command,
	// labels, mounts) — the agent's container still runs, for follow-ups.
	inspect, err := exec.Command("docker", "ps", "-q", "--filter", "label="+LabelRun+"=run-key").Output()
	if err != nil || len(strings.Fields(string(inspect))) == 0 {
		t.Fatalf("the agent's container: %v %q", err, inspect)
	}
	inspect, err = exec.Command("docker", append([]string{"inspect"}, strings.Fields(string(inspect))...)...).Output()
	if err != nil || !strings.Contains(string(inspect), "run-key") {
		t.Fatalf("docker inspect: %v", err)
	}
	if strings.Contains(string(inspect), api.Key) {
		t.Error("the real key is in docker inspect's view of the container")
	}
	h.b.closeRun("run-key")
	if n := gw.Admitted(); n != 0 {
		t.Errorf("%d token(s) still valid after their containers ended", n)
	}
}

// A call to a model without a price: the node's usage counts its tokens
// and says its cost is unknown (not $0).
func TestGatewayUnpricedModelCostIsUnknown(t *testing.T) {
	api := modeltest.Start(t)
	_, access := testGateway(t, api, nil)
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: strings.ReplaceAll(callModel(false, "-"), "claude-sonnet-4-5", "local-llama")}
		c.Gateway = access
	})
	res := h.mustRun(codergenReq("run-unpriced", "ask", "compact"))
	if !strings.Contains(res.Text, "hello from the model") {
		t.Fatalf("the call through the gateway failed: %q", res.Text)
	}
	if want := (engine.Usage{InputTokens: 12, OutputTokens: 34, CostUnknown: true}); res.Usage != want {
		t.Fatalf("usage %+v, want %+v", res.Usage, want)
	}
}

// TestToolContainerGetsNoSecretsAndNoGateway: a tool_command stage's
// container is given no secret at all — no model key, no agent secret, no
// gateway token — and no way to the gateway: a tool is a command the graph
// names, not an agent, and calls no model. (A secret a tool needs is
// brokered by the egress proxy, runtime.egress.secrets.)
func TestToolContainerGetsNoSecretsAndNoGateway(t *testing.T) {
	api := modeltest.Start(t)
	gw, access := testGateway(t, api, nil)
	const github = "ghp_tool-secret-never-in-a-container"
	h := newHarness(t, func(c *Config) {
		c.Gateway = access
		c.Secrets = map[string]string{"ANTHROPIC_API_KEY": api.Key, "GITHUB_TOKEN": github}
	})
	dump := `echo "== env"; env
for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do echo "== $f"; cat "$f" 2>/dev/null | tr '\0' '\n'; done
find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -print 2>/dev/null | while read -r f; do echo "== $f"; cat "$f" 2>/dev/null; done
ls -la /nanohost 2>&1; echo "admitted-check"`
	res := h.mustRun(toolReq("run-tool-secrets", "dump", dump))
	if res.ExitCode != 0 || !strings.Contains(res.Output, "admitted-check") || !strings.Contains(res.Output, "== env") {
		t.Fatalf("the tool did not dump (exit %d): %.2000s", res.ExitCode, res.Output)
	}
	for what, leak := range map[string]string{"the real key": api.Key, "an agent secret": github, "a gateway token": "nhgw-", "the gateway's socket": "gateway.sock"} {
		if strings.Contains(res.Output, leak) {
			t.Errorf("%s is in the tool's container", what)
		}
	}
	if n := gw.Admitted(); n != 0 {
		t.Errorf("%d gateway token(s) issued for a tool container", n)
	}
	if strings.Contains(h.logs.String(), api.Key) || strings.Contains(h.logs.String(), github) {
		t.Error("a secret is in the host's log")
	}
}

func TestGatewayStreamsAndCountsUsage(t *testing.T) {
	api := modeltest.Start(t)
	api.Usage = modeltest.Usage{InputTokens: 2000, OutputTokens: 512, CacheRead: 1000}
	api.Text = "streamed word by word to the agent"
	_, access := testGateway(t, api, nil)
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: callModel(true, "/workspace/group/stream.txt") + ` && echo streamed`}
		c.Gateway = access
	})
	res := h.mustRun(codergenReq("run-stream", "s", "compact"))
	got, err := os.ReadFile(filepath.Join(h.cfg.Workspace, "stream.txt"))
	if err != nil {
		t.Fatalf("%v (answer %q)", err, res.Text)
	}
	if want := modeltest.StreamText("claude-sonnet-4-5", api.Text, api.Usage); string(got) != want {
		t.Fatalf("the stream reached the agent changed:\n got %q\nwant %q", got, want)
	}
	wantCost := (2000*3 + 1000*0.3 + 512*15) / 1e6
	if res.Usage.InputTokens != 3000 || res.Usage.OutputTokens != 512 || res.Usage.CostUSD < wantCost-1e-12 || res.Usage.CostUSD > wantCost+1e-12 {
		t.Fatalf("usage %+v, want 3000 in (cache included), 512 out, $%v", res.Usage, wantCost)
	}
}

// codergenBudgetReq is a node request under a run budget.
func codergenBudgetReq(run, node string, budget engine.Budget) engine.Request {
	r := codergenReq(run, node, "compact")
	r.Budget = budget
	return r
}

func TestGatewayRefusalFailsTheNode(t *testing.T) {
	api := modeltest.Start(t)
	api.Usage = modeltest.Usage{InputTokens: 40, OutputTokens: 20}
	_, access := testGateway(t, api, nil)
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: callModel(false, "/dev/null") + "; " + callModel(false, "/dev/null") + "; " + callModel(false, "/dev/null") + "; echo done"}
		c.Gateway = access
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60e9)
	defer cancel()
	res, err := h.b.Run(ctx, codergenBudgetReq("run-b", "spend", engine.Budget{RunTokens: 100}))
	if err == nil || !strings.Contains(err.Error(), "run budget exhausted: 120 of 100 tokens") {
		t.Fatalf("want the node failed by the run budget, got %v", err)
	}
	if res.Usage.InputTokens+res.Usage.OutputTokens != 120 {
		t.Fatalf("usage %+v, want the two calls that went through", res.Usage)
	}
	if n := len(api.Calls()); n != 2 {
		t.Fatalf("%d calls reached the API, want 2", n)
	}
}

// TestAgentCannotReachAnythingButTheGateway: from an agent container (the
// default network, none) a connection to the model API itself, to another
// port of the host and to another container all fail, and the gateway
// works. The same probe from a container on the bridge network reaches the
// host's port and the other container, so the targets are reachable.
func TestAgentCannotReachAnythingButTheGateway(t *testing.T) {
	api := modeltest.Start(t)
	_, access := testGateway(t, api, nil)
	// Another port of the host, on every address, counting connections.
	hostPort, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hostPort.Close()
	var accepted atomic.Int64
	go func() {
		for {
			c, err := hostPort.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	port := hostPort.Addr().(*net.TCPAddr).Port
	_, apiPort, _ := net.SplitHostPort(strings.TrimPrefix(api.URL, "http://"))
	other := otherContainer(t)
	targets := []string{
		"127.0.0.1:" + apiPort, "172.17.0.1:" + apiPort, // the model API directly
		fmt.Sprintf("172.17.0.1:%d", port), // another port of the host
		other + ":8080",                    // another container
	}
	for _, ip := range hostIPs(t) {
		targets = append(targets, fmt.Sprintf("%s:%d", ip, port), ip+":"+apiPort)
	}
	probe := ""
	for _, tg := range targets {
		host, p, _ := net.SplitHostPort(tg)
		probe += fmt.Sprintf(`if busybox nc -w 2 %s %s </dev/null >/dev/null 2>&1; then echo "REACHED %s"; else echo "blocked %s"; fi; `, host, p, tg, tg)
	}
	probe += callModel(false, "-")

	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: probe}
		c.Gateway = access
	})
	res := h.mustRun(codergenReq("run-egress", "probe", "compact"))
	if strings.Contains(res.Text, "REACHED") || strings.Count(res.Text, "blocked") != len(targets) {
		t.Errorf("the agent reached more than the gateway:\n%s", res.Text)
	}
	if !strings.Contains(res.Text, "hello from the model") {
		t.Errorf("the gateway did not answer:\n%s", res.Text)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host's port accepted %d connection(s) from the agent", n)
	}

	// The control: on the bridge network the same probe gets through.
	bridge := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: probe}
		c.Gateway = access
		c.Network = "bridge"
	})
	res = bridge.mustRun(codergenReq("run-bridge", "probe", "compact"))
	for _, tg := range []string{fmt.Sprintf("172.17.0.1:%d", port), other + ":8080"} {
		if !strings.Contains(res.Text, "REACHED "+tg) {
			t.Errorf("the control on the bridge network did not reach %s, so the probe proves nothing:\n%s", tg, res.Text)
		}
	}
}

// otherContainer starts a container listening on port 8080 on the default
// bridge and returns its address.
func otherContainer(t *testing.T) string {
	t.Helper()
	name := "nanohost-test-other-" + randomHex(4)
	out, err := exec.Command("docker", "run", "-d", "--rm", "--name", name, "--entrypoint", "/bin/busybox",
		containertest.Image, "httpd", "-f", "-p", "8080").CombinedOutput()
	if err != nil {
		t.Fatalf("start another container: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("docker", "rm", "-f", name).Run() })
	ip, err := exec.Command("docker", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", name).Output()
	if err != nil || strings.TrimSpace(string(ip)) == "" {
		t.Fatalf("the other container's address: %v %q", err, ip)
	}
	return strings.TrimSpace(string(ip))
}

// hostIPs are the host's non-loopback IPv4 addresses.
func hostIPs(t *testing.T) []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			out = append(out, ipn.IP.String())
		}
	}
	return out
}

// TestEgressAllowlist: an agent whose group may reach allowed.test fetches
// from it through the egress proxy (a plain request and a CONNECT tunnel);
// refused.test is refused, never contacted, and the refusal is logged with
// the container's run and node.
func TestEgressAllowlist(t *testing.T) {
	api := modeltest.Start(t)
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "allowed content for %s", r.URL.Path)
	}))
	defer allowed.Close()
	var refusedHits atomic.Int64
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { refusedHits.Add(1) }))
	defer refused.Close()
	names := map[string]string{"allowed.test:80": allowed.Listener.Addr().String(), "refused.test:80": refused.Listener.Addr().String()}

	var log testkit.Buffer
	g, access := testGateway(t, api, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&log, nil))
	})
	egress := g.NewEgress(gateway.EgressConfig{Allow: []string{"allowed.test"},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if real, ok := names[addr]; ok {
				addr = real
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}})
	socket := filepath.Join(filepath.Dir(access.Socket), "egress.sock")
	stop, err := gateway.ServeSocket(socket, egress)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	access.EgressSocket = socket

	// A plain request through the proxy, a CONNECT tunnel spoken by hand
	// (as an HTTPS client would open one), and a refused host.
	agent := `echo "plain: $(busybox wget -q -O- http://allowed.test/plain)"
p=${HTTP_PROXY#http://}; auth=$(printf %s "${p%@*}" | busybox base64 | tr -d "\n"); hp=${p#*@}
printf 'CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\nProxy-Authorization: Basic %s\r\n\r\nGET /tunnel HTTP/1.0\r\nHost: allowed.test\r\n\r\n' "$auth" | busybox nc -w 5 "${hp%:*}" "${hp#*:}" | grep -o 'allowed content for /tunnel' | sed 's/^/tunnel: /'
if busybox wget -q -O- http://refused.test/secret; then echo "REFUSED HOST REACHED"; else echo "refused.test: refused"; fi`
	h := newHarness(t, func(c *Config) {
		c.Agent = AgentConfig{Kind: "command", Command: agent}
		c.Gateway = access
	})
	res := h.mustRun(codergenReq("run-egress", "fetch", "compact"))
	for _, want := range []string{"plain: allowed content for /plain", "tunnel: allowed content for /tunnel", "refused.test: refused"} {
		if !strings.Contains(res.Text, want) {
			t.Errorf("the agent's output lacks %q:\n%s", want, res.Text)
		}
	}
	if refusedHits.Load() != 0 || strings.Contains(res.Text, "REACHED") {
		t.Errorf("the refused host was contacted")
	}
	logged := log.String()
	if !strings.Contains(logged, "egress refused") || !strings.Contains(logged, "host=refused.test") ||
		!strings.Contains(logged, "run=run-egress") || !strings.Contains(logged, "node=fetch") {
		t.Errorf("the refusal is not logged with its run and node:\n%s", logged)
	}

	// Without a token (or with a revoked one) the proxy lets nobody through.
	req, _ := http.NewRequest(http.MethodGet, "http://allowed.test/x", nil)
	rec := httptest.NewRecorder()
	egress.ServeHTTP(rec, req)
	if rec.Code != http.StatusProxyAuthRequired {
		t.Errorf("a request without the token: %d, want 407", rec.Code)
	}
}
