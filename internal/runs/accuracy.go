package runs

import (
	"context"
	"sync"

	"nanohost/internal/pipeline/engine"
)

// accuracyRuns is how many of a group's latest runs a persona's accuracy
// is measured over.
const accuracyRuns = 50

// personaAccuracy measures, for Iron's traits (docs/personas.md), how often
// each persona's stage visits in the group's latest runs ended in success:
// successes over finished visits, from the stored StageCompleted and
// StageFailed events that name the persona (a failed attempt that was
// retried is not a finished visit). The run itself (excluded) is not
// counted. It reads the store only when first asked — only a node of the
// element iron asks — and once per run. A persona with no recorded visit
// has no accuracy (false).
func (ex *executor) personaAccuracy(ctx context.Context, group, excluded string) func(string) (float64, bool) {
	var (
		once    sync.Once
		success map[string]int
		total   map[string]int
	)
	measure := func() {
		success, total = map[string]int{}, map[string]int{}
		page, err := ex.store.ListRuns(ctx, Filter{Group: group, Limit: accuracyRuns})
		if err != nil {
			ex.log.Warn("read the group's runs for persona accuracy", "group", group, "err", err)
			return
		}
		for _, r := range page.Runs {
			if r.ID == excluded {
				continue
			}
			events, err := ex.store.Events(ctx, r.ID, 0, 0)
			if err != nil {
				ex.log.Warn("read a run's events for persona accuracy", "run", r.ID, "err", err)
				continue
			}
			for _, e := range events {
				if e.Persona == "" || e.WillRetry {
					continue
				}
				switch e.Type {
				case engine.EventStageCompleted:
					total[e.Persona]++
					if e.Status.IsSuccess() {
						success[e.Persona]++
					}
				case engine.EventStageFailed:
					total[e.Persona]++
				}
			}
		}
	}
	return func(persona string) (float64, bool) {
		once.Do(measure)
		if total[persona] == 0 {
			return 0, false
		}
		return float64(success[persona]) / float64(total[persona]), true
	}
}
