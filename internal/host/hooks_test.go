package host

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/config"
	"nanohost/internal/hooks"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

const hookSecret = "s3cret-0123456789abcdef"

// pushPayload is the part of a GitHub push event the hook reads.
func pushPayload(ref string) []byte {
	return []byte(`{"ref":"` + ref + `","repository":{"full_name":"acme/shop"},"head_commit":{"id":"abc123"}}`)
}

// hookHost is a host with a deploy pipeline and a push webhook.
func hookHost(t testing.TB, dir string, configure func(*config.Config)) *testHost {
	t.Helper()
	th := launch(t, hostSetup{dir: dir, answer: succeed, configure: func(c *config.Config) {
		c.Webhooks = []config.Webhook{{
			Name: "push", Secret: config.Secret(hookSecret), Pipeline: "deploy",
			Inputs: map[string]string{"repo": "repository.full_name", "ref": "ref"},
			When:   map[string]string{"ref": "refs/heads/main"}, MaxBytes: 4096, PerMinute: 100,
		}}
		if configure != nil {
			configure(c)
		}
	}})
	if err := os.WriteFile(filepath.Join(th.GroupDir("main"), "deploy.dot"), []byte(strings.ReplaceAll(inputsDeployDOT, "context.input.ref=main", "context.input.ref=refs/heads/main")), 0o644); err != nil {
		t.Fatal(err)
	}
	return th
}

// deliver posts body to the hook with headers, and returns the status and
// the JSON answer.
func (th *testHost) deliver(t *testing.T, hook string, body []byte, headers map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+th.HTTPAddr()+"/hooks/"+hook, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatalf("answer is not JSON (%d): %s", resp.StatusCode, data)
	}
	return resp.StatusCode, out
}

func githubHeaders(body []byte, delivery string) map[string]string {
	return map[string]string{"X-Hub-Signature-256": hooks.Sign([]byte(hookSecret), body), "X-GitHub-Delivery": delivery, "X-GitHub-Event": "push"}
}

func (th *testHost) waitRun(t *testing.T, id string, want runs.State) runs.Run {
	t.Helper()
	var run runs.Run
	testkit.WaitUntil(t, 10*time.Second, "run "+id+" is "+string(want), func() bool {
		run, _ = th.store.GetRun(context.Background(), id)
		return run.Status == want
	})
	return run
}

// A signed delivery (GitHub's signature, and the generic one with a
// timestamp) starts the hook's pipeline with inputs mapped from the
// payload, and answers with the run's id; one the when: filter drops
// starts nothing and says why.
func TestWebhookSignedDeliveryStartsARun(t *testing.T) {
	th := hookHost(t, "", nil)
	body := pushPayload("refs/heads/main")
	status, ans := th.deliver(t, "push", body, githubHeaders(body, "d-1"))
	runID, _ := ans["run_id"].(string)
	if status != http.StatusAccepted || runID == "" || ans["delivery"] != "d-1" {
		t.Fatalf("a signed delivery: %d %v", status, ans)
	}
	run := th.waitRun(t, runID, runs.Succeeded)
	if run.Inputs["repo"] != "acme/shop" || run.Inputs["ref"] != "refs/heads/main" || run.StartedBy != "hook:push" {
		t.Errorf("the run: inputs %v, started by %s", run.Inputs, run.StartedBy)
	}
	if n := len(th.agents.prompts("deploy")); n != 1 {
		t.Errorf("deploy asked %d times; the input routed the run wrong", n)
	}

	generic := pushPayload("refs/heads/main")
	status, ans = th.deliver(t, "push", generic, map[string]string{
		"X-Nanohost-Signature": hooks.SignAt([]byte(hookSecret), generic, time.Now()), "X-Nanohost-Delivery": "alert-7",
	})
	if id, _ := ans["run_id"].(string); status != http.StatusAccepted || id == "" || id == runID {
		t.Fatalf("a delivery signed with a timestamp: %d %v", status, ans)
	}

	dev := pushPayload("refs/heads/dev")
	status, ans = th.deliver(t, "push", dev, githubHeaders(dev, "d-dev"))
	if status != http.StatusOK || ans["run_id"] != nil || !strings.Contains(ans["filtered"].(string), "refs/heads/dev") {
		t.Errorf("a filtered delivery: %d %v", status, ans)
	}
	list, err := th.store.HookDeliveries(context.Background(), 10)
	if err != nil || len(list) != 3 {
		t.Fatalf("deliveries recorded: %+v %v", list, err)
	}
	page, _ := th.Runs().List(context.Background(), runs.Filter{})
	if len(page.Runs) != 2 {
		t.Errorf("%d runs, want 2 (the filtered delivery starts none)", len(page.Runs))
	}
}

// Refusals are 4xx whose body says why: no or a bad signature, a stale
// timestamp, an oversized body, an unknown hook, a payload without a
// mapped field, too many deliveries; none starts anything.
func TestWebhookRefusesBadSignatureOldTimestampAndOversizedBody(t *testing.T) {
	th := hookHost(t, "", func(c *config.Config) { c.Webhooks[0].PerMinute = 8 })
	body := pushPayload("refs/heads/main")
	big := append(pushPayload("refs/heads/main")[:1], []byte(`"pad":"`+strings.Repeat("x", 5000)+`",`+string(pushPayload("refs/heads/main")[1:]))...)
	cases := []struct {
		name    string
		hook    string
		body    []byte
		headers map[string]string
		status  int
		why     string
	}{
		{"unsigned", "push", body, nil, 401, "not signed"},
		{"wrong secret", "push", body, map[string]string{"X-Hub-Signature-256": hooks.Sign([]byte("guess"), body)}, 401, "does not match"},
		{"tampered body", "push", pushPayload("refs/heads/main "), map[string]string{"X-Hub-Signature-256": hooks.Sign([]byte(hookSecret), body)}, 401, "does not match"},
		{"old timestamp", "push", body, map[string]string{"X-Nanohost-Signature": hooks.SignAt([]byte(hookSecret), body, time.Now().Add(-6*time.Minute))}, 401, "off the host's clock"},
		{"oversized", "push", big, map[string]string{"X-Hub-Signature-256": hooks.Sign([]byte(hookSecret), big)}, 413, "larger than 4096 bytes"},
		{"unknown hook", "nope", body, githubHeaders(body, "x"), 404, "no webhook named"},
		{"missing field", "push", []byte(`{"ref":"refs/heads/main"}`), githubHeaders([]byte(`{"ref":"refs/heads/main"}`), "x2"), 422, "repository.full_name"},
	}
	for _, c := range cases {
		status, ans := th.deliver(t, c.hook, c.body, c.headers)
		if status != c.status || !strings.Contains(ans["error"].(string), c.why) {
			t.Errorf("%s: %d %v, want %d saying %q", c.name, status, ans, c.status, c.why)
		}
	}
	// The budget of 8 a minute is spent by the deliveries above (the
	// unknown hook's aside): the next is refused, with when to retry.
	limited := 0
	for range 3 {
		if status, ans := th.deliver(t, "push", body, map[string]string{}); status == http.StatusTooManyRequests && strings.Contains(ans["error"].(string), "at most 8 a minute") {
			limited++
		}
	}
	if limited == 0 {
		t.Error("no delivery was rate-limited")
	}
	if page, _ := th.Runs().List(context.Background(), runs.Filter{}); len(page.Runs) != 0 {
		t.Errorf("refused deliveries started runs: %+v", page.Runs)
	}
}

// A redelivery (the same delivery id) starts nothing and answers 200 with
// the first run's id — also after a restart.
func TestWebhookRedeliveryStartsNothing(t *testing.T) {
	dir := t.TempDir()
	th := hookHost(t, dir, nil)
	body := pushPayload("refs/heads/main")
	status, first := th.deliver(t, "push", body, githubHeaders(body, "gh-42"))
	runID, _ := first["run_id"].(string)
	if status != http.StatusAccepted || runID == "" {
		t.Fatalf("first delivery: %d %v", status, first)
	}
	th.waitRun(t, runID, runs.Succeeded)
	status, again := th.deliver(t, "push", body, githubHeaders(body, "gh-42"))
	if status != http.StatusOK || again["run_id"] != runID || again["redelivery"] != true {
		t.Errorf("a redelivery: %d %v", status, again)
	}
	th.stop()
	th = hookHost(t, dir, nil)
	status, later := th.deliver(t, "push", body, githubHeaders(body, "gh-42"))
	if status != http.StatusOK || later["run_id"] != runID {
		t.Errorf("a redelivery after a restart: %d %v", status, later)
	}
	if page, _ := th.Runs().List(context.Background(), runs.Filter{}); len(page.Runs) != 1 {
		t.Errorf("%d runs after three deliveries of one id, want 1", len(page.Runs))
	}
}

// A hook's per-minute bound is one among the replicas sharing the store,
// on the database's clock: deliveries another replica took this minute
// count here too, though this replica's own counter has room.
func TestWebhookRateIsSharedAmongReplicas(t *testing.T) {
	th := hookHost(t, "", func(c *config.Config) { c.Webhooks[0].PerMinute = 3 })
	other := hookRate{st: th.store} // another replica's bound, on the same store
	ctx := context.Background()
	for _, d := range []string{"elsewhere-1", "elsewhere-2"} {
		if ok, err := other.Allow(ctx, "push", d, 3); !ok || err != nil {
			t.Fatalf("the other replica's delivery %s: %v %v", d, ok, err)
		}
	}
	body := pushPayload("refs/heads/main")
	status, ans := th.deliver(t, "push", body, githubHeaders(body, "here-1"))
	if status != http.StatusAccepted {
		t.Fatalf("the third delivery this minute: %d %v, want it taken", status, ans)
	}
	status, ans = th.deliver(t, "push", body, githubHeaders(body, "here-2"))
	if status != http.StatusTooManyRequests || !strings.Contains(ans["error"].(string), "at most 3 a minute") {
		t.Errorf("the fourth delivery this minute, the second here: %d %v, want 429", status, ans)
	}
	if ok, _ := other.Allow(ctx, "push", "elsewhere-3", 3); ok {
		t.Error("the other replica took a fourth delivery this minute")
	}
	if page, _ := th.Runs().List(ctx, runs.Filter{}); len(page.Runs) != 1 {
		t.Errorf("%d runs, want the one delivery taken here", len(page.Runs))
	}
}
