package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"nanohost/internal/channels"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
	"nanohost/internal/store"
)

// handleCommand executes a /pipeline command through the runs service; a
// refusal comes back as an error and is shown to the person who typed it.
func (h *Host) handleCommand(ctx context.Context, ch channels.Channel, in channels.Inbound) {
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
		private("This chat is not registered with nanohost; the main group can add it with /register " + in.Chat + " <folder>.")
		return
	}
	switch cmd.Kind {
	case channels.CmdHelp:
		private(channels.HelpText)
	case channels.CmdRunDOT, channels.CmdRunNamed:
		h.commandRun(ctx, ch, in, g, cmd, private)
	case channels.CmdValidate:
		opts, err := h.frontEnd.options(g.Folder, "")
		if err != nil {
			private("✗ " + err.Error())
			return
		}
		_, diags, _ := frontend.Prepare("pipeline.dot", []byte(cmd.DOT), opts)
		reply(channels.FormatDiagnostics("pipeline.dot", diags))
	case channels.CmdList:
		reply(h.listText(ctx, g))
	case channels.CmdStatus:
		reply(h.statusText(ctx, g, cmd.RunID))
	case channels.CmdCancel:
		if err := h.inGroup(ctx, g, cmd.RunID); err != nil {
			private("✗ " + err.Error())
		} else if err := h.runs.Cancel(ctx, cmd.RunID, in.Who()); err != nil {
			log.Info("cancel refused", "run", cmd.RunID, "reason", err)
			private("✗ " + err.Error())
		}
		// The run's own thread says it was cancelled, and by whom: one line.
	case channels.CmdResume:
		if err := h.inGroup(ctx, g, cmd.RunID); err != nil {
			private("✗ " + err.Error())
		} else if err := h.runs.Resume(ctx, cmd.RunID, in.Who()); err != nil {
			log.Info("resume refused", "run", cmd.RunID, "reason", err)
			private("✗ " + err.Error())
		} else {
			reply("Resuming run " + cmd.RunID + " from its checkpoint …")
		}
	}
}

func (h *Host) commandRun(ctx context.Context, ch channels.Channel, in channels.Inbound, g store.Group, cmd channels.Command, private func(string)) {
	src, file := []byte(cmd.DOT), "pipeline.dot"
	if cmd.Kind == channels.CmdRunNamed {
		path, err := h.workflows.find(g.Folder, cmd.Name)
		if err != nil {
			private("✗ " + err.Error())
			return
		}
		if src, err = os.ReadFile(path); err != nil {
			private("✗ read " + path + ": " + err.Error())
			return
		}
		file = filepath.Base(path)
	}
	run, diags, err := h.runs.Start(ctx, runs.StartRequest{
		Group: g.Folder, Chat: in.Chat, File: file, Source: src, Goal: cmd.Goal, Verbosity: cmd.Verbosity,
	}, in.Who())
	var invalid *runs.InvalidError
	switch {
	case errors.As(err, &invalid):
		private(channels.FormatDiagnostics(file, diags))
	case err != nil:
		private("✗ Could not start the pipeline: " + err.Error())
	default:
		h.log.Info("run started from chat", "run", run.ID, "user", in.User)
	}
}

// inGroup refuses a run of another group (the main group may act on all).
func (h *Host) inGroup(ctx context.Context, g store.Group, runID string) error {
	st, err := h.runs.Status(ctx, runID)
	if errors.Is(err, runs.ErrNoSuchRun) {
		return fmt.Errorf("no run %s (see /pipeline list)", runID)
	}
	if err != nil {
		return err
	}
	if st.Run.GroupFolder != g.Folder && !g.IsMain {
		return fmt.Errorf("run %s belongs to another group", runID)
	}
	return nil
}

func (h *Host) listText(ctx context.Context, g store.Group) string {
	page, err := h.runs.List(ctx, runs.Filter{Group: g.Folder, Limit: 10})
	if err != nil {
		return "✗ " + err.Error()
	}
	if len(page.Runs) == 0 {
		return "No runs yet. Start one with /pipeline run <name> or /pipeline <DOT>."
	}
	var b strings.Builder
	b.WriteString("Recent runs:\n")
	for _, r := range page.Runs {
		fmt.Fprintf(&b, "  %s  %-11s %s\n", r.ID, r.Status, r.Goal)
	}
	return strings.TrimRight(b.String(), "\n")
}

func (h *Host) statusText(ctx context.Context, g store.Group, runID string) string {
	if runID == "" {
		return h.listText(ctx, g)
	}
	if err := h.inGroup(ctx, g, runID); err != nil {
		return "✗ " + err.Error()
	}
	st, err := h.runs.Status(ctx, runID)
	if err != nil {
		return "✗ " + err.Error()
	}
	text := fmt.Sprintf("Run %s: %s", st.Run.ID, runlog.StateText(st.Run.Status))
	if st.Current != "" {
		text += " — at " + st.Current
	}
	if len(st.Completed) > 0 {
		text += " — done: " + strings.Join(st.Completed, ", ")
	}
	if st.Run.FailureReason != "" {
		text += " — " + st.Run.FailureReason
	}
	return text
}
