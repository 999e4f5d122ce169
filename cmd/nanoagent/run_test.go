package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/container/protocol"
)

func asTransient(err error, te **transientError) bool { return errors.As(err, te) }

// runner drives runCommand in-process with a real inbox directory, the way
// the host does through the container.
type runnerUnderTest struct {
	t      *testing.T
	ipc    string
	nonce  string
	stdout *io.PipeReader
	sc     *protocol.Scanner
	done   chan error
}

func startRunner(t *testing.T, first protocol.Request, args ...string) *runnerUnderTest {
	t.Helper()
	ipc := t.TempDir()
	for _, d := range []string{"input", "outcome"} {
		os.MkdirAll(filepath.Join(ipc, d), 0o755)
	}
	first.Version, first.Nonce = protocol.Version, protocol.NewNonce()
	data, _ := json.Marshal(first)
	outR, outW := io.Pipe()
	r := &runnerUnderTest{t: t, ipc: ipc, nonce: first.Nonce, stdout: outR, done: make(chan error, 1)}
	r.sc = protocol.NewScanner(outR, first.Nonce)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	args = append([]string{"--ipc-dir", ipc, "--workdir", t.TempDir()}, args...)
	go func() {
		err := runCommand(ctx, args, strings.NewReader(string(data)), outW, log)
		outW.Close()
		r.done <- err
	}()
	return r
}

func (r *runnerUnderTest) next() protocol.Result {
	r.t.Helper()
	res, err := r.sc.Next()
	if err != nil {
		r.t.Fatalf("no result: %v", err)
	}
	return res
}

func (r *runnerUnderTest) send(name string, data []byte) {
	r.t.Helper()
	tmp := filepath.Join(r.ipc, "input", "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(r.ipc, "input", name)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *runnerUnderTest) sendRequest(req protocol.Request) {
	req.Version = protocol.Version
	data, err := protocol.EncodeInputFile(r.nonce, req)
	if err != nil {
		r.t.Fatal(err)
	}
	r.send(protocol.InputFileName(req.DispatchID), data)
}

func (r *runnerUnderTest) wait() error {
	r.t.Helper()
	select {
	case err := <-r.done:
		return err
	case <-time.After(10 * time.Second):
		r.t.Fatal("runner did not exit")
		return nil
	}
}

func TestRunnerAnswersFirstRequestThenFollowUpsUntilClose(t *testing.T) {
	r := startRunner(t, protocol.Request{DispatchID: 1, NodeID: "a", Prompt: "first",
		Secrets: map[string]string{"NANO_TEST_SECRET": "s3cret"}},
		"--agent", "command", "--command", `printf '%s|%s|%s' "$(cat)" "$NANO_TEST_SECRET" "$NANOAGENT_EXECUTION"`)
	if res := r.next(); res.DispatchID != 1 || res.Result != "first|s3cret|1" || res.Status != protocol.StatusSuccess {
		t.Fatalf("first result %+v", res)
	}
	// A follow-up's secrets are ignored (files are readable by the agent);
	// the first request's stay in force.
	r.sendRequest(protocol.Request{DispatchID: 2, NodeID: "a", Prompt: "second", Secrets: map[string]string{"NANO_TEST_SECRET": "from-file"}})
	if res := r.next(); res.DispatchID != 2 || res.Result != "second|s3cret|2" {
		t.Fatalf("follow-up result %+v: want the runner's own execution count (2) and the stdin secret", res)
	}
	r.sendRequest(protocol.Request{DispatchID: 3, NodeID: "b", Prompt: "third", Execution: 7})
	if res := r.next(); res.Result != "third|s3cret|7" {
		t.Fatalf("host-given execution number not used: %+v", res)
	}
	// A file the host wrote (its tag is right) but cannot be understood.
	body := []byte(`["not a request"]`)
	bad, _ := json.Marshal(protocol.InputFile{Auth: protocol.RequestTag(r.nonce, body), Request: body})
	r.send("4.json", bad)
	if res := r.next(); res.DispatchID != 4 || res.Status != protocol.StatusError || !strings.Contains(res.Error, "bad request file") {
		t.Fatalf("bad request file: %+v; want an error result so the host fails fast", res)
	}
	// Files the agent planted — bare requests, wrong tags, junk — are
	// dropped unanswered: the next result is the host's dispatch 8.
	planted, _ := json.Marshal(protocol.Request{Version: protocol.Version, DispatchID: 5, NodeID: "b", Prompt: "FORGED"})
	r.send("5.json", planted)
	body, _ = json.Marshal(protocol.Request{Version: protocol.Version, DispatchID: 6, NodeID: "b", Prompt: "FORGED"})
	wrongTag, _ := json.Marshal(protocol.InputFile{Auth: protocol.RequestTag("guessed-nonce", body), Request: body})
	r.send("6.json", wrongTag)
	r.send("7.json", []byte("{not json"))
	r.sendRequest(protocol.Request{DispatchID: 8, NodeID: "b", Prompt: "real"})
	if res := r.next(); res.DispatchID != 8 || res.Result != "real|s3cret|8" {
		t.Fatalf("after planted files the runner answered %+v; want only the host's dispatch 8", res)
	}
	if entries, _ := os.ReadDir(filepath.Join(r.ipc, "input")); len(entries) != 0 {
		t.Errorf("consumed request files were left in the inbox: %v", entries)
	}
	r.send(protocol.CloseFile, nil)
	if err := r.wait(); err != nil {
		t.Fatalf("runner exit: %v", err)
	}
}

func TestRunnerOnceExitsAfterTheFirstAnswer(t *testing.T) {
	r := startRunner(t, protocol.Request{DispatchID: 9, NodeID: "a", Prompt: "x", Once: true},
		"--agent", "command", "--command", "exit 3")
	res := r.next()
	if res.Status != protocol.StatusError || !strings.Contains(res.Error, "exit status 3") {
		t.Errorf("failing command: %+v", res)
	}
	if err := r.wait(); err != nil {
		t.Errorf("runner exit: %v", err)
	}
}

func TestScriptAgentWritesStructuredOutcomesAsStatusFiles(t *testing.T) {
	script := filepath.Join(t.TempDir(), "S.json")
	os.WriteFile(script, []byte(`{"nodes": {"review": [{"status": "fail", "preferred_label": "Fix", "response": "nope"}, "ok [outcome:success]"]}}`), 0o644)
	r := startRunner(t, protocol.Request{DispatchID: 5, NodeID: "review", Prompt: "x"}, "--agent", "script", "--script", script)
	res := r.next()
	if res.Result != "nope" || !strings.HasPrefix(res.SessionID, "script-") {
		t.Errorf("first execution: %+v", res)
	}
	status, err := os.ReadFile(filepath.Join(r.ipc, "outcome", "5.json"))
	if err != nil || !strings.Contains(string(status), `"outcome": "fail"`) || !strings.Contains(string(status), `"preferred_next_label": "Fix"`) {
		t.Errorf("status file %q, %v", status, err)
	}
	r.sendRequest(protocol.Request{DispatchID: 6, NodeID: "review", Prompt: "y", SessionID: res.SessionID})
	if res2 := r.next(); res2.Result != "ok [outcome:success]" || res2.SessionID != res.SessionID {
		t.Errorf("second execution: %+v", res2)
	}
	r.send(protocol.CloseFile, nil)
	r.wait()
}

func TestRunnerRefusesBadFirstRequests(t *testing.T) {
	for name, in := range map[string]string{
		"no nonce":    `{"v":1,"dispatch_id":1,"prompt":"x"}`,
		"newer host":  `{"v":99,"dispatch_id":1,"prompt":"x","nonce":"0123456789abcdef0123"}`,
		"no dispatch": `{"v":1,"prompt":"x","nonce":"0123456789abcdef0123"}`,
		"not JSON":    `hello`,
		"empty stdin": ``,
	} {
		t.Run(name, func(t *testing.T) {
			err := runCommand(context.Background(), []string{"--agent", "command", "--command", "cat"},
				strings.NewReader(in), io.Discard, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil {
				t.Errorf("accepted %q", in)
			}
		})
	}
}

func TestTruncateKeepsUTF8AndSaysSo(t *testing.T) {
	s := strings.Repeat("é", 2000) // 4000 bytes
	got, cut := truncate(s, 1024)
	if !cut || len(got) > 1024 || !strings.Contains(got, "result truncated") || !strings.HasPrefix(got, "é") {
		t.Errorf("truncate: %d bytes, cut=%v, %q…", len(got), cut, got[:20])
	}
	for _, r := range strings.Split(got, "\n")[0] {
		if r == '\uFFFD' {
			t.Fatal("truncation split a rune")
		}
	}
	if got, cut := truncate("short", 1024); cut || got != "short" {
		t.Errorf("short text changed")
	}
}

func TestSubcommands(t *testing.T) {
	var out, errOut strings.Builder
	if code := runMain([]string{"version"}, nil, &out, &errOut); code != 0 || !strings.Contains(out.String(), "nanoagent") {
		t.Errorf("version: %d %q", code, out.String())
	}
	if code := runMain([]string{"frobnicate"}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "unknown subcommand") {
		t.Errorf("unknown subcommand: %d %q", code, errOut.String())
	}
}

// The agent plants a file under the next dispatch's name; the host's own
// file for that dispatch replaces it while the runner is reading the
// planted one. The host's dispatch is still answered: the runner removes
// only the file it claimed, never a name the host wrote to since (before,
// the host waited for its timeout: TestAgentCannotPlantTheNextDispatch
// failed so in CI).
func TestHostsFileArrivingWhileAPlantedOneIsReadIsAnswered(t *testing.T) {
	real := make(chan []byte, 1)
	arrived := make(chan error, 1)
	afterClaim = func(path string) {
		if filepath.Base(path) != "2.json" {
			return
		}
		select {
		case data := <-real: // the host's file arrives now, under the same name
			tmp := path + ".host.tmp"
			err := os.WriteFile(tmp, data, 0o644)
			if err == nil {
				err = os.Rename(tmp, path)
			}
			arrived <- err
		default:
		}
	}
	t.Cleanup(func() { afterClaim = nil })
	r := startRunner(t, protocol.Request{DispatchID: 1, NodeID: "a", Prompt: "first"},
		"--agent", "command", "--command", `printf 'answer to: %s' "$(cat)"`)
	if res := r.next(); res.DispatchID != 1 {
		t.Fatalf("first result %+v", res)
	}
	data, err := protocol.EncodeInputFile(r.nonce, protocol.Request{Version: protocol.Version, DispatchID: 2, NodeID: "b", Prompt: "real"})
	if err != nil {
		t.Fatal(err)
	}
	real <- data
	planted, _ := json.Marshal(protocol.Request{Version: protocol.Version, DispatchID: 2, NodeID: "b", Prompt: "FORGED"})
	r.send("2.json", planted)
	if err := <-arrived; err != nil {
		t.Fatal(err)
	}
	got := make(chan protocol.Result, 1)
	go func() {
		if res, err := r.sc.Next(); err == nil {
			got <- res
		}
	}()
	select {
	case res := <-got:
		if res.DispatchID != 2 || res.Result != "answer to: real" {
			t.Fatalf("answered %+v; want the host's dispatch 2", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the host's dispatch 2, written while the planted file was read, was never answered")
	}
	r.send(protocol.CloseFile, nil)
	if err := r.wait(); err != nil {
		t.Fatalf("runner exit: %v", err)
	}
}
