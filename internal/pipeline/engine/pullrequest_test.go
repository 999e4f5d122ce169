package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/pipeline/script"
)

// prDOT asks whether to open a pull request after a stage, opens it on
// Yes and has a later stage name it.
const prDOT = `digraph PR {
    start   [shape=Mdiamond]
    work    [prompt="Change the code"]
    ask     [shape=hexagon, label="Open a pull request?"]
    open_pr [type="pull_request", label="Open PR"]
    announce [prompt="Tell the team about ${pull_request.url} (#${pull_request.number})"]
    exit    [shape=Msquare]
    start -> work -> ask
    ask -> open_pr [label="[Y] Yes"]
    ask -> exit    [label="[N] No"]
    open_pr -> announce -> exit
}`

// prBackend is a backend that opens pull requests: its answers in turn
// (an error, or the pull request), and what it was asked to conclude.
type prBackend struct {
	engine.Backend
	mu        sync.Mutex
	errs      []error // returned first, one per call
	calls     int
	concluded []engine.Conclusion
}

func (b *prBackend) OpenPullRequest(_ context.Context, runID, runDir string) (engine.PullRequest, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if runID == "" || runDir == "" {
		return engine.PullRequest{}, errors.New("no run id or directory")
	}
	if len(b.errs) > 0 {
		err := b.errs[0]
		b.errs = b.errs[1:]
		return engine.PullRequest{}, err
	}
	return engine.PullRequest{Number: 7, URL: "https://github.example/acme/app/pull/7"}, nil
}

func (b *prBackend) Conclude(_ context.Context, c engine.Conclusion) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.concluded = append(b.concluded, c)
	return nil
}

// A pull_request node in a run whose backend opens no pull requests (the
// script and simulation backends, `nanohost pipeline run`) fails, saying
// who opens them; lint knows the type.
func TestPullRequestNodeFailsWhereNoHostOpensThem(t *testing.T) {
	src := `digraph PR {
    start   [shape=Mdiamond]
    open_pr [type="pull_request"]
    exit    [shape=Msquare]
    start -> open_pr -> exit
}`
	_, diags, err := frontend.Prepare("pr.dot", []byte(src), frontend.Options{KnownTypes: engine.BuiltinTypes()})
	if err != nil || len(diags) != 0 {
		t.Fatalf("lint says %v %v about a pull_request node, want nothing", diags, err)
	}
	out := runGraph(t, src, runOpts{backend: &script.Script{}})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "open_pr", "pull requests are opened by a nanohost host", "push: true and pull_request:")
	if n := len(out.rec.ofType(engine.EventPullRequestOpened)); n != 0 {
		t.Errorf("%d pull requests told as opened", n)
	}
}

// Yes opens the pull request: the node succeeds, its page and number are
// in the context for a later stage's prompt, the event carries them, and
// the end-of-run conclusion is told the pipeline decided. A network that
// failed is retried; a refusal fails the node with what was refused.
func TestPullRequestNodeOpensItAndLaterStagesSeeIt(t *testing.T) {
	answer := func(label string) engine.Interviewer {
		return engine.InterviewerFunc(func(_ context.Context, q engine.Question) (engine.Answer, error) {
			for _, o := range q.Options {
				if o.Label == label {
					return engine.Answer{Value: o.Key}, nil
				}
			}
			return engine.Answer{}, errors.New("no option " + label)
		})
	}
	rec := &recordingBackend{inner: &script.Script{}}
	be := &prBackend{Backend: rec, errs: []error{engine.Transient(errors.New("dial tcp: connection refused"))}}
	out := runGraph(t, prDOT, runOpts{backend: be, interviewer: answer("[Y] Yes")})
	wantStatus(t, out.res, "success")
	wantPath(t, out.res, "start", "work", "ask", "open_pr", "announce", "exit")
	if be.calls != 2 {
		t.Errorf("OpenPullRequest called %d times, want 2 (the transient failure retried)", be.calls)
	}
	reqs := rec.requests("announce")
	if len(reqs) != 1 || !strings.Contains(reqs[0].Prompt, "Tell the team about https://github.example/acme/app/pull/7 (#7)") {
		t.Fatalf("the later stage's prompt: %+v", reqs)
	}
	opened := out.rec.ofType(engine.EventPullRequestOpened)
	if len(opened) != 1 || opened[0].NodeID != "open_pr" || opened[0].Data[engine.DataPullRequestURL] != "https://github.example/acme/app/pull/7" || opened[0].Data[engine.DataPullRequestNumber] != 7 {
		t.Fatalf("PullRequestOpened events: %+v", opened)
	}
	if len(be.concluded) != 1 || !be.concluded[0].PipelineOpensPullRequests || be.concluded[0].RunID != "run-test" {
		t.Errorf("concluded %+v, want once, told the pipeline opens its pull requests", be.concluded)
	}

	// No: no pull request; the conclusion is still told the pipeline decided.
	be = &prBackend{Backend: &script.Script{}}
	out = runGraph(t, prDOT, runOpts{backend: be, interviewer: answer("[N] No")})
	wantPath(t, out.res, "start", "work", "ask", "exit")
	if be.calls != 0 || len(be.concluded) != 1 || !be.concluded[0].PipelineOpensPullRequests {
		t.Errorf("No: %d pull requests asked for, concluded %+v", be.calls, be.concluded)
	}

	// GitHub refuses: the node fails with its words, not retried.
	be = &prBackend{Backend: &script.Script{}, errs: []error{errors.New("GitHub refused the pull request (HTTP 422): Validation Failed: A pull request already exists for acme:x.")}}
	out = runGraph(t, prDOT, runOpts{backend: be, interviewer: answer("[Y] Yes")})
	wantStatus(t, out.res, "fail")
	wantReasonContains(t, out.res, "GitHub refused the pull request (HTTP 422): Validation Failed")
	if be.calls != 1 {
		t.Errorf("a refusal was asked %d times, want once", be.calls)
	}

	// A pipeline without the node leaves pull requests to the host.
	be = &prBackend{Backend: &script.Script{}}
	runGraph(t, `digraph P { start [shape=Mdiamond]; work [prompt="x"]; exit [shape=Msquare]; start -> work -> exit }`, runOpts{backend: be})
	if len(be.concluded) != 1 || be.concluded[0].PipelineOpensPullRequests {
		t.Errorf("without a pull_request node: concluded %+v", be.concluded)
	}
}

// The type is a built-in one, known to lint and resolved by the registry.
func TestPullRequestIsABuiltinType(t *testing.T) {
	if !slices.Contains(engine.BuiltinTypes(), engine.TypePullRequest) {
		t.Fatalf("built-in types %v lack %s", engine.BuiltinTypes(), engine.TypePullRequest)
	}
	n := &pipeline.Node{ID: "open_pr", Attrs: pipeline.Attrs{"type": "pull_request"}}
	if _, typ := engine.NewRegistry().Resolve(n); typ != engine.TypePullRequest {
		t.Errorf("resolved as %q", typ)
	}
}
