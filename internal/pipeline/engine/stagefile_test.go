package engine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"nanohost/internal/pipeline/engine"
)

// secretFile stands for a file the agent must not get the host to read or
// overwrite (/etc/shadow, ~/.bashrc).
func secretFile(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	const content = `{"outcome":"success","context_updates":{"stolen":"the host's secret"}}`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, content
}

func TestPlantedStatusSymlinkIsNeitherFollowedNorWrittenThrough(t *testing.T) {
	secret, content := secretFile(t)
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "work" { // the agent plants a link while it runs
			if err := os.Symlink(secret, filepath.Join(req.StageDir, "status.json")); err != nil {
				t.Error(err)
			}
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	})
	out := runGraph(t, oneStageDOT, runOpts{backend: be})
	// The link is not read: the stage fails saying why, and takes the fail edge.
	wantPath(t, out.res, "start", "work", "bad", "exit")
	if _, stolen := out.res.Context["stolen"]; stolen {
		t.Fatal("the engine read the secret through the planted status.json link")
	}
	failed := out.rec.ofType(engine.EventStageFailed)
	if len(failed) != 1 || !strings.Contains(failed[0].Message, "symbolic link") {
		t.Fatalf("StageFailed events = %+v, want one saying the status.json is a symbolic link", failed)
	}
	// The engine's own status.json replaced the link instead of writing through it.
	if got := readFile(t, secret); got != content {
		t.Fatalf("the secret was overwritten through the link: %q", got)
	}
	statusPath := filepath.Join(out.root, "work", "status.json")
	if fi, err := os.Lstat(statusPath); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("work/status.json is %v (%v), want the engine's regular file", fi.Mode(), err)
	}
	if !strings.Contains(readFile(t, statusPath), `"outcome": "fail"`) {
		t.Fatalf("work/status.json = %s", readFile(t, statusPath))
	}
}

func TestPlantedStatusFIFOFailsTheStageInsteadOfBlocking(t *testing.T) {
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "work" {
			if err := syscall.Mkfifo(filepath.Join(req.StageDir, "status.json"), 0o644); err != nil {
				t.Error(err)
			}
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	})
	// runGraph's 30 s context would end a run that blocks on the FIFO as cancelled.
	out := runGraph(t, oneStageDOT, runOpts{backend: be})
	wantPath(t, out.res, "start", "work", "bad", "exit")
	failed := out.rec.ofType(engine.EventStageFailed)
	if len(failed) != 1 || !strings.Contains(failed[0].Message, "not a regular file") {
		t.Fatalf("StageFailed events = %+v, want one saying status.json is not a regular file", failed)
	}
	if fi, err := os.Lstat(filepath.Join(out.root, "work", "status.json")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("work/status.json is %v (%v), want the engine's regular file in place of the FIFO", fi.Mode(), err)
	}
}

func TestPlantedArtifactLinksAreReplacedNotWrittenThrough(t *testing.T) {
	secret, content := secretFile(t)
	// The agent plants links where the engine writes next: response.md after
	// this call, prompt.md on the retry.
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID != "work" {
			return engine.Result{Text: "[outcome:success]"}, nil
		}
		if req.Attempt == 1 {
			for _, name := range []string{"prompt.md", "response.md"} {
				os.Remove(filepath.Join(req.StageDir, name))
				if err := os.Symlink(secret, filepath.Join(req.StageDir, name)); err != nil {
					t.Error(err)
				}
			}
			return engine.Result{Text: "again [outcome:retry]"}, nil
		}
		return engine.Result{Text: "done [outcome:success]"}, nil
	})
	out := runGraph(t, oneStageDOT, runOpts{backend: be})
	wantPath(t, out.res, "start", "work", "good", "exit")
	if got := readFile(t, secret); got != content {
		t.Fatalf("an artifact was written through a planted link into the secret: %q", got)
	}
	for _, name := range []string{"prompt.md", "response.md", "status.json"} {
		fi, err := os.Lstat(filepath.Join(out.root, "work", name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("work/%s is %v (%v), want a regular file", name, fi.Mode(), err)
		}
	}
	if got := readFile(t, filepath.Join(out.root, "work", "response.md")); got != "done" {
		t.Fatalf("response.md = %q", got)
	}
}

func TestHardLinkedStatusFileIsReplacedNotWrittenThrough(t *testing.T) {
	target, content := secretFile(t)
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "work" {
			if err := os.Link(target, filepath.Join(req.StageDir, "status.json")); err != nil {
				t.Error(err)
			}
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, oneStageDOT, runOpts{backend: be})
	// A hard link is a regular file: its content is the agent's to give
	// (it could have written it), but the engine's write must not reach the target.
	wantStatus(t, out.res, "success")
	if got := readFile(t, target); got != content {
		t.Fatalf("the engine wrote its status.json through a hard link: %q", got)
	}
}

func TestStageDirectoryReplacedByASymlinkIsRefused(t *testing.T) {
	elsewhere := t.TempDir()
	src := `digraph Twice {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [prompt="w"]
		other [prompt="o"]
		check [shape=diamond]
		start -> work -> other -> check
		check -> work [condition="context.internal.visit_count.work=1"]
		check -> exit [condition="context.internal.visit_count.work!=1"]
	}`
	be := backendFunc(func(_ context.Context, req engine.Request) (engine.Result, error) {
		if req.NodeID == "other" { // swap work's stage directory for a link before its next visit
			work := filepath.Join(filepath.Dir(req.StageDir), "work")
			if err := os.Rename(work, filepath.Join(elsewhere, "moved")); err != nil {
				t.Error(err)
			}
			if err := os.Symlink(elsewhere, work); err != nil {
				t.Error(err)
			}
		}
		return engine.Result{Text: "[outcome:success]"}, nil
	})
	out := runGraph(t, src, runOpts{backend: be})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "work", "symbolic link")
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 1 {
		t.Fatalf("the engine wrote into the linked directory: %v", entries)
	}
}
