// Package hosttest is the harness the host's tests share: the in-process
// tests of internal/host (fake agents) and the end-to-end tests of
// internal/host/e2e (Docker) build their host from the same parts — its
// configuration and store, its chat (the console on pipes, or the real
// Slack adapter on a fake Slack), serving until the test ends, and the
// IPC requests an agent drops. It does not import the host (the host's
// own tests use it), so each caller wires host.New itself.
package hosttest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/channels/slack"
	"nanohost/internal/channels/slacktest"
	"nanohost/internal/config"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/testkit"
)

// Config is a host's configuration in dir: its data directory there, HTTP
// on a free loopback port, IPC rescanned every rescan, and its store on
// SQLite there — or on PostgreSQL when NANOHOST_TEST_STORE says so. With
// fake set, Slack is the fake and the console is off. configure, when
// set, changes the rest; the data directory is made.
func Config(t testing.TB, dir string, fake *slacktest.Server, rescan time.Duration, configure func(*config.Config)) *config.Config {
	t.Helper()
	cfg := config.Defaults()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.IPC.Rescan = rescan
	if fake != nil {
		cfg.Slack = config.Slack{BotToken: config.Secret(fake.BotToken), AppToken: config.Secret(fake.AppToken), APIURL: fake.APIURL()}
		cfg.Console.Enabled = "false"
	}
	if configure != nil {
		configure(cfg)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if u, ok := storetest.PostgresFor(t, dir); ok {
		cfg.Store.URL = config.Secret(u)
	}
	return cfg
}

// OpenStore opens cfg's store; the caller closes it when its host stops.
func OpenStore(t testing.TB, cfg *config.Config) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), cfg.StoreURL())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// SlackChannel is the real Slack adapter on cfg's Slack settings, as serve
// makes it, sending at send's pace (tests are about order and delivery,
// not Slack's one message a second).
func SlackChannel(t testing.TB, cfg *config.Config, send slack.SendConfig, log *slog.Logger) *slack.Channel {
	t.Helper()
	p := cfg.Slack.Policy
	ch, err := slack.New(slack.Config{
		BotToken: cfg.Slack.BotToken.Reveal(), AppToken: cfg.Slack.AppToken.Reveal(), APIURL: cfg.Slack.APIURL,
		Policy: slack.Policy{Channels: p.Channels, Starters: p.Starters, Approvers: p.Approvers, PreventSelfApproval: p.PreventSelfApproval},
		Send:   send, Logger: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// Console is the console channel on pipes: a test types on Typing and
// reads Screen.
type Console struct {
	Channel *console.Console
	Typing  *io.PipeWriter
	Screen  *Screen
	out     *io.PipeWriter
}

// NewConsole is a console on pipes.
func NewConsole() *Console {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	return &Console{Channel: console.New(inR, outW), Typing: inW, Screen: NewScreen(outR), out: outW}
}

// Close ends both pipes (after the host stopped).
func (c *Console) Close() { c.Typing.Close(); c.out.Close() }

// Type types a line at the console.
func (c *Console) Type(t testing.TB, line string) {
	t.Helper()
	if _, err := io.WriteString(c.Typing, line+"\n"); err != nil {
		t.Fatalf("type %q: %v", line, err)
	}
}

// Screen collects what a console (or a terminal) prints, line by line.
type Screen struct {
	mu    sync.Mutex
	lines []string
	wake  chan struct{}
}

// NewScreen reads r's lines until it ends.
func NewScreen(r io.Reader) *Screen {
	s := &Screen{wake: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
			select {
			case s.wake <- struct{}{}:
			default:
			}
		}
	}()
	return s
}

// Text is everything printed so far, a line per line.
func (s *Screen) Text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lines) == 0 {
		return ""
	}
	return strings.Join(s.lines, "\n") + "\n"
}

// WaitFor waits until the screen shows want (count times), told by each
// line printed.
func (s *Screen) WaitFor(t testing.TB, want string, count int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for strings.Count(s.Text(), want) < count {
		select {
		case <-s.wake:
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatalf("the screen never showed %q (x%d) within %s; it shows:\n%s", want, count, timeout, s.Text())
		}
	}
}

// Runner is a host, as Serve runs it.
type Runner interface {
	Run(ctx context.Context) error
	HTTPAddr() string
}

// Serve runs h until the test ends or the returned stop is called (once;
// stop waits for h to return, for at most 60 s, then calls after). It
// returns once h serves and, with fake set, is connected to Slack.
func Serve(t testing.TB, h Runner, fake *slacktest.Server, after func()) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("host.Run: %v", err)
				}
			case <-time.After(60 * time.Second):
				t.Errorf("host did not stop within 60s")
			}
			if after != nil {
				after()
			}
		})
	}
	t.Cleanup(stop)
	testkit.WaitUntil(t, 10*time.Second, "the host serves", func() bool { return h.HTTPAddr() != "" })
	if fake != nil {
		testkit.WaitUntil(t, 10*time.Second, "the host is connected to Slack", fake.Connected)
	}
	return stop
}

// WriteRequest drops an IPC request into group's queue under ipcRoot the
// way `nanoagent ipc` does: a temporary name, then a rename.
func WriteRequest(t testing.TB, ipcRoot, group, queue, id string, req map[string]any) {
	t.Helper()
	req["v"], req["request_id"] = 1, id
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(ipcRoot, group, queue)
	tmp := filepath.Join(dir, "."+id+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, id+".json")); err != nil {
		t.Fatal(err)
	}
}

// Response waits, for at most timeout, for the IPC response to group's
// request id (the file the host writes, which says nothing when).
func Response(t testing.TB, ipcRoot, group, id string, timeout time.Duration) map[string]any {
	t.Helper()
	var out map[string]any
	p := filepath.Join(ipcRoot, group, "responses", id+".json")
	testkit.WaitUntil(t, timeout, "the IPC response "+id+" is written", func() bool {
		data, err := os.ReadFile(p)
		return err == nil && json.Unmarshal(data, &out) == nil
	})
	return out
}
