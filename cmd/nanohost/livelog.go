//go:build !lean

package main

// The live log of `nanohost pipeline run|resume`: one line per event as the
// host document words it (runlog), coloured on a terminal, and — for a run
// whose stages take a while — how it is getting on: on a terminal a status
// line under the log, redrawn every second; piped, a "still running" line
// now and then, so a log file or a CI job shows the run is alive.

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/termstyle"
)

// liveLog prints a run's events as they come (engine.Observer).
type liveLog struct {
	w     io.Writer
	st    termstyle.Style
	v     runs.Verbosity
	every time.Duration // piped: the "still running" interval (0: never)
	now   func() time.Time

	mu      sync.Mutex
	started time.Time
	running map[string]stage // the stages executing now, by branch/node
	done    map[string]bool  // the stages that finished at least once
	total   int              // the pipeline's stages (0: unknown)
	asking  bool             // a gate is asking on the terminal: no status line
	// asksHere: the run's gates ask on this terminal (the interactive
	// interviewer prints the question with its menu), so the log does not
	// print the question a second time.
	asksHere bool
	shown    bool      // a status line is on the screen
	quiet    time.Time // when the log last printed a line
	stop     chan struct{}
	stopped  sync.WaitGroup
}

// stage is a stage execution in progress.
type stage struct {
	name         string
	index, total int
	since        time.Time
}

// newLiveLog starts a live log on w at verbosity v; every is how often a
// piped log says which stages are still running (0: never). Close it when
// the run ends.
func newLiveLog(w io.Writer, v runs.Verbosity, every time.Duration) *liveLog {
	l := &liveLog{w: w, st: termstyle.For(w), v: v, every: every, now: time.Now,
		running: map[string]stage{}, done: map[string]bool{}, stop: make(chan struct{})}
	l.started, l.quiet = l.now(), l.now()
	tick := time.Second
	if !l.st.Enabled() {
		if every <= 0 {
			return l
		}
		tick = min(every, time.Second)
	}
	l.stopped.Add(1)
	go l.tick(tick)
	return l
}

// OnEvent implements engine.Observer.
func (l *liveLog) OnEvent(e engine.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.follow(e)
	if !runlog.Shows(e, l.v) || (l.asksHere && e.Type == engine.EventInterviewStarted) {
		return
	}
	line := runlog.Visible(runlog.Line(e))
	if line == "" {
		return
	}
	l.clearStatus()
	fmt.Fprintln(l.w, paintLine(l.st, e, line))
	l.quiet = l.now()
	l.drawStatus()
}

// follow keeps track of what runs, for the status line.
func (l *liveLog) follow(e engine.Event) {
	key := e.Branch + "/" + e.NodeID
	if e.Total > 0 {
		l.total = e.Total
	}
	switch e.Type {
	case engine.EventStageStarted:
		if h := e.Data["handler"]; h != engine.TypeStart && h != engine.TypeExit {
			l.running[key] = stage{name: runlog.StageName(e.Label, e.NodeID, e.Branch), index: e.Index, total: e.Total, since: l.now()}
		}
	case engine.EventStageCompleted, engine.EventStageFailed:
		if !e.WillRetry {
			if _, ok := l.running[key]; ok {
				l.done[key] = true
			}
			delete(l.running, key)
		}
	case engine.EventInterviewStarted:
		l.asking = true
		l.clearStatus() // the question is asked on this terminal
	case engine.EventInterviewCompleted, engine.EventInterviewTimeout:
		l.asking = false
	}
}

// Close stops the status line and clears it.
func (l *liveLog) Close() {
	close(l.stop)
	l.stopped.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearStatus()
}

func (l *liveLog) tick(every time.Duration) {
	defer l.stopped.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.st.Enabled() {
			l.clearStatus()
			l.drawStatus()
		} else if len(l.running) > 0 && l.now().Sub(l.quiet) >= l.every {
			fmt.Fprintln(l.w, "  … "+runlog.Visible(l.progress()))
			l.quiet = l.now()
		}
		l.mu.Unlock()
	}
}

// progress says what runs and how far the run is: "Implement (3/5)
// running 2m 5s · 2 of 5 stages done · 4m 10s in all".
func (l *liveLog) progress() string {
	keys := make([]string, 0, len(l.running))
	for k := range l.running {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return l.running[keys[i]].since.Before(l.running[keys[j]].since) })
	var parts []string
	for i, k := range keys {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(keys)-3))
			break
		}
		s := l.running[k]
		parts = append(parts, runlog.Progress(s.name, s.index, s.total)+" running "+runlog.Duration(l.now().Sub(s.since)))
	}
	text := strings.Join(parts, ", ")
	if l.total > 0 {
		text += fmt.Sprintf(" · %d of %d stages done", min(len(l.done), l.total), l.total)
	}
	return text + " · " + runlog.Duration(l.now().Sub(l.started)) + " in all"
}

// statusAfter is how long a stage runs before the status line shows it:
// quick stages just print their lines.
const statusAfter = time.Second

// drawStatus shows the status line under the log (a terminal only), once
// a stage has run for a while.
func (l *liveLog) drawStatus() {
	if !l.st.Enabled() || l.asking || !l.anyRunningFor(statusAfter) {
		return
	}
	spin := spinner[int(l.now().Sub(l.started)/time.Second)%len(spinner)]
	fmt.Fprint(l.w, l.st.Dim(termstyle.Fit("  "+spin+" "+runlog.Visible(l.progress()), termstyle.Width(l.w)-1)))
	l.shown = true
}

func (l *liveLog) anyRunningFor(d time.Duration) bool {
	for _, s := range l.running {
		if l.now().Sub(s.since) >= d {
			return true
		}
	}
	return false
}

// clearStatus erases the status line, so the next log line takes its place.
func (l *liveLog) clearStatus() {
	if l.shown {
		fmt.Fprint(l.w, "\r\x1b[K")
		l.shown = false
	}
}

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// paintLine colours a live log line by what its event says (a terminal only).
func paintLine(st termstyle.Style, e engine.Event, line string) string {
	switch e.Type {
	case engine.EventPipelineStarted, engine.EventPipelineResumed:
		return st.Bold(line)
	case engine.EventPipelineCompleted:
		return st.Bold(st.Green(line))
	case engine.EventPipelineFailed:
		return st.Bold(st.Red(line))
	case engine.EventPipelineCancelled, engine.EventPipelineInterrupted:
		return st.Bold(st.Yellow(line))
	case engine.EventStageCompleted:
		if e.Status != "" && !e.Status.IsSuccess() {
			return st.Yellow(line)
		}
		return st.Green(line)
	case engine.EventStageFailed:
		if e.WillRetry {
			return st.Yellow(line)
		}
		return st.Red(line)
	case engine.EventStageRetrying, engine.EventWarning, engine.EventInterviewTimeout:
		return st.Yellow(line)
	case engine.EventInterviewStarted, engine.EventInterviewCompleted:
		return st.Cyan(line)
	case engine.EventStageStarted:
		return st.Blue(line)
	case engine.EventDecision, engine.EventCheckpointSaved, engine.EventContextUpdated, engine.EventAgentResponse:
		return st.Dim(line)
	}
	return line
}
