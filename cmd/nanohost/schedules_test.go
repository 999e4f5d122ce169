package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nanohost/internal/schedule"
	"nanohost/internal/store"
)

// nanohost schedules list reads the tasks from the host's database, with
// when each fires next in the configured zone and its last result.
func TestSchedulesListShowsEveryTask(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nanohost.yaml"), []byte("timezone: Europe/Berlin\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(context.Background(), dbOf(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []schedule.Task{
		{ID: "task-aaa", Group: "main", Chat: "console", Prompt: "summarise the incidents", Type: schedule.Cron, Value: "0 9 * * 1-5",
			Status: schedule.Active, NextRun: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), LastError: "the agent could not answer"},
		{ID: "task-bbb", Group: "main", Chat: "console", Pipeline: "deploy", Inputs: map[string]string{"ref": "main"}, Type: schedule.Interval,
			Value: "1h", Status: schedule.Paused, NextRun: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)},
	} {
		if err := st.CreateTask(context.Background(), task); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	res := runNanohostIn(t, dir, "schedules", "list")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	for _, want := range []string{"task-aaa", `"summarise the incidents"`, "cron 0 9 * * 1-5", "Tue 1 Dec 09:00 Europe/Berlin", "error: the agent could not answer",
		"task-bbb", "pipeline deploy ref=main", "paused"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("schedules list lacks %q:\n%s", want, res.stdout)
		}
	}
}
