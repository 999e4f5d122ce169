package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"nanohost/internal/hooks"
	"nanohost/internal/runs"
	"nanohost/internal/testkit"
)

// The exactly-once tests hold the claimant of a fire or a delivery right
// after it claimed it, before it records the run: the test locks the runs
// table (EXCLUSIVE: reads go on, writes wait), so the replica that took
// the claim waits on its first write of the run — and is SIGKILLed there.
// Its transaction never commits: the run does not exist until the other
// replica takes the claim over, once it expires.

// pipelineOnce is the scheduled and the webhook pipeline: one stage that
// says which input it had.
const pipelineOnce = `digraph Once {
    graph [inputs="env"]
    start [shape=Mdiamond]
    work  [prompt="do the work"]
    exit  [shape=Msquare]
    start -> work -> exit
}`

// lockRuns takes the runs table for writing in a transaction of the
// test's own; release lets the writes that waited go on.
func (rs *replicas) lockRuns(t *testing.T) (db *sql.DB, release func()) {
	t.Helper()
	db, err := sql.Open("pgx", rs.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`LOCK TABLE runs IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			if err := tx.Rollback(); err != nil {
				t.Errorf("release the lock on runs: %v", err)
			}
		}
	}
	t.Cleanup(release)
	return db, release
}

// leaseHolder is who holds the lease (kind, key) now ("" for nobody).
func leaseHolder(db *sql.DB, kind, keyPrefix string) (owner, key string) {
	_ = db.QueryRow(`SELECT owner, key FROM leases WHERE kind = $1 AND key LIKE $2 AND expires_at > now()`,
		kind, keyPrefix+"%").Scan(&owner, &key)
	return owner, key
}

func countRows(t *testing.T, db *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (rs *replicas) other(r *replica) *replica {
	for _, o := range rs.started {
		if o != r {
			return o
		}
	}
	rs.t.Fatalf("no replica but %s", r.id)
	return nil
}

// waitRunSucceeded waits until run id succeeded with every event told in
// its thread.
func (rs *replicas) waitRunSucceeded(t *testing.T, id string, by *replica) runs.Run {
	t.Helper()
	st := rs.store()
	var run runs.Run
	if !rs.fake.WaitFor(90*time.Second, func() bool {
		run, _ = st.GetRun(context.Background(), id)
		return run.Status == runs.Succeeded && run.LastDeliveredSeq == run.LastSeq
	}) {
		t.Fatalf("run %s did not succeed with its story told within 90s: %s (%s)\n%s's log:\n%s", id, run.Status, run.FailureReason, by.id, by.log())
	}
	return run
}

// Two replicas hold the same scheduled pipeline (nanohost.yaml schedules:,
// due once, shortly after both are up): at its due time both look, one
// claims the fire and is SIGKILLed right after claiming, before it could
// record a run. The other takes the fire over once the claim expires:
// exactly one run results, with the task's inputs; it succeeds and is told
// once in Slack; the fire is recorded once, by the survivor.
func TestScheduleFiresOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, map[string]any{"default": map[string]any{"response": "done [outcome:success]"}},
		map[string]string{"nightly": pipelineOnce})
	// Long enough for both replicas to start and the table to be locked
	// before it is due (checked below).
	due := time.Now().UTC().Add(45 * time.Second).Truncate(time.Second)
	rs.extra = fmt.Sprintf(`timezone: UTC
schedules:
  - {name: nightly, group: main, when: "at %s", pipeline: nightly, inputs: {env: prod}}
`, due.Format("2006-01-02 15:04:05"))
	rs.start("replica-a")
	rs.start("replica-b")
	db, release := rs.lockRuns(t)
	if left := time.Until(due); left < time.Second {
		t.Fatalf("the replicas took until %s past the fire's due time to start: the test could not hold the claimant", -left)
	}

	var claimant *replica
	testkit.WaitUntil(t, time.Until(due)+60*time.Second, "a replica claims the fire when it is due", func() bool {
		owner, _ := leaseHolder(db, "fire", "config-nightly@")
		claimant = rs.started[owner]
		return claimant != nil
	})
	claimant.kill(t)
	survivor := rs.other(claimant)
	if n := countRows(t, db, `SELECT count(*) FROM runs`); n != 0 {
		t.Fatalf("%d runs exist after the claimant died right after claiming; the test needs it to die before recording one", n)
	}
	release()

	var owner, status, runID string
	testkit.WaitUntil(t, 60*time.Second, survivor.id+" takes the fire over and records it", func() bool {
		err := db.QueryRow(`SELECT owner, status, run_id FROM schedule_fires WHERE schedule_id = 'config-nightly'`).Scan(&owner, &status, &runID)
		return err == nil
	})
	if owner != survivor.id || status != "ok" || runID == "" {
		t.Fatalf("the fire is recorded by %q as %q with run %q; want %s, ok, a run\n%s's log:\n%s", owner, status, runID, survivor.id, survivor.id, survivor.log())
	}
	run := rs.waitRunSucceeded(t, runID, survivor)
	if got := run.Inputs["env"]; got != "prod" {
		t.Errorf("the run's input env = %q, want the task's prod", got)
	}
	if n := countRows(t, db, `SELECT count(*) FROM runs`); n != 1 {
		t.Errorf("%d runs for one fire, want exactly 1", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM schedule_fires`); n != 1 {
		t.Errorf("%d fires recorded, want 1", n)
	}
	var taskStatus string
	if err := db.QueryRow(`SELECT status FROM schedules WHERE id = 'config-nightly'`).Scan(&taskStatus); err != nil || taskStatus != "completed" {
		t.Errorf("the once task is %q (%v) after its fire, want completed", taskStatus, err)
	}
	var cards int
	for _, m := range rs.fake.TopLevel(opsChat) {
		if m.FromBot() {
			cards++
		}
	}
	if cards != 1 {
		t.Errorf("%d status cards in the channel, want one for the one run", cards)
	}
	if story := threadText(rs.fake, run.ThreadTS); strings.Count(story, "Pipeline complete") != 1 {
		t.Errorf("the run is told complete %d times in its thread, want once:\n%s", strings.Count(story, "Pipeline complete"), story)
	}
}

// hookSecretE2E signs the replicas' webhook deliveries.
const hookSecretE2E = "e2e-hook-secret-0123456789"

// deliverTo posts a delivery to replica r's /hooks/push: its status and
// answer, or err when the replica died with the request.
func deliverTo(r *replica, body []byte, headers map[string]string) (int, map[string]any, error) {
	req, err := http.NewRequest(http.MethodPost, "http://"+r.addr+"/hooks/push", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	c := http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("answer is not JSON: %s", data)
	}
	return resp.StatusCode, out, nil
}

// A signed webhook delivery reaches replica A, which claims it, records it
// as starting and is SIGKILLed right there, before its run is recorded; the
// sender gets no answer. Replica B finishes the delivery by itself once A's
// claim expires — exactly one run, with the payload's input — and a
// redelivery to B starts nothing and answers with that run. Forged
// deliveries (a bad signature, a replayed old one, an oversized body) are
// refused, saying why, and start nothing.
func TestWebhookDeliveryOnceAcrossReplicas(t *testing.T) {
	t.Parallel()
	rs := newReplicas(t, map[string]any{"default": map[string]any{"response": "done [outcome:success]"}},
		map[string]string{"deploy": pipelineOnce})
	rs.extra = fmt.Sprintf(`webhooks:
  - {name: push, secret: %q, pipeline: deploy, inputs: {env: environment}, max_bytes: 4096}
`, hookSecretE2E)
	a, b := rs.start("replica-a"), rs.start("replica-b")
	body := []byte(`{"environment":"staging","ref":"refs/heads/main"}`)
	signed := map[string]string{"X-Hub-Signature-256": hooks.Sign([]byte(hookSecretE2E), body), "X-GitHub-Delivery": "delivery-1"}

	db, release := rs.lockRuns(t)
	type answer struct {
		status int
		err    error
	}
	first := make(chan answer, 1)
	go func() {
		status, _, err := deliverTo(a, body, signed)
		first <- answer{status, err}
	}()
	testkit.WaitUntil(t, 60*time.Second, "A claims the delivery and records it as starting", func() bool {
		owner, _ := leaseHolder(db, "hook", "push/delivery-1")
		return owner == a.id && countRows(t, db, `SELECT count(*) FROM hook_deliveries WHERE status = 'starting'`) == 1
	})
	a.kill(t)
	if got := <-first; got.err == nil {
		t.Fatalf("the delivery to A was answered %d though A died starting it", got.status)
	}
	if n := countRows(t, db, `SELECT count(*) FROM runs`); n != 0 {
		t.Fatalf("%d runs exist after A died right after claiming; the test needs it to die before recording one", n)
	}
	release()

	// Nobody delivers it again: B finishes it by itself.
	var status, runID string
	testkit.WaitUntil(t, 60*time.Second, "B finishes the delivery A left starting", func() bool {
		err := db.QueryRow(`SELECT status, run_id FROM hook_deliveries WHERE hook = 'push' AND delivery_id = 'delivery-1'`).Scan(&status, &runID)
		return err == nil && status != "starting"
	})
	if status != "started" || runID == "" {
		t.Fatalf("the delivery is %q with run %q, want started with a run\nB's log:\n%s", status, runID, b.log())
	}
	run := rs.waitRunSucceeded(t, runID, b)
	if got := run.Inputs["env"]; got != "staging" {
		t.Errorf("the run's input env = %q, want the payload's staging", got)
	}

	// The sender delivers it again (it never got an answer): nothing new.
	code, out, err := deliverTo(b, body, signed)
	if err != nil || code != http.StatusOK || out["run_id"] != runID || out["redelivery"] != true {
		t.Errorf("a redelivery to B: %d %v (%v); want 200 naming run %s as a redelivery", code, out, err, runID)
	}

	// Forged deliveries start nothing, and say why.
	old := time.Now().Add(-10 * time.Minute)
	big := []byte(`{"environment":"` + strings.Repeat("x", 5000) + `"}`)
	for name, c := range map[string]struct {
		body    []byte
		headers map[string]string
		status  int
		says    string
	}{
		"bad signature": {body, map[string]string{"X-Hub-Signature-256": hooks.Sign([]byte("not-the-secret-0123456789"), body), "X-GitHub-Delivery": "forged-1"},
			http.StatusUnauthorized, "does not match"},
		"replayed": {body, map[string]string{"X-Nanohost-Signature": hooks.SignAt([]byte(hookSecretE2E), body, old), "X-Nanohost-Delivery": "forged-2"},
			http.StatusUnauthorized, "off the host's clock"},
		"oversized": {big, map[string]string{"X-Hub-Signature-256": hooks.Sign([]byte(hookSecretE2E), big), "X-GitHub-Delivery": "forged-3"},
			http.StatusRequestEntityTooLarge, "larger than 4096 bytes"},
		"unsigned": {body, map[string]string{"X-GitHub-Delivery": "forged-4"}, http.StatusUnauthorized, "not signed"},
	} {
		code, out, err := deliverTo(b, c.body, c.headers)
		if err != nil || code != c.status || !strings.Contains(fmt.Sprint(out["error"]), c.says) {
			t.Errorf("%s: %d %v (%v); want %d saying %q", name, code, out, err, c.status, c.says)
		}
	}
	if n := countRows(t, db, `SELECT count(*) FROM runs`); n != 1 {
		t.Errorf("%d runs, want exactly the one of the delivery", n)
	}
	if n := countRows(t, db, `SELECT count(*) FROM hook_deliveries`); n != 1 {
		t.Errorf("%d deliveries recorded, want the one (forgeries are refused before they are recorded)", n)
	}
}
