package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Crash tests of the run journal with the real binary and SIGKILL: a
// process killed in the middle of writing (or syncing) a node's record, in
// the middle of a parallel block, and in the middle of a resume.

// Linux system call numbers the tests look for in /proc/<pid>/task/*/syscall.
var sysno = map[string]map[string]int{
	"amd64": {"write": 1, "fdatasync": 75, "flock": 73},
	"arm64": {"write": 64, "fdatasync": 83, "flock": 32},
}

// journalCalls are the calls that write or sync a journal.
func journalCalls(t *testing.T) (writes map[int]string) {
	t.Helper()
	nums, ok := sysno[runtime.GOARCH]
	if !ok || runtime.GOOS != "linux" {
		t.Skipf("system call numbers for %s/%s are not in the test", runtime.GOOS, runtime.GOARCH)
	}
	if _, err := os.ReadFile("/proc/self/syscall"); err != nil {
		t.Skipf("cannot see a process's system calls here: %v", err)
	}
	return map[int]string{nums["write"]: "write", nums["fdatasync"]: "fdatasync"}
}

// inCall reports which of calls a thread of pid is in, on a file named name.
func inCall(pid int, calls map[int]string, name string) (string, bool) {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/syscall", pid))
	for _, task := range tasks {
		data, err := os.ReadFile(task)
		if err != nil {
			continue
		}
		f := strings.Fields(string(data))
		if len(f) < 2 {
			continue // "running"
		}
		nr, err := strconv.Atoi(f[0])
		call, watched := calls[nr]
		if err != nil || !watched {
			continue
		}
		fd, err := strconv.ParseInt(strings.TrimPrefix(f[1], "0x"), 16, 32)
		if err != nil {
			continue
		}
		if target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd)); err == nil && filepath.Base(target) == name {
			return call, true
		}
	}
	return "", false
}

// inJournalCall is a kill condition: a thread of the process is in one of
// calls on the file named name.
func inJournalCall(calls map[int]string, name string) func(pid int) (string, bool) {
	return func(pid int) (string, bool) {
		call, ok := inCall(pid, calls, name)
		return call + " " + name, ok
	}
}

// replaying is a kill condition: the process has the run's journal open
// and has not written to it yet (it is reading the run back).
func replaying(root string) func(pid int) (string, bool) {
	path := filepath.Join(root, engine.EventsFile)
	fi, _ := os.Stat(path)
	return func(pid int) (string, bool) {
		now, err := os.Stat(path)
		if err != nil || now.Size() != fi.Size() {
			return "", false
		}
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && target == path {
				return "replay", true
			}
		}
		return "", false
	}
}

// grown is a kill condition: the file at path has grown by at least n bytes
// since the condition was made (the run has done that much), and then when.
func grown(path string, n int64, when func(pid int) (string, bool)) func(pid int) (string, bool) {
	var size int64
	if fi, err := os.Stat(path); err == nil {
		size = fi.Size()
	}
	return func(pid int) (string, bool) {
		if fi, err := os.Stat(path); err != nil || fi.Size() < size+n {
			return "", false
		}
		return when(pid)
	}
}

// killWhen starts cmd and SIGKILLs it as soon as when holds. It returns
// what when said, or "" when the process ended first.
func killWhen(t *testing.T, cmd *exec.Cmd, when func(pid int) (string, bool)) string {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return ""
		default:
		}
		if what, ok := when(cmd.Process.Pid); ok {
			cmd.Process.Signal(syscall.SIGKILL)
			<-exited
			return what
		}
	}
	cmd.Process.Kill()
	<-exited
	t.Fatalf("%v never reached the moment to kill it\n%s", cmd.Args, stderr.String())
	return ""
}

// journalLine is a line of events.jsonl with its commit.
type journalLine struct {
	engine.Event
	Commit *engine.Delta `json:"commit"`
}

// checkJournal reads a run's events.jsonl and fails the test unless its
// seq is continuous and no node of a linear part of a pipeline started
// again after its step committed (once). It returns the lines.
func checkJournal(t *testing.T, root string) []journalLine {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, engine.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	return checkJournalLines(t, data)
}

// checkJournalAfterKill is checkJournal on a journal whose writer was just
// SIGKILLed: its last line may be torn. Linux stops a write to a file at a
// page boundary once a fatal signal is pending (generic_perform_write), so a
// record several pages long can be cut part-way; the torn-record rule makes
// the next resume cut it off (docs/journal.md). Only the end may be torn.
func checkJournalAfterKill(t *testing.T, root string) []journalLine {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, engine.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	if end := bytes.LastIndexByte(data, '\n'); end+1 < len(data) {
		t.Logf("the kill left a torn last record of %d bytes; the next resume cuts it off", len(data)-end-1)
		data = data[:end+1]
	}
	return checkJournalLines(t, data)
}

func checkJournalLines(t *testing.T, data []byte) []journalLine {
	t.Helper()
	var lines []journalLine
	committed := map[string]bool{}
	for i, raw := range bytes.SplitAfter(data, []byte("\n")) {
		if len(raw) == 0 {
			break
		}
		if raw[len(raw)-1] != '\n' {
			t.Fatalf("events.jsonl line %d is torn after the run: %q", i+1, raw)
		}
		var l journalLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("events.jsonl line %d: %v", i+1, err)
		}
		if l.Seq != int64(i+1) {
			t.Fatalf("events.jsonl line %d has seq %d", i+1, l.Seq)
		}
		switch {
		case l.Type == engine.EventStageStarted && l.Branch == "" && committed[l.NodeID]:
			t.Fatalf("%s started again (seq %d) after its step had committed", l.NodeID, l.Seq)
		case l.Commit != nil && l.Commit.Branch == nil && len(l.Commit.Path) > 0:
			committed[l.Commit.Path[0]] = true
		}
		lines = append(lines, l)
	}
	return lines
}

func linearDOT(n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "digraph Linear {\n graph [goal=\"survive\", max_steps=%d]\n start [shape=Mdiamond]\n exit [shape=Msquare]\n", n+10)
	prev := "start"
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, " n%d [prompt=\"step %d\"]\n %s -> n%d\n", i, i, prev, i)
		prev = fmt.Sprintf("n%d", i)
	}
	fmt.Fprintf(&b, " %s -> exit\n}\n", prev)
	return b.String()
}

// The process is SIGKILLed while it writes or fdatasyncs a node's journal
// record, several times: each resume continues from the last record that
// was whole, a completed node never runs again, seq stays continuous.
func TestPipelineRunSIGKILLedDuringJournalWrites(t *testing.T) {
	writes := journalCalls(t)
	const n = 3000
	dir := t.TempDir()
	dot := writeFile(t, dir, "linear.dot", linearDOT(n))
	logs := filepath.Join(dir, "run")
	args := []string{"pipeline", "run", dot, "--backend", "sim", "--logs", logs, "--json"}
	kills := map[string]int{}
	journal := filepath.Join(logs, engine.EventsFile)
	// Kill points spread over the run: after about 100, 30 and 250 more
	// nodes (~1.8 KB of journal each), then at the next record.
	for round, after := range []int64{180 << 10, 50 << 10, 450 << 10, 0} {
		call := killWhen(t, exec.Command(nanohostBin, args...), grown(journal, after, inJournalCall(writes, engine.EventsFile)))
		if call == "" {
			break // finished before it was caught
		}
		kills[strings.Fields(call)[0]]++
		cp, err := engine.LoadCheckpoint(logs)
		if err != nil || cp.State != engine.StateRunning {
			t.Fatalf("after kill %d (in %s): %v %+v", round+1, call, err, cp)
		}
		checkJournalAfterKill(t, logs)
		args = []string{"pipeline", "resume", logs, "--backend", "sim", "--json"}
	}
	if kills["write"]+kills["fdatasync"] < 2 {
		t.Fatalf("only %v kills landed in a journal write; the test needs at least two", kills)
	}
	t.Logf("killed in the journal's %v", kills)
	finishLinear(t, logs, n)
}

// finishLinear resumes the linear run in logs to its end and checks that
// the whole run, all processes together, did every node once.
func finishLinear(t *testing.T, logs string, n int) {
	t.Helper()
	if cp, err := engine.LoadCheckpoint(logs); err != nil || cp.State != engine.StateSuccess {
		r := runNanohost(t, "", "pipeline", "resume", logs, "--backend", "sim", "--json")
		if r.code != 0 {
			t.Fatalf("final resume: exit %d\n%s", r.code, r.stderr)
		}
	}
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"start"}
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("n%d", i))
	}
	want = append(want, "exit")
	if cp.State != engine.StateSuccess || !slices.Equal(cp.CompletedNodes, want) {
		t.Fatalf("final state %s (%s), %d nodes completed, want each of %d once", cp.State, cp.FailureReason, len(cp.CompletedNodes), len(want))
	}
	for _, id := range want {
		if cp.Attempts[id] != 1 {
			t.Fatalf("attempts[%s] = %d, want 1", id, cp.Attempts[id])
		}
	}
	checkJournal(t, logs)
}

const parallelCrashDOT = `digraph ParallelCrash {
	graph [goal="survive a crash in a parallel block"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	prep  [prompt="prepare"]
	fan   [shape=component]
	q1    [prompt="quick one"]
	q2    [prompt="quick two"]
	q3    [prompt="quick three"]
	slow  [prompt="the slow branch"]
	join  [shape=tripleoctagon]
	after [prompt="use the results"]
	start -> prep -> fan
	fan -> q1
	fan -> q3
	fan -> slow
	q1 -> q2 -> join
	q3 -> join
	slow -> join
	join -> after -> exit
}`

// The process is SIGKILLed inside a parallel block after two of its three
// branches finished: the resume runs only the third.
func TestPipelineRunSIGKILLedInsideAParallelBlock(t *testing.T) {
	dir := t.TempDir()
	dot := writeFile(t, dir, "parallel.dot", parallelCrashDOT)
	first := writeFile(t, dir, "first.json", `{"nodes": {
		"q1": ["q1 done [context:q1.by=first] [outcome:success]"],
		"q2": ["q2 done [outcome:success]"],
		"q3": ["q3 done [outcome:success]"],
		"slow": [{"status": "success", "response": "slow done", "delay_ms": 30000}]
	}}`)
	logs := filepath.Join(dir, "run")
	cmd := exec.Command(nanohostBin, "pipeline", "run", dot, "--script", first, "--logs", logs, "--json")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for !(traceHas(filepath.Join(logs, engine.EventsFile), engine.EventParallelBranchCompleted, "fan") && branchesDone(logs) == 2) {
		if time.Now().After(deadline) {
			t.Fatal("the quick branches never finished")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	cp, err := engine.LoadCheckpoint(logs)
	if err != nil || cp.NextNode != "fan" || len(cp.Branches) != 2 {
		t.Fatalf("after the kill: %v, next %s, finished branches %+v", err, cp.NextNode, cp.Branches)
	}
	// Had a quick branch run again, the run could not succeed.
	second := writeFile(t, dir, "second.json", `{"nodes": {
		"q1": [{"status": "fail", "failure_reason": "q1 must not run twice"}],
		"q2": [{"status": "fail", "failure_reason": "q2 must not run twice"}],
		"q3": [{"status": "fail", "failure_reason": "q3 must not run twice"}],
		"slow": ["slow done after the crash [outcome:success]"]
	}}`)
	r := runNanohost(t, "", "pipeline", "resume", logs, "--script", second, "--json")
	res := decodeRun(t, r)
	if r.code != 0 || !slices.Equal(res.Path, []string{"fan", "join", "after", "exit"}) {
		t.Fatalf("resume: exit %d %+v\n%s", r.code, res, r.stderr)
	}
	for _, id := range []string{"q1", "q2", "q3", "slow"} {
		if res.Attempts[id] != 1 || !slices.Contains(res.CompletedNodes, id) {
			t.Errorf("%s: attempts %d, completed %v", id, res.Attempts[id], res.CompletedNodes)
		}
	}
	results, _ := json.Marshal(res.Context["parallel.results"])
	if !strings.Contains(string(results), `"q1.by":"first"`) || !strings.Contains(string(results), "slow done after the crash") {
		t.Errorf("parallel.results = %s", results)
	}
	starts := map[string]int{}
	for _, l := range checkJournal(t, logs) {
		if l.Type == engine.EventStageStarted {
			starts[l.NodeID]++
		}
	}
	if starts["q1"] != 1 || starts["q2"] != 1 || starts["q3"] != 1 || starts["slow"] != 2 || starts["prep"] != 1 {
		t.Errorf("StageStarted counts = %v", starts)
	}
}

// branchesDone counts the committed branches in the run's journal.
func branchesDone(root string) int {
	data, _ := os.ReadFile(filepath.Join(root, engine.EventsFile))
	return bytes.Count(data, []byte(`"branch":{"node":"fan"`))
}

// A resume is SIGKILLed too — while it reads the journal back, and while
// it writes its first records — and the next resume still continues
// exactly where the run stood.
func TestPipelineResumeSIGKILLedDuringResume(t *testing.T) {
	writes := journalCalls(t)
	const n = 3000
	dir := t.TempDir()
	dot := writeFile(t, dir, "linear.dot", linearDOT(n))
	logs := filepath.Join(dir, "run")
	// A run stopped part-way, with a long journal after its last snapshot.
	run := exec.Command(nanohostBin, "pipeline", "run", dot, "--backend", "sim", "--logs", logs, "--json")
	if killWhen(t, run, grown(filepath.Join(logs, engine.EventsFile), 2<<20, inJournalCall(writes, engine.EventsFile))) == "" {
		t.Fatal("the run finished before it could be killed")
	}
	var kills []string
	for _, when := range []func() func(int) (string, bool){
		func() func(int) (string, bool) { return replaying(logs) },
		func() func(int) (string, bool) { return inJournalCall(writes, engine.EventsFile) },
		func() func(int) (string, bool) { return replaying(logs) },
	} {
		before, err := engine.LoadCheckpoint(logs)
		if err != nil {
			t.Fatal(err)
		}
		resume := exec.Command(nanohostBin, "pipeline", "resume", logs, "--backend", "sim", "--json")
		what := killWhen(t, resume, when())
		if what == "" {
			t.Fatal("the resume finished before it was killed")
		}
		kills = append(kills, what)
		after, err := engine.LoadCheckpoint(logs)
		if err != nil {
			t.Fatalf("after killing the resume (%s): %v", what, err)
		}
		if len(after.CompletedNodes) < len(before.CompletedNodes) || after.State != engine.StateRunning {
			t.Fatalf("killing the resume (%s) lost state: %d completed before, %d after (%s)", what, len(before.CompletedNodes), len(after.CompletedNodes), after.State)
		}
		checkJournalAfterKill(t, logs)
	}
	t.Logf("resumes killed in: %v", kills)
	finishLinear(t, logs, n)
}
