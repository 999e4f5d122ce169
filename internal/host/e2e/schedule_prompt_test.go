package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/container"
)

// fakeClock is the scheduler's clock: it stands still until moved.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// scheduledAgent is the agent in the container (busybox sh, the command
// agent: the prompt on stdin): it answers a prompt only when it is marked
// as a scheduled task, by what the prompt asks, and reports a session of
// its own for each, so the test sees which conversation kept which.
const scheduledAgent = `prompt="$(cat)"
case "$prompt" in
*"[SCHEDULED TASK"*) ;;
*) echo "The prompt is not marked as a scheduled task."; exit 0 ;;
esac
case "$prompt" in
*incidents*) echo sess-group > "$NANOAGENT_SESSION_FILE"; echo "Two incidents are open." ;;
*build*) echo sess-isolated > "$NANOAGENT_SESSION_FILE"; echo "The build is green." ;;
*) echo "I was not asked anything I know." ;;
esac`

// runsStarted are the run ids the backend started containers for.
func (p *peakCounter) runsStarted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for id := range p.byRun {
		out = append(out, id)
	}
	return out
}

// A scheduled prompt fires when due and a real agent container's reply
// reaches the chat: in the group's conversation (its session) for
// context_mode group, in a fresh conversation for isolated. The prompt the
// agent gets is marked as a scheduled task.
func TestScheduledPromptFiresOnTimeAndReplies(t *testing.T) {
	t.Parallel()
	docker := requireDocker(t)
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC) // a Monday, 08:00 UTC
	clock := &fakeClock{t: t0}
	e := start(t, docker, setup{script: map[string]any{"default": "unused"}, maxContainers: 2, now: clock.Now,
		agent: &container.AgentConfig{Kind: "command", Command: scheduledAgent}})
	ids := map[string]string{}
	for name, req := range map[string]map[string]any{
		"sched-group":    {"type": "schedule_task", "prompt": "summarise the open incidents", "schedule_type": "once", "schedule_value": "2026-11-30 09:00", "context_mode": "group"},
		"sched-isolated": {"type": "schedule_task", "prompt": "check the build", "schedule_type": "once", "schedule_value": "2026-11-30 09:00", "context_mode": "isolated"},
	} {
		writeIPCRequest(t, e.cfg.DataDir, "main", "tasks", name, req)
		r := readResponse(t, e.cfg.DataDir, "main", name)
		if r["status"] != "accepted" {
			t.Fatalf("%s: %v", name, r)
		}
		ids[name] = r["task"].(map[string]any)["id"].(string)
	}

	// A minute early: the scheduler looks and fires nothing.
	clock.Set(t0.Add(59 * time.Minute))
	if err := e.host.LookForDueTasks(t.Context()); err != nil {
		t.Fatal(err)
	}
	for name, id := range ids {
		task, err := e.store.GetTask(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !task.LastRun.IsZero() || task.LastResult != "" {
			t.Fatalf("%s fired before its time: %+v", name, task)
		}
	}
	if n := e.peak.started(); n != 0 {
		t.Fatalf("%d agent containers started before the tasks were due", n)
	}

	clock.Set(t0.Add(time.Hour))
	e.host.WakeScheduler()
	e.screen.WaitFor(t, "Two incidents are open.", 1, 90*time.Second)
	e.screen.WaitFor(t, "The build is green.", 1, 90*time.Second)
	if s := e.screen.Text(); strings.Contains(s, "not marked as a scheduled task") || strings.Contains(s, "not asked anything") {
		t.Errorf("the agent was given a prompt it could not place:\n%s", s)
	}

	var group, isolated []string
	for _, id := range e.peak.runsStarted() {
		switch {
		case id == "chat-main":
			group = append(group, id)
		case strings.HasPrefix(id, "chat-main-task-"):
			isolated = append(isolated, id)
		default:
			t.Errorf("an agent ran in %s, neither the group's conversation nor a task's own", id)
		}
	}
	if len(group) != 1 || len(isolated) != 1 {
		t.Errorf("agents ran in the group's conversation %v and in fresh ones %v; want one each", group, isolated)
	}
	// context_mode group answered in the group's conversation: its session
	// is the one the agent reported for the incidents prompt; the isolated
	// fire's session did not replace it.
	if sid, _ := e.store.GetSession(context.Background(), "main", ""); sid != "sess-group" {
		t.Errorf("the group's session after a group-mode fire: %q, want sess-group", sid)
	}
}
