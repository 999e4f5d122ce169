package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"nanohost/internal/channels"
	"nanohost/internal/config"
	"nanohost/internal/pipeline"
	"nanohost/internal/pipeline/engine"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// chatCommands runs the /pipeline commands people type in a chat through
// the runs service: a small type with only what the commands need.
type chatCommands struct {
	runs      *runs.Service
	groups    *groupIndex
	registrar *groupRegistrar // /register
	workflows workflows
	frontEnd  frontEnd
	tasks     *tasks                    // /schedule
	runURL    func(runID string) string // "" without a dashboard
	log       *slog.Logger
}

// handle executes a /pipeline command through the runs service; a
// refusal comes back as an error and is shown to the person who typed it.
func (h chatCommands) handle(ctx context.Context, ch channels.Channel, in channels.Inbound) {
	cmd := *in.Command
	log := h.log.With("channel", ch.Name(), "chat", in.Chat, "user", in.User, "command", cmd.Kind)
	reply := func(text string) {
		if _, err := ch.Post(ctx, in.Chat, in.Thread, channels.Message{Text: text}); err != nil {
			log.Warn("reply to command", "err", err)
		}
	}
	private := func(text string) { tell(ctx, ch, in, text, log) }
	g, ok := h.groups.byChatID(in.Chat)
	if !ok {
		private(runlog.NotRegistered(in.Chat))
		return
	}
	switch cmd.Kind {
	case channels.CmdHelp:
		private(runlog.PipelineHelp)
	case channels.CmdRunDOT, channels.CmdRunNamed:
		h.commandRun(ctx, ch, in, g, cmd, private)
	case channels.CmdSchedule:
		h.tasks.command(ctx, in, g, *cmd.Schedule, reply, private)
	case channels.CmdValidate:
		opts, err := h.frontEnd.options(g.Folder, "")
		if err != nil {
			private(runlog.Refused(err.Error()))
			return
		}
		_, diags, _ := frontend.Prepare("pipeline.dot", []byte(cmd.DOT), opts)
		reply(channels.FormatDiagnostics("pipeline.dot", diags))
	case channels.CmdList:
		reply(h.listText(ctx, g))
	case channels.CmdStatus:
		reply(h.statusText(ctx, ch, g, cmd.RunID))
	case channels.CmdAnswer:
		h.commandAnswer(ctx, ch, in, g, cmd, private)
	case channels.CmdCancel:
		if run, err := h.findRun(ctx, g, cmd.RunID); err != nil {
			private(runlog.Refused(err.Error()))
		} else if err := h.runs.Cancel(ctx, run.ID, in.Who()); err != nil {
			log.Info("cancel refused", "run", run.ID, "reason", err)
			private(runlog.Refused(err.Error()))
		}
		// The run's own thread says it was cancelled, and by whom: one line.
	case channels.CmdResume:
		if run, err := h.findRun(ctx, g, cmd.RunID); err != nil {
			private(runlog.Refused(err.Error()))
		} else if err := h.runs.Resume(ctx, run.ID, in.Who()); err != nil {
			log.Info("resume refused", "run", run.ID, "reason", err)
			private(runlog.Refused(err.Error()))
		} else {
			reply(runlog.Resuming(run.ID, h.runURL(run.ID)))
		}
	}
}

func (h chatCommands) commandRun(ctx context.Context, ch channels.Channel, in channels.Inbound, g store.Group, cmd channels.Command, private func(string)) {
	src, file := []byte(cmd.DOT), "pipeline.dot"
	if cmd.Kind == channels.CmdRunNamed {
		path, err := h.workflows.find(g.Folder, cmd.Name)
		if err != nil {
			private(runlog.Refused(err.Error()))
			return
		}
		if src, err = os.ReadFile(path); err != nil {
			private(runlog.Refused("read " + path + ": " + err.Error()))
			return
		}
		file = filepath.Base(path)
	}
	run, diags, err := h.runs.Start(ctx, runs.StartRequest{
		Group: g.Folder, Chat: in.Chat, File: file, Source: src, Goal: cmd.Goal, Verbosity: cmd.Verbosity,
		Inputs: cmd.Inputs,
	}, in.Who())
	var invalid *runs.InvalidError
	switch {
	case errors.As(err, &invalid) && invalid.Strict:
		private(channels.FormatDiagnostics(file, diags) + "\n" + runlog.StrictRefusal())
	case errors.As(err, &invalid):
		private(channels.FormatDiagnostics(file, diags))
	case err != nil:
		private(runlog.Refused("Could not start the pipeline: " + err.Error()))
	default:
		h.log.Info("run started from chat", "run", run.ID, "user", in.User)
		if warned(diags) {
			private(runlog.StartedWithWarnings(run.ID) + "\n" + channels.FormatDiagnostics(run.FileName, diags))
		}
	}
}

// warned reports whether lint found anything to warn about.
func warned(ds []pipeline.Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == pipeline.SeverityWarning {
			return true
		}
	}
	return false
}

// findRun is the run a person names (its id, short id or a unique prefix
// of either) among the group's runs — every run, for the main group.
func (h chatCommands) findRun(ctx context.Context, g store.Group, ref string) (runs.Run, error) {
	f := runs.Filter{Group: g.Folder}
	if g.IsMain {
		f.Group = ""
	}
	run, err := h.runs.Find(ctx, ref, f)
	switch {
	case errors.Is(err, runs.ErrNoSuchRun):
		return run, fmt.Errorf("no run %s here (/pipeline list shows the recent runs)", ref)
	case errors.Is(err, runs.ErrAmbiguousRun):
		return run, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), runs.ErrAmbiguousRun.Error()+" "))
	}
	return run, err
}

// commandAnswer answers the question a run waits on with a choice's key or
// name, or with text when the question takes text.
func (h chatCommands) commandAnswer(ctx context.Context, ch channels.Channel, in channels.Inbound, g store.Group, cmd channels.Command, private func(string)) {
	run, err := h.findRun(ctx, g, cmd.RunID)
	if err != nil {
		private(runlog.Refused(err.Error()))
		return
	}
	st, err := h.runs.Status(ctx, run.ID)
	if err != nil {
		private(runlog.Refused(err.Error()))
		return
	}
	gate, ok := questionFor(st.Gates, cmd.Answer)
	if !ok {
		private(runlog.NotWaiting(run))
		return
	}
	answer := runs.GateAnswer{RunID: gate.RunID, GateID: gate.GateID, Nonce: gate.Nonce}
	if q := gate.Question(); namesChoice(q, cmd.Answer) || !q.AcceptsText() {
		answer.Choice = cmd.Answer
	} else {
		answer.Text = cmd.Answer
	}
	settled, err := h.runs.Answer(ctx, answer, in.Who())
	if err != nil {
		private(runlog.Refused(refusal(ctx, ch, err)))
		return
	}
	private(runlog.Answered(settled))
}

// questionFor is the open gate of a run an answer is for: the one whose
// choices it names, else the newest (a run waits on more than one only
// when parallel branches ask at once).
func questionFor(open []runs.Gate, answer string) (runs.Gate, bool) {
	if len(open) == 0 {
		return runs.Gate{}, false
	}
	for _, g := range open {
		if namesChoice(g.Question(), answer) {
			return g, true
		}
	}
	return open[len(open)-1], true
}

// namesChoice reports whether text names one of q's choices (its key, its
// label or its target), or is a key more than one choice shares.
func namesChoice(q engine.Question, text string) bool {
	if q.KeyShared(text) {
		return true
	}
	i, ok := engine.OptionIndex(q.Options, text)
	return ok && !q.Options[i].Freeform
}

// listText lists the pipelines the group can run and its recent runs.
func (h chatCommands) listText(ctx context.Context, g store.Group) string {
	page, err := h.runs.List(ctx, runs.Filter{Group: g.Folder, Limit: 10})
	return runlog.RunList(h.workflows.list(g.Folder), page.Runs, err)
}

// statusText is a run's state, where it is, and the question it waits on
// with how to answer it; without a run, the list.
func (h chatCommands) statusText(ctx context.Context, ch channels.Channel, g store.Group, ref string) string {
	if ref == "" {
		return h.listText(ctx, g)
	}
	run, err := h.findRun(ctx, g, ref)
	if err != nil {
		return runlog.Refused(err.Error())
	}
	st, err := h.runs.Status(ctx, run.ID)
	if err != nil {
		return runlog.Refused(err.Error())
	}
	return runlog.RunStatus(st, ch.Capabilities().TypedAnswers, h.runURL(st.Run.ID))
}

// register runs "/register <chat> <folder> [trigger]" (channels.ParseRegister)
// typed in the main group's chat; it reports whether in was that command.
func (h chatCommands) register(ctx context.Context, ch channels.Channel, in channels.Inbound, mayRegister func(ctx context.Context, user, chat string) error) bool {
	if !channels.IsRegister(in.Text) {
		return false
	}
	g, ok := h.groups.byChatID(in.Chat)
	reply := func(msg string) {
		if _, err := ch.Post(ctx, in.Chat, replyThread(in), channels.Message{Text: msg}); err != nil {
			h.log.Warn("reply to /register", "err", err)
		}
	}
	if !ok || !g.IsMain {
		reply(runlog.RegisterNotMain)
		return true
	}
	if err := mayRegister(ctx, in.User, in.Chat); err != nil {
		h.log.Info("/register refused", "channel", ch.Name(), "chat", in.Chat, "user", in.User, "reason", err)
		tell(ctx, ch, in, runlog.Refused(err.Error()), h.log)
		return true
	}
	rc, ok := channels.ParseRegister(in.Text)
	if !ok {
		reply(runlog.RegisterUsage)
		return true
	}
	cg := config.Group{Chat: rc.Chat, Folder: rc.Folder, Name: rc.Folder, Trigger: rc.Trigger}
	if !strings.Contains(cg.Chat, ":") && ch.Owns(cg.Chat) {
		cg.Chat = ch.Name() + ":" + cg.Chat
	}
	if !strings.Contains(cg.Chat, ":") {
		reply(runlog.RegisterNotAChannel(cg.Chat))
		return true
	}
	if clash, ok := h.registrar.registerConflict(cg); ok {
		reply(runlog.RegisterConflict(clash))
		return true
	}
	if err := h.registrar.save(ctx, cg, false); err != nil {
		reply(runlog.RegisterFailed(err.Error()))
		return true
	}
	if err := h.registrar.reload(ctx); err != nil {
		reply(runlog.RegisterReloadFailed(err.Error()))
		return true
	}
	h.log.Info("group registered from chat", "folder", cg.Folder, "chat", cg.Chat, "by", in.User)
	reply(runlog.Registered(cg.Folder, cg.Chat))
	return true
}
