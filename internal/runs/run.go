package runs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Run is one pipeline execution, as recorded in the store.
type Run struct {
	ID          string `json:"id"`
	GroupFolder string `json:"group"`
	ChatID      string `json:"chat"`
	// ThreadTS is the root message of the run's chat thread ("" until posted).
	ThreadTS  string    `json:"thread_ts,omitempty"`
	Verbosity Verbosity `json:"verbosity"`
	// SourceDOT is the pipeline as submitted. Listing leaves it empty.
	SourceDOT     string       `json:"source_dot,omitempty"`
	FileName      string       `json:"file_name,omitempty"`
	Goal          string       `json:"goal,omitempty"`
	Status        State        `json:"status"`
	FailureReason string       `json:"failure_reason,omitempty"`
	CreatedAt     time.Time    `json:"created_at"`
	StartedAt     time.Time    `json:"started_at,omitzero"`
	FinishedAt    time.Time    `json:"finished_at,omitzero"`
	LogsRoot      string       `json:"logs_root,omitempty"`
	Usage         engine.Usage `json:"usage"`
	// StartedBy is who started it (Principal.User: a Slack user id,
	// "console", "web:<name>", "agent:<group>").
	StartedBy string `json:"started_by,omitempty"`
	// Inputs are the values it was started with (input.<key> in its
	// context).
	Inputs Inputs `json:"inputs,omitempty"`
	// Parent is the run whose sub-pipeline node ParentNode runs this one as
	// its child ("" for a run started on its own).
	Parent     string `json:"parent,omitempty"`
	ParentNode string `json:"parent_node,omitempty"`
	// LastSeq is the highest stored event seq; LastDeliveredSeq the highest
	// delivered to the chat. Events in between are still to be sent.
	LastSeq          int64 `json:"last_seq"`
	LastDeliveredSeq int64 `json:"last_delivered_seq"`
	// Owner is the replica driving the run now, by its live lease in a
	// store replicas share ("" on SQLite, or when no replica drives it).
	// Listing and GetRun fill it.
	Owner string `json:"owner,omitempty"`
}

// Duration is how long the run has taken: until it finished, or until now.
func (r Run) Duration(now time.Time) time.Duration {
	switch {
	case r.StartedAt.IsZero():
		return 0
	case r.FinishedAt.IsZero():
		return now.Sub(r.StartedAt)
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// Filter selects runs for listing. Zero fields do not filter.
type Filter struct {
	Statuses []State
	Group    string
	Chat     string
	// Parent selects the child runs of a run.
	Parent string
	// Ref selects by id as a person types it (see Service.Find): the
	// runs whose id starts with it, or whose short id does.
	Ref string
	// Limit caps the page (default 50, at most 1000).
	Limit int
	// Cursor continues after the page that returned it (Page.Next).
	Cursor string
}

// Page is one page of runs, newest first.
type Page struct {
	Runs []Run `json:"runs"`
	// Next is the cursor of the following page; "" on the last page.
	Next string `json:"next,omitempty"`
}

// ShortID is a run's id as people read and type it: the random part of
// "pipeline-<seconds>-<hex>" ("3f9a1c"), else the whole id. Chat and the
// console show it; Service.Find takes it (or any unique prefix of it).
func ShortID(id string) string {
	i := strings.LastIndexByte(id, '-')
	if !strings.HasPrefix(id, "pipeline-") || i < len("pipeline-") || i == len(id)-1 {
		return id
	}
	return id[i+1:]
}

// RunFinder is the part of a Store that Find reads.
type RunFinder interface {
	GetRun(ctx context.Context, id string) (Run, error)
	ListRuns(ctx context.Context, f Filter) (Page, error)
}

// findLimit bounds the runs a reference is checked against: more than a
// handful matching is as ambiguous as two.
const findLimit = 6

// Find is the run a person means by ref — its id, its short id (ShortID),
// or a prefix of either that only one run has — among the runs f selects
// (a group's, say). Chat, the CLI and the service all name runs so. Its
// refusals wrap ErrNoSuchRun, or ErrAmbiguousRun naming the runs that
// match.
func Find(ctx context.Context, st RunFinder, ref string, f Filter) (Run, error) {
	ref = strings.ToLower(strings.TrimSpace(ref))
	if ref == "" {
		return Run{}, fmt.Errorf("%w: no run id given", ErrNoSuchRun)
	}
	f.Ref, f.Limit, f.Cursor = ref, findLimit, ""
	page, err := st.ListRuns(ctx, f)
	if err != nil {
		return Run{}, fmt.Errorf("find run %s: %w", ref, err)
	}
	switch len(page.Runs) {
	case 0:
		return Run{}, fmt.Errorf("%w %s", ErrNoSuchRun, ref)
	case 1:
		return st.GetRun(ctx, page.Runs[0].ID)
	}
	var ids []string
	for _, r := range page.Runs {
		if r.ID == ref || ShortID(r.ID) == ref {
			return st.GetRun(ctx, r.ID) // a whole id wins over longer ones it starts
		}
		ids = append(ids, ShortID(r.ID))
	}
	if page.Next != "" {
		ids = append(ids, "…")
	}
	return Run{}, fmt.Errorf("%w %s: %s — type more of the id", ErrAmbiguousRun, ref, strings.Join(ids, ", "))
}
