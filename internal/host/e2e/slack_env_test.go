package e2e

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/config"
	"nanohost/internal/host/hosttest"
)

// The fake Slack workspace every Slack test uses.
const (
	opsChat = "C0OPS"     // the main group's channel, in the policy
	alice   = "U0ALICE"   // may start runs and answer gates
	bob     = "U0BOB"     // may answer gates
	mallory = "U0MALLORY" // may do nothing
)

// newFakeSlack starts a fake workspace with the ops channel and its people.
func newFakeSlack(t *testing.T) *slacktest.Server {
	t.Helper()
	fake := slacktest.New()
	fake.AddChannel(opsChat, "ops")
	fake.AddUser(alice, "Alice")
	fake.AddUser(bob, "Bob")
	fake.AddUser(mallory, "Mallory")
	t.Cleanup(func() {
		// Every Slack test also proves the host spoke Slack's protocol
		// right (acks, payloads, Block Kit limits) the whole time.
		if errs := fake.ProtocolErrors(); len(errs) > 0 {
			t.Errorf("the host broke Slack's protocol:\n%s", strings.Join(errs, "\n"))
		}
		fake.Close()
	})
	return fake
}

// configureSlack points the configuration at the fake, with the main
// group on the ops channel and a deny-by-default policy that lets Alice
// start runs and Alice and Bob answer gates (but not their own runs').
func configureSlack(cfg *config.Config, fake *slacktest.Server) {
	cfg.Slack = config.Slack{
		BotToken: config.Secret(fake.BotToken), AppToken: config.Secret(fake.AppToken), APIURL: fake.APIURL(),
		Policy: config.SlackPolicy{
			Channels: []string{opsChat}, Starters: []string{alice}, Approvers: []string{alice, bob},
			PreventSelfApproval: true,
		},
	}
	cfg.Console.Enabled = "false"
	cfg.Groups = []config.Group{{Folder: "main", Name: "Ops", Chat: "slack:" + opsChat, Trigger: "@mention", Main: true}}
}

// newSlackChannel is the real Slack adapter, configured as serve does,
// with a quick pace: the tests are about order and delivery, not Slack's
// one-message-a-second limit.
func newSlackChannel(t *testing.T, cfg *config.Config, log *slog.Logger) *slack.Channel {
	t.Helper()
	return hosttest.SlackChannel(t, cfg, slack.SendConfig{PerSecond: 50, Burst: 20, MethodRates: slack.ScaledMethodRates(50),
		InitialBackoff: 20 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}, log.With("component", "slack"))
}

// health reads the host's /healthz: the HTTP status and the Slack state.
func health(t *testing.T, e *env) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + e.host.HTTPAddr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h struct {
		Channels map[string]string `json:"channels"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, h.Channels["slack"]
}

// metric reads one sample of the host's /metrics, e.g.
// `nanohost_ipc_pickup_seconds_count{type="start_pipeline"}` (-1: absent).
func metric(t *testing.T, e *env, sample string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + e.host.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", sample, err)
			}
			return v
		}
	}
	return -1
}

// waitSlack waits until cond holds in the fake workspace.
func waitSlack(t *testing.T, fake *slacktest.Server, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !fake.WaitFor(timeout, cond) {
		t.Fatalf("timed out after %s waiting until %s", timeout, what)
	}
}

// runRoots are the bot's top-level messages that are run status cards.
func runRoots(fake *slacktest.Server) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range fake.TopLevel(opsChat) {
		if m.FromBot() && strings.Contains(m.Content(), "Run ") {
			out = append(out, m)
		}
	}
	return out
}

// threadText is what people read in the thread under root, in order: each
// message's blocks (or its text when it has none).
func threadText(fake *slacktest.Server, root string) string {
	var b strings.Builder
	for _, m := range fake.Thread(opsChat, root) {
		b.WriteString(shown(m))
		b.WriteString("\n")
	}
	return b.String()
}

// shown is what Slack shows of a message: its blocks when it has them
// (the text is then only the notification fallback).
func shown(m slacktest.Message) string {
	if len(m.Blocks) > 0 {
		return m.BlockText()
	}
	return m.Text
}

// inOrder fails unless every want appears in text, in this order.
func inOrder(t *testing.T, text string, wants ...string) {
	t.Helper()
	at := 0
	for _, w := range wants {
		i := strings.Index(text[at:], w)
		if i < 0 {
			t.Fatalf("%q is missing (in this order: %q) from:\n%s", w, wants, text)
		}
		at += i + len(w)
	}
}

// ephemeralTo waits for an ephemeral to user containing want.
func ephemeralTo(t *testing.T, fake *slacktest.Server, user, want string) {
	t.Helper()
	waitSlack(t, fake, 20*time.Second, "an ephemeral to "+user+" says "+want, func() bool {
		for _, e := range fake.Ephemerals(opsChat, user) {
			if strings.Contains(e.Text, want) {
				return true
			}
		}
		return false
	})
}

// gatePrompt waits for the bot's message with buttons in thread root.
func gatePrompt(t *testing.T, fake *slacktest.Server, root string) slacktest.Message {
	t.Helper()
	var prompt slacktest.Message
	waitSlack(t, fake, 60*time.Second, "a gate prompt with buttons appears in the run thread", func() bool {
		for _, m := range fake.Thread(opsChat, root) {
			if m.FromBot() && len(m.Buttons()) > 0 {
				prompt = m
				return true
			}
		}
		return false
	})
	return prompt
}

// click presses the button labelled label on msg as user.
func click(t *testing.T, fake *slacktest.Server, msg slacktest.Message, user, label string) {
	t.Helper()
	for _, b := range msg.Buttons() {
		if strings.Contains(b.Text, label) {
			if _, err := fake.ClickButton(opsChat, msg.TS, user, b); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("message %s has no button %q: %+v", msg.TS, label, msg.Buttons())
}

// outage sits between the host and the fake Slack's Web API and can take
// Slack down: then every call fails, alternately with a 503 (which the
// Slack adapter retries itself) and with a final-looking error (which the
// host's own delivery retries). The websocket goes to the fake directly;
// drop it with fake.Disconnect (its reconnection needs the Web API too).
type outage struct {
	srv   *httptest.Server
	down  atomic.Bool
	calls atomic.Int64
}

func newOutage(t *testing.T, fake *slacktest.Server) *outage {
	t.Helper()
	target, err := url.Parse(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	o := &outage{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !o.down.Load() {
			proxy.ServeHTTP(w, r)
			return
		}
		if o.calls.Add(1)%2 == 0 {
			http.Error(w, "slack is down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":false,"error":"not_in_channel"}`)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

// apiURL is what the host uses as Slack's Web API.
func (o *outage) apiURL() string { return o.srv.URL + "/api/" }
