package runs_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"nanohost/internal/channels/console"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/script"
	"nanohost/internal/runs"
	"nanohost/internal/store/storetest"
)

// promptRuntime answers every node from a script and keeps each prompt.
type promptRuntime struct {
	s       *script.Script
	mu      sync.Mutex
	prompts map[string]string
}

func (p *promptRuntime) ForRun(context.Context, runs.Run) (runs.RunBackend, error) {
	return promptRun{p}, nil
}

type promptRun struct{ p *promptRuntime }

func (r promptRun) Run(ctx context.Context, req engine.Request) (engine.Result, error) {
	r.p.mu.Lock()
	r.p.prompts[req.NodeID] = req.Prompt
	r.p.mu.Unlock()
	return r.p.s.Run(ctx, req)
}

func (promptRun) Close() {}

func (p *promptRuntime) prompt(node string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prompts[node]
}

// TestIronIsTunedByThePersonasRecordedOutcomes: a node of the element iron
// is Earth re-tuned by the accuracy of its persona in the group's recorded
// runs — the Sentinel's visits succeeded twice and failed once (2/3), so
// Iron allows max(0, 1-floor(1.33)) = 0 retries and converges at
// 0.70+(1/3)*0.1 = 0.7333; with nothing recorded it is the seed's 0.80
// (0.72), and another group's record is not this group's.
func TestIronIsTunedByThePersonasRecordedOutcomes(t *testing.T) {
	st := openStore(t, storetest.URL(t, t.TempDir()))
	rt := &promptRuntime{s: &script.Script{Nodes: map[string][]script.Response{"bad": {script.Text("no [outcome:fail]")}}}, prompts: map[string]string{}}
	service := newService(t, st, serviceOptions{runtime: rt, poll: 50 * time.Millisecond})
	f := &fixture{t: t, st: st, service: service}
	start := func(group, dot string) runs.Run {
		run, _, err := service.Start(context.Background(), runs.StartRequest{Group: group, Chat: console.Chat, Source: []byte(dot)}, chat)
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	const iron = `digraph Iron {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		work [persona=sentinel, element=iron, prompt="weigh it"]
		start -> work -> exit
	}`
	f.waitState(start("main", iron).ID, runs.Succeeded)
	if p := rt.prompt("work"); !strings.Contains(p, "converged when your confidence (0 to 1) is 0.72 or more") || !strings.Contains(p, "retried at most 0 times") {
		t.Errorf("with nothing recorded, Iron is not derived at 0.80:\n%s", p)
	}
	f.waitState(start("main", `digraph Prior {
		start [shape=Mdiamond]
		exit [shape=Msquare]
		good [persona=sentinel, prompt="good"]
		bad [persona=sentinel, prompt="bad"]
		start -> good -> bad -> exit
	}`).ID, runs.Failed)
	// The first Iron run's visit succeeded too: 2 of 3.
	f.waitState(start("main", iron).ID, runs.Succeeded)
	if p := rt.prompt("work"); !strings.Contains(p, "converged when your confidence (0 to 1) is 0.7333 or more") || !strings.Contains(p, "retried at most 0 times") {
		t.Errorf("Iron is not derived from the sentinel's recorded 2/3:\n%s", p)
	}
	// Another group's record is its own.
	f.waitState(start("other", iron).ID, runs.Succeeded)
	if p := rt.prompt("work"); !strings.Contains(p, "is 0.72 or more") {
		t.Errorf("another group's Iron reads this group's record:\n%s", p)
	}
}
