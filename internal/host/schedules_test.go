package host

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/ipc/client"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/runs"
	"nanohost/internal/schedule"
	"nanohost/internal/testkit"
)

// fakeClock is the scheduler's clock in tests: it stands still until moved.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// t0 is a Monday, 08:00 UTC: the tests' clocks start there.
var t0 = time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)

// writeNanoClaw drops a request file as NanoClaw's agent writes it: no
// "v", no "request_id", a timestamped name.
func (th *testHost) writeNanoClaw(t *testing.T, group, name string, req map[string]any) {
	t.Helper()
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(th.IPCRoot(), group, "tasks")
	if err := os.WriteFile(filepath.Join(dir, "."+name+".tmp"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "."+name+".tmp"), filepath.Join(dir, name+".json")); err != nil {
		t.Fatal(err)
	}
}

func (th *testHost) task(t *testing.T, id string) schedule.Task {
	t.Helper()
	task, err := th.store.GetTask(context.Background(), id)
	if err != nil {
		t.Fatalf("task %s: %v", id, err)
	}
	return task
}

// runsOf are the runs task id started.
func (th *testHost) runsOf(t *testing.T, id string) []runs.Run {
	t.Helper()
	page, err := th.Runs().List(context.Background(), runs.Filter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []runs.Run
	for _, r := range page.Runs {
		if r.StartedBy == "task:"+id {
			out = append(out, r)
		}
	}
	return out
}

// NanoClaw's task requests, in its exact field names and shapes (no "v",
// no "request_id"), are accepted and answered in responses/<file>.json:
// schedule, list, pause, resume, update, cancel, register a group. A
// non-main group may not target another chat, touch another group's task
// or register groups.
func TestNanoClawTaskIPCIsAccepted(t *testing.T) {
	clock := newFakeClock(t0)
	fake := groupsWorkspace(t)
	setup := groupsSetup(fake, "")
	configure := setup.configure
	setup.configure = func(c *config.Config) { configure(c); c.Timezone = "Europe/Berlin" }
	setup.now = clock.Now
	th := launch(t, setup)
	stamp := time.Now().UTC().Format(time.RFC3339)

	th.writeNanoClaw(t, "main", "1764489600000-a1b2c3", map[string]any{
		"type": "schedule_task", "prompt": "Summarise the open incidents", "schedule_type": "cron",
		"schedule_value": "0 9 * * 1-5", "context_mode": "isolated", "targetJid": teamChat,
		"createdBy": "main", "timestamp": stamp,
	})
	resp := th.groupResponse(t, "main", "1764489600000-a1b2c3")
	task, _ := resp["task"].(map[string]any)
	if resp["status"] != "accepted" || task == nil {
		t.Fatalf("schedule_task: %v", resp)
	}
	id, _ := task["id"].(string)
	// 09:00 in Berlin on that Monday is 08:00 UTC: it is 08:00 UTC now, so
	// the next is Tuesday's.
	if task["next_run"] != "2026-12-01T08:00:00Z" || task["groupFolder"] != "main" || task["status"] != "active" {
		t.Errorf("the task as answered: %v", task)
	}
	if got := th.task(t, id); got.Chat != teamChat || got.ContextMode != schedule.Isolated {
		t.Errorf("stored task: %+v", got)
	}

	th.writeNanoClaw(t, "main", "1764489600001-once", map[string]any{
		"type": "schedule_task", "prompt": "Run the release checklist", "schedule_type": "once",
		"schedule_value": "2026-12-01T09:00:00", "context_mode": "group", "targetJid": opsChat, "createdBy": "main", "timestamp": stamp,
	})
	once := th.groupResponse(t, "main", "1764489600001-once")
	if once["status"] != "accepted" || once["task"].(map[string]any)["next_run"] != "2026-12-01T08:00:00Z" {
		t.Errorf("a once task is read in the configured zone: %v", once)
	}
	th.writeNanoClaw(t, "main", "1764489600002-zoned", map[string]any{
		"type": "schedule_task", "prompt": "x", "schedule_type": "once", "schedule_value": "2026-12-01T09:00:00Z", "targetJid": opsChat,
	})
	if r := th.groupResponse(t, "main", "1764489600002-zoned"); r["status"] != "rejected" || !strings.Contains(r["reason"].(string), "without it") {
		t.Errorf("a once time with a zone: %v", r)
	}

	th.writeNanoClaw(t, "main", "1764489600003-list", map[string]any{"type": "list_tasks", "groupFolder": "main", "isMain": true, "timestamp": stamp})
	list := th.groupResponse(t, "main", "1764489600003-list")
	if tasks, _ := list["tasks"].([]any); list["status"] != "accepted" || len(tasks) != 2 {
		t.Errorf("list_tasks: %v", list)
	}

	for i, step := range []struct {
		req    map[string]any
		status string
	}{
		{map[string]any{"type": "pause_task", "taskId": id, "groupFolder": "main", "isMain": true, "timestamp": stamp}, "paused"},
		{map[string]any{"type": "resume_task", "taskId": id, "groupFolder": "main", "isMain": true, "timestamp": stamp}, "active"},
		{map[string]any{"type": "update_task", "taskId": id, "schedule_type": "interval", "schedule_value": "1800000"}, "active"},
	} {
		name := "1764489600010-step" + string(rune('a'+i))
		th.writeNanoClaw(t, "main", name, step.req)
		r := th.groupResponse(t, "main", name)
		if r["status"] != "accepted" || th.task(t, id).Status != schedule.Status(step.status) {
			t.Errorf("%s: %v (stored %s)", step.req["type"], r, th.task(t, id).Status)
		}
	}
	if got := th.task(t, id); got.Type != schedule.Interval || !got.NextRun.Equal(t0.Add(30*time.Minute)) {
		t.Errorf("updated to every 30 minutes from now: %+v", got)
	}

	// The team group: only its own chat, only its own tasks, no groups.
	th.writeNanoClaw(t, "team", "1764489600020-other", map[string]any{
		"type": "schedule_task", "prompt": "x", "schedule_type": "cron", "schedule_value": "0 * * * *", "targetJid": opsChat,
		"groupFolder": "main", "isMain": true,
	})
	if r := th.groupResponse(t, "team", "1764489600020-other"); r["status"] != "rejected" || !strings.Contains(r["reason"].(string), "not allowed") {
		t.Errorf("a non-main group targeting another chat: %v", r)
	}
	th.writeNanoClaw(t, "team", "1764489600021-pause", map[string]any{"type": "pause_task", "taskId": id, "isMain": true})
	if r := th.groupResponse(t, "team", "1764489600021-pause"); r["status"] != "rejected" || th.task(t, id).Status != schedule.Active {
		t.Errorf("a non-main group pausing another's task: %v", r)
	}
	th.writeNanoClaw(t, "team", "1764489600022-reg", map[string]any{"type": "register_group", "jid": newChat, "name": "New", "folder": "newbie", "trigger": "@Andy"})
	if r := th.groupResponse(t, "team", "1764489600022-reg"); r["status"] != "rejected" {
		t.Errorf("a non-main group registering a group: %v", r)
	}
	th.writeNanoClaw(t, "team", "1764489600023-own", map[string]any{
		"type": "schedule_task", "prompt": "check the build", "schedule_type": "interval", "schedule_value": "3600000", "targetJid": teamChat,
	})
	if r := th.groupResponse(t, "team", "1764489600023-own"); r["status"] != "accepted" {
		t.Errorf("a group scheduling for itself: %v", r)
	}
	th.writeNanoClaw(t, "team", "1764489600024-list", map[string]any{"type": "list_tasks"})
	if tasks, _ := th.groupResponse(t, "team", "1764489600024-list")["tasks"].([]any); len(tasks) != 1 {
		t.Errorf("a non-main group lists only its own tasks: %v", tasks)
	}

	th.writeNanoClaw(t, "main", "1764489600030-reg", map[string]any{
		"type": "register_group", "jid": newChat, "name": "New", "folder": "newbie", "trigger": "@Andy", "requiresTrigger": true,
	})
	if r := th.groupResponse(t, "main", "1764489600030-reg"); r["status"] != "accepted" {
		t.Fatalf("register_group from main: %v", r)
	}
	if g, ok := th.groups.get("newbie"); !ok || g.ChatID != newChat || g.IsMain {
		t.Errorf("the registered group: %+v %v", g, ok)
	}
	th.writeNanoClaw(t, "main", "1764489600031-cancel", map[string]any{"type": "cancel_task", "taskId": id})
	if r := th.groupResponse(t, "main", "1764489600031-cancel"); r["status"] != "accepted" {
		t.Errorf("cancel_task: %v", r)
	}
	if _, err := th.store.GetTask(context.Background(), id); err == nil {
		t.Errorf("a cancelled task is still stored")
	}
}

// inputsDeployDOT requires repo and ref, and deploys only when ref is
// main (its context says so).
const inputsDeployDOT = `digraph Deploy {
  graph [inputs="repo,ref"]
  start  [shape=Mdiamond]
  which  [shape=diamond]
  deploy [prompt="deploy"]
  wrong  [prompt="wrong ref"]
  exit   [shape=Msquare]
  start -> which
  which -> deploy [condition="context.input.ref=main"]
  which -> wrong  [condition="context.input.ref!=main"]
  deploy -> exit
  wrong -> exit
}`

// A scheduled pipeline runs with its inputs when it is due (not before);
// a fire that fails (an input missing) is recorded with its error and the
// task goes on to its next time.
func TestScheduledPipelineRunsWithInputs(t *testing.T) {
	clock := newFakeClock(t0)
	th := launch(t, hostSetup{answer: succeed, now: clock.Now})
	if err := os.WriteFile(filepath.Join(th.GroupDir("main"), "deploy.dot"), []byte(inputsDeployDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	th.writeRequest(t, "tasks", "sched-deploy", map[string]any{
		"type": "schedule_task", "pipeline": "deploy", "inputs": map[string]string{"repo": "acme/shop", "ref": "main"},
		"schedule_type": "interval", "schedule_value": "1h",
	})
	resp := th.response(t, "sched-deploy")
	if resp["status"] != "accepted" {
		t.Fatalf("schedule a pipeline: %v", resp)
	}
	id := resp["task"].(map[string]any)["id"].(string)
	th.writeRequest(t, "tasks", "sched-broken", map[string]any{
		"type": "schedule_task", "pipeline": "deploy", "inputs": map[string]string{"repo": "acme/shop"},
		"schedule_type": "interval", "schedule_value": "1h",
	})
	broken := th.response(t, "sched-broken")["task"].(map[string]any)["id"].(string)

	clock.Set(t0.Add(59 * time.Minute))
	if err := th.LookForDueTasks(t.Context()); err != nil { // nothing is due: nothing may start
		t.Fatal(err)
	}
	if got := th.runsOf(t, id); len(got) != 0 {
		t.Fatalf("a run started before its time: %+v", got)
	}
	clock.Set(t0.Add(time.Hour))
	th.WakeScheduler()
	var run runs.Run
	testkit.WaitUntil(t, 10*time.Second, "the scheduled run succeeds", func() bool {
		got := th.runsOf(t, id)
		if len(got) == 1 {
			run, _ = th.store.GetRun(context.Background(), got[0].ID)
		}
		return run.Status == runs.Succeeded
	})
	if run.Inputs["repo"] != "acme/shop" || run.Inputs["ref"] != "main" {
		t.Errorf("the run's inputs: %v", run.Inputs)
	}
	if deploys, wrong := th.agents.prompts("deploy"), th.agents.prompts("wrong"); len(deploys) != 1 || len(wrong) != 0 {
		t.Errorf("the run's context did not route on input.ref: deploy asked %d times, wrong %d", len(deploys), len(wrong))
	}
	testkit.WaitUntil(t, 5*time.Second, "both fires are recorded", func() bool {
		return th.task(t, id).LastRunID == run.ID && th.task(t, broken).LastError != ""
	})
	task := th.task(t, id)
	if !task.NextRun.Equal(t0.Add(2*time.Hour)) || task.Status != schedule.Active {
		t.Errorf("after its fire: %+v", task)
	}
	b := th.task(t, broken)
	if !strings.Contains(b.LastError, "ref") || !b.NextRun.Equal(t0.Add(2*time.Hour)) || b.Status != schedule.Active {
		t.Errorf("a failed fire: %+v", b)
	}
	if got := th.runsOf(t, broken); len(got) != 0 {
		t.Errorf("a fire missing an input started a run: %+v", got)
	}
}

// A host stopped across three due times runs a missed fire once when it
// starts again (catch_up: once), not once per slot, and then keeps to the
// schedule, anchored to its first due time; catch_up: skip runs none.
func TestMissedFireRunsOnceAfterDowntime(t *testing.T) {
	clock := newFakeClock(t0)
	dir := t.TempDir()
	first := launch(t, hostSetup{dir: dir, answer: succeed, now: clock.Now})
	if err := os.WriteFile(filepath.Join(first.GroupDir("main"), "deploy.dot"), []byte(inputsDeployDOT), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, catchUp := range []string{"once", "skip"} {
		first.writeRequest(t, "tasks", "sched-"+catchUp, map[string]any{
			"type": "schedule_task", "pipeline": "deploy", "inputs": map[string]string{"repo": "r", "ref": "main"},
			"schedule_type": "interval", "schedule_value": "3600000", "catch_up": catchUp,
		})
		resp := first.response(t, "sched-"+catchUp)
		if resp["status"] != "accepted" {
			t.Fatalf("schedule: %v", resp)
		}
		ids[catchUp] = resp["task"].(map[string]any)["id"].(string)
	}
	first.stop()

	clock.Set(t0.Add(3*time.Hour + 30*time.Minute)) // due at 1h, 2h and 3h: all missed
	second := launch(t, hostSetup{dir: dir, answer: succeed, now: clock.Now})
	testkit.WaitUntil(t, 10*time.Second, "the missed fire runs once at start-up", func() bool {
		return len(second.runsOf(t, ids["once"])) == 1 && second.task(t, ids["skip"]).NextRun.Equal(t0.Add(4*time.Hour))
	})
	if err := second.LookForDueTasks(t.Context()); err != nil { // a second look finds nothing more due
		t.Fatal(err)
	}
	if n := len(second.runsOf(t, ids["once"])); n != 1 {
		t.Fatalf("%d runs after the downtime, want 1", n)
	}
	if n := len(second.runsOf(t, ids["skip"])); n != 0 {
		t.Fatalf("catch_up skip ran %d missed fires", n)
	}
	for _, id := range ids {
		if next := second.task(t, id).NextRun; !next.Equal(t0.Add(4 * time.Hour)) {
			t.Errorf("task %s next runs at %s, want 4h after the start (anchored)", id, next)
		}
	}
	clock.Set(t0.Add(4 * time.Hour))
	second.WakeScheduler()
	testkit.WaitUntil(t, 10*time.Second, "both fire on schedule", func() bool {
		return len(second.runsOf(t, ids["once"])) == 2 && len(second.runsOf(t, ids["skip"])) == 1
	})
}

// The in-process variant of e2e.TestScheduledPromptFiresOnTimeAndReplies
// (which runs real agent containers): a scheduled prompt fires when due
// and its reply reaches the chat: in the group's conversation (its
// session) for context_mode group, in a fresh session for isolated.
func TestScheduledPromptRepliesInProcess(t *testing.T) {
	clock := newFakeClock(t0)
	var mu sync.Mutex
	var asked []engine.Request
	th := launch(t, hostSetup{now: clock.Now, answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req)
		if strings.Contains(req.Prompt, "incidents") {
			return engine.Result{Text: "Two incidents are open.", SessionID: "sess-group"}, nil
		}
		return engine.Result{Text: "The build is green."}, nil
	}})
	for name, req := range map[string]map[string]any{
		"sched-group":    {"type": "schedule_task", "prompt": "summarise the open incidents", "schedule_type": "once", "schedule_value": "2026-11-30 09:00", "context_mode": "group"},
		"sched-isolated": {"type": "schedule_task", "prompt": "check the build", "schedule_type": "once", "schedule_value": "2026-11-30 09:00", "context_mode": "isolated"},
	} {
		th.writeRequest(t, "tasks", name, req)
		if r := th.response(t, name); r["status"] != "accepted" {
			t.Fatalf("%s: %v", name, r)
		}
	}
	clock.Set(t0.Add(59 * time.Minute))
	if err := th.LookForDueTasks(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	early := len(asked)
	mu.Unlock()
	if early != 0 {
		t.Fatalf("a prompt fired before its time")
	}
	clock.Set(t0.Add(time.Hour))
	th.WakeScheduler()
	testkit.WaitUntil(t, 10*time.Second, "both replies reach the chat", func() bool {
		s := th.screen.Text()
		return strings.Contains(s, "Two incidents are open.") && strings.Contains(s, "The build is green.")
	})
	mu.Lock()
	defer mu.Unlock()
	for _, req := range asked {
		if !strings.Contains(req.Prompt, "[SCHEDULED TASK") {
			t.Errorf("the prompt is not marked as scheduled: %q", req.Prompt)
		}
		switch {
		case strings.Contains(req.Prompt, "incidents") && req.RunID != "chat-main":
			t.Errorf("context_mode group ran in %s, not the group's conversation", req.RunID)
		case strings.Contains(req.Prompt, "build") && (req.RunID == "chat-main" || !strings.HasPrefix(req.RunID, "chat-main-task-")):
			t.Errorf("context_mode isolated ran in %s, not a fresh conversation", req.RunID)
		}
	}
	if sid, _ := th.store.GetSession(context.Background(), "main", chatThreadKey); sid != "sess-group" {
		t.Errorf("the group's session after a group-mode fire: %q", sid)
	}
}

// An agent schedules, lists, pauses and cancels tasks with `nanoagent
// ipc` (the client the skill teaches), against the real host.
func TestAgentSchedulesWithNanoagent(t *testing.T) {
	th := launch(t, hostSetup{answer: succeed, now: newFakeClock(t0).Now})
	t.Setenv(client.EnvDir, filepath.Join(th.IPCRoot(), "main"))
	nanoagent := func(args ...string) (int, string) {
		var out, errs strings.Builder
		code := client.Main(context.Background(), args, strings.NewReader(""), &out, &errs)
		return code, out.String() + errs.String()
	}
	code, out := nanoagent("schedule", "--every", "1h", "--prompt", "check the build", "--context", "group")
	id := regexp.MustCompile(`task (task-[0-9a-f]+) is active`).FindStringSubmatch(out)
	if code != 0 || id == nil || !strings.Contains(out, "next 2026-11-30T09:00:00Z") {
		t.Fatalf("schedule: %d %s", code, out)
	}
	if code, out := nanoagent("tasks"); code != 0 || !strings.Contains(out, id[1]) || !strings.Contains(out, `"check the build"`) {
		t.Errorf("tasks: %d %s", code, out)
	}
	if code, out := nanoagent("pause-task", id[1]); code != 0 || !strings.Contains(out, "is paused") {
		t.Errorf("pause-task: %d %s", code, out)
	}
	if code, out := nanoagent("schedule", "--cron", "0 9 * * *", "--every", "1h", "--prompt", "x"); code != client.ExitUsage || !strings.Contains(out, "exactly one of") {
		t.Errorf("two schedules: %d %s", code, out)
	}
	if code, out := nanoagent("schedule", "--at", "2026-12-01T09:00:00Z", "--prompt", "x"); code != client.ExitRefused || !strings.Contains(out, "zone or offset") {
		t.Errorf("a zoned once time: %d %s", code, out)
	}
	if code, out := nanoagent("cancel-task", id[1]); code != 0 || !strings.Contains(out, "cancelled") {
		t.Errorf("cancel-task: %d %s", code, out)
	}
}

// The dashboard's schedules page lists the tasks with their next fire and
// a pause button; the button pauses (a same-site form post) and a
// cross-site post is refused.
func TestSchedulesPageListsAndPausesTasks(t *testing.T) {
	th := launch(t, hostSetup{answer: succeed, now: newFakeClock(t0).Now})
	th.writeRequest(t, "tasks", "sched-page", map[string]any{
		"type": "schedule_task", "prompt": "check the build", "schedule_type": "cron", "schedule_value": "0 9 * * *",
	})
	id := th.response(t, "sched-page")["task"].(map[string]any)["id"].(string)
	base := "http://" + th.HTTPAddr()
	resp, err := http.Get(base + "/schedules")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{id, "check the build", "cron 0 9 * * *", `action="/schedules/` + id + `/pause"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	post := func(origin string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/schedules/"+id+"/pause", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Sec-Fetch-Site", map[bool]string{true: "same-origin", false: "cross-site"}[origin == base])
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("http://evil.example"); code != http.StatusForbidden || th.task(t, id).Status != schedule.Active {
		t.Errorf("a cross-site pause: %d, task %s", code, th.task(t, id).Status)
	}
	if code := post(base); code != http.StatusSeeOther || th.task(t, id).Status != schedule.Paused {
		t.Errorf("the pause button: %d, task %s", code, th.task(t, id).Status)
	}
}

// An isolated prompt goes the way every chat answer goes: it is stored
// keyed by its fire and answered once, in a session of its task's own.
// The same fire done again — by a replica taking it over from one that
// died after doing it, before recording it — stores nothing new and asks
// nobody: the answer is posted once.
func TestIsolatedPromptOfAFireDoneAgainIsAnsweredOnce(t *testing.T) {
	clock := newFakeClock(t0)
	var mu sync.Mutex
	var asked []engine.Request
	th := launch(t, hostSetup{now: clock.Now, answer: func(_ context.Context, req engine.Request) (engine.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, req)
		return engine.Result{Text: "The build is green.", SessionID: "sess-isolated"}, nil
	}})
	th.writeRequest(t, "tasks", "sched-isolated", map[string]any{"type": "schedule_task", "taskId": "build-check", "prompt": "check the build",
		"schedule_type": "once", "schedule_value": "2026-11-30 09:00", "context_mode": "isolated"})
	if r := th.response(t, "sched-isolated"); r["status"] != "accepted" {
		t.Fatalf("schedule: %v", r)
	}
	task := th.task(t, "build-check")
	clock.Set(t0.Add(time.Hour))
	th.WakeScheduler()
	testkit.WaitUntil(t, 10*time.Second, "the answer is posted and the fire recorded", func() bool {
		return strings.Contains(th.screen.Text(), "The build is green.") && th.task(t, "build-check").Status == schedule.Completed
	})

	res, err := th.tasks.Fire(context.Background(), schedule.Fire{Task: task, Due: task.NextRun})
	if err != nil {
		t.Fatalf("the fire done again: %v", err)
	}
	if res.RunID != "" {
		t.Errorf("the fire done again started run %s", res.RunID)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("the agent was asked %d times for one fire, want once", len(asked))
	}
	if id := asked[0].RunID; id == "chat-main" || !strings.HasPrefix(id, "chat-main-build-check") {
		t.Errorf("the isolated prompt ran in %s, not a session of its task's own", id)
	}
	if n := strings.Count(th.screen.Text(), "The build is green."); n != 1 {
		t.Errorf("the answer is shown %d times, want once:\n%s", n, th.screen.Text())
	}
	if sid, _ := th.store.GetSession(context.Background(), "main", chatThreadKey); sid == "sess-isolated" {
		t.Error("the isolated session became the group's conversation's session")
	}
}
