package host

import (
	"context"
	"net/http"

	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/dot"
	"nanohost/internal/runs"
	"nanohost/internal/web"
)

// withDashboard serves the dashboard and pipelines API (internal/web) next
// to the operations endpoints: /healthz and /metrics keep their bearer
// check, everything else goes to the dashboard, which does its own
// authentication (bearer token or login cookie, cross-site protection).
func withDashboard(ops, hooks http.Handler, opts web.Options) http.Handler {
	dash, err := web.New(opts)
	if err != nil {
		opts.Logger.Error("dashboard disabled", "err", err)
		return ops
	}
	mux := http.NewServeMux()
	mux.Handle("/healthz", ops)
	mux.Handle("/metrics", ops)
	if hooks != nil {
		// Signed by their senders, not logged in: outside the dashboard's
		// authentication (every hook has a secret; config check refuses
		// one without).
		mux.Handle("POST /hooks/{name}", hooks)
	}
	mux.Handle("/", dash)
	return mux
}

// webRuns is what the dashboard changes runs through (web.Runs, offering
// a web.Notifier and a web.Library): the runs service itself — cancels and
// gate answers go straight to it, with the same rules as chat — and a run
// started from the dashboard goes to the group it names (or the main one).
type webRuns struct {
	*runs.Service
	groups    *groupIndex
	workflows workflows
	tasks     webTasks
}

// Start runs a pipeline — pasted, or stored and named — in a group's
// workspace, reporting to its chat.
func (x webRuns) Start(ctx context.Context, req web.StartRequest) (string, []pipeline.Diagnostic, error) {
	g, err := x.groups.pick(req.Group)
	if err != nil {
		return "", nil, err
	}
	file, src := "pipeline.dot", []byte(req.DOT)
	if req.Pipeline != "" {
		if file, src, err = x.workflows.read(g.Folder, req.Pipeline); err != nil {
			return "", nil, err
		}
	}
	run, diags, err := x.Service.Start(ctx, runs.StartRequest{
		Group: g.Folder, Chat: g.ChatID, File: file, Source: src, Goal: req.Goal,
		Verbosity: runs.Verbosity(req.Verbosity), Inputs: runs.Inputs(req.Inputs),
	}, runs.Principal{Endpoint: endpointWeb, User: req.By})
	if err != nil {
		return "", diags, err
	}
	return run.ID, diags, nil
}

// Offers declares that the dashboard's streams are woken by the runs
// service and its start form lists the groups' stored pipelines.
func (x webRuns) Offers() web.Offers {
	return web.Offers{Notify: x.Service, Library: x, Schedules: x.tasks}
}

// StoredPipelines lists what the group (or the main one) can run by name.
func (x webRuns) StoredPipelines(_ context.Context, group string) ([]web.StoredPipeline, error) {
	g, err := x.groups.pick(group)
	if err != nil {
		return nil, err
	}
	var out []web.StoredPipeline
	for _, name := range x.workflows.list(g.Folder) {
		p := web.StoredPipeline{Name: name}
		if path, err := x.workflows.find(g.Folder, name); err == nil {
			p.From = x.workflows.origin(g.Folder, path)
		}
		if file, src, err := x.workflows.read(g.Folder, name); err == nil {
			if graph, err := dot.Parse(file, src); err == nil {
				p.Inputs = runs.RequiredInputs(graph)
			}
		}
		out = append(out, p)
	}
	return out, nil
}
