package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/channels/console"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/host"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/store"
)

// scriptAgents is the host's agent backend with scripted answers instead
// of containers.
type scriptAgents struct{ *script.Script }

func (scriptAgents) BindRun(string, container.RunEnv) {}

// hostFixture runs the real host (run manager, gate desk, store-backed
// event delivery, console channel) and talks to its HTTP endpoint.
type hostFixture struct {
	*fixture
	console *io.PipeWriter
	// stop shuts the host down and waits for it.
	stop func()
}

func newHostFixture(t *testing.T, token string, agents *script.Script) *hostFixture {
	t.Helper()
	dir := t.TempDir()
	cfg := config.Defaults()
	cfg.DataDir = dir
	cfg.HTTP.Listen = "127.0.0.1:0"
	cfg.HTTP.Token = config.Secret(token)
	st, err := store.Open(context.Background(), filepath.Join(dir, "nanohost.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	in, consoleIn := io.Pipe()
	h, err := host.New(host.Options{
		Config: cfg, Store: st, Backend: scriptAgents{agents},
		Channels: []channels.Channel{console.New(in, io.Discard)},
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			consoleIn.Close()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Error("the host did not stop within 30s")
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(10 * time.Second)
	for h.HTTPAddr() == "" {
		if time.Now().After(deadline) {
			t.Fatal("the host's HTTP endpoint did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := &fixture{t: t, st: st, token: token, base: "http://" + h.HTTPAddr()}
	return &hostFixture{fixture: f, console: consoleIn, stop: stop}
}

// The host's adapter: a pipeline started through the API runs on the real
// host, its gate is answered through the same desk as chat answers, and
// /healthz and /metrics still sit behind the bearer token.
func TestHostServesTheDashboardAndAnswersGatesThroughItsDesk(t *testing.T) {
	hf := newHostFixture(t, "host-token", &script.Script{})
	f := hf.fixture
	id := f.start(gateDOT)
	g := f.waitGate(id)
	run := decode[runBody](t, f.do("GET", "/pipelines/"+id, ""), 200)
	if run.Group != "main" || run.StartedBy != "web:token" || run.Status != "waiting" {
		t.Errorf("run = %+v", run)
	}
	answer := "/pipelines/" + id + "/questions/" + g.GateID + "/answer"
	decode[errorBody](t, f.do("POST", answer, `{"choice":"Z"}`), 422)
	ok := decode[struct {
		Accepted   bool   `json:"accepted"`
		AnsweredBy string `json:"answered_by"`
		Answer     string `json:"answer"`
	}](t, f.do("POST", answer, `{"choice":"A"}`), 200)
	if !ok.Accepted || ok.AnsweredBy != "web:token" || ok.Answer != "A" {
		t.Errorf("answer = %+v", ok)
	}
	late := decode[errorBody](t, f.do("POST", answer, `{"choice":"R"}`), 409)
	if late.AnsweredBy != "web:token" {
		t.Errorf("late answer = %+v", late)
	}
	f.waitStatus(id, store.RunSuccess)
	events := f.openStream("/pipelines/" + id + "/events").until("end")
	answered := false
	for _, e := range events {
		answered = answered || e.Type == "InterviewCompleted" && strings.Contains(e.Text, "web:token")
	}
	if !answered {
		t.Error("the event log does not say web:token answered")
	}

	for _, p := range []string{"/healthz", "/metrics"} {
		anon, _ := http.Get(f.base + p)
		anon.Body.Close()
		if anon.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", p, anon.StatusCode)
		}
		if res := f.do("GET", p, ""); res.StatusCode != 200 {
			t.Errorf("%s with the token: %d", p, res.StatusCode)
		}
	}
	if page := f.get("/runs/"+id, "Accept", "text/html"); !strings.Contains(page, `data-run="`+id+`"`) {
		t.Error("the run page is not served")
	}
}

func TestHostRefusesWebAnswersToGatesWithApprovers(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	id := f.start(strings.Replace(gateDOT, `label="Approve the plan?"`, `label="Approve the plan?", approvers="U0123ABCD"`, 1))
	g := f.waitGate(id)
	e := decode[errorBody](t, f.do("POST", "/pipelines/"+id+"/questions/"+g.GateID+"/answer", `{"choice":"A"}`), 403)
	if !strings.Contains(e.Error, "names its approvers (U0123ABCD)") {
		t.Errorf("403 = %+v", e)
	}
	if now, _ := f.st.GetGate(context.Background(), id, g.GateID); now.Status != store.GateOpen {
		t.Errorf("gate after a refused answer: %+v", now)
	}
	res := f.do("POST", "/pipelines/"+id+"/cancel", "")
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("cancel: %d", res.StatusCode)
	}
	f.waitStatus(id, store.RunCancelled)
	var qs questionsBody
	_ = json.Unmarshal([]byte(f.get("/pipelines/"+id+"/questions")), &qs)
	if len(qs.Questions) != 0 {
		t.Errorf("open questions after cancel: %+v", qs)
	}
}

// A host shutting down closes the event streams (without "end": the run is
// only interrupted) instead of waiting on them.
func TestHostShutdownClosesEventStreams(t *testing.T) {
	hf := newHostFixture(t, "", &script.Script{})
	f := hf.fixture
	id := f.start(gateDOT)
	f.waitGate(id)
	s := f.openStream("/pipelines/" + id + "/events")
	s.until("InterviewStarted")
	hf.stop()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e, ok := <-s.events:
			if !ok {
				if run, _ := f.st.GetRun(context.Background(), id); run.Status != store.RunInterrupted {
					t.Errorf("run after shutdown: %s", run.Status)
				}
				return
			}
			if e.Event == "end" {
				t.Fatalf("an interrupted run's stream said end: %+v", e)
			}
		case <-timeout:
			t.Fatal("the event stream stayed open after the host stopped")
		}
	}
}
