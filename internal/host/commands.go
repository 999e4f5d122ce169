package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"nanohost/internal/channels"
	"nanohost/internal/ipc"
	"nanohost/internal/pipeline/frontend"
	"nanohost/internal/store"
)

// CommandAuthorizer is implemented by channels that decide themselves who
// may start, cancel and resume runs; for other channels the host applies
// the configured Slack policy (Slack) or allows it (the local console).
type CommandAuthorizer interface {
	AuthorizeCommand(ctx context.Context, user, chat string, cmd channels.Command) error
}

// handleCommand executes a /pipeline command.
func (h *Host) handleCommand(ctx context.Context, ch channels.Channel, in channels.Inbound) {
	cmd := *in.Command
	log := h.log.With("channel", ch.Name(), "chat", in.Chat, "user", in.User, "command", cmd.Kind)
	reply := func(text string) {
		if _, err := ch.Post(ctx, in.Chat, in.Thread, channels.Message{Text: text}); err != nil {
			log.Warn("reply to command", "err", err)
		}
	}
	private := func(text string) {
		if err := ch.Ephemeral(ctx, in.Chat, in.User, text); err != nil {
			log.Warn("reply to command", "err", err)
		}
	}
	g, ok := h.groups.byChatID(in.Chat)
	if !ok {
		private("This chat is not registered with nanohost; the main group can add it with /register " + in.Chat + " <folder>.")
		return
	}
	if cmd.Changes() {
		if err := h.authorizeCommand(ctx, ch, in, cmd); err != nil {
			log.Info("command refused", "reason", err)
			private("✗ " + err.Error())
			return
		}
	}
	switch cmd.Kind {
	case channels.CmdHelp:
		private(channels.HelpText)
	case channels.CmdRunDOT, channels.CmdRunNamed:
		h.commandRun(ctx, ch, in, g, cmd, reply, private)
	case channels.CmdValidate:
		opts, err := h.frontendOptions(g.Folder, "")
		if err != nil {
			reply("✗ " + err.Error())
			return
		}
		_, diags, _ := frontend.Prepare("pipeline.dot", []byte(cmd.DOT), opts)
		reply(channels.FormatDiagnostics("pipeline.dot", diags))
	case channels.CmdList:
		reply(h.listText(ctx, g))
	case channels.CmdStatus:
		reply(h.statusText(ctx, g, cmd.RunID))
	case channels.CmdCancel:
		if err := h.checkRunInGroup(ctx, g, cmd.RunID); err != nil {
			private("✗ " + err.Error())
			return
		}
		if err := h.runs.cancel(ctx, cmd.RunID); err != nil {
			private("✗ " + err.Error())
			return
		}
		reply("Cancelling run " + cmd.RunID + " …")
	case channels.CmdResume:
		h.commandResume(ctx, g, cmd.RunID, reply, private)
	}
}

func (h *Host) commandRun(ctx context.Context, ch channels.Channel, in channels.Inbound, g store.Group, cmd channels.Command, reply, private func(string)) {
	src, file := []byte(cmd.DOT), "pipeline.dot"
	if cmd.Kind == channels.CmdRunNamed {
		path, err := h.findWorkflow(g.Folder, cmd.Name)
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
	run, diags, err := h.runs.start(ctx, startSpec{
		Group: g.Folder, Chat: in.Chat, User: in.User, File: file, Source: src, Goal: cmd.Goal, Verbosity: string(cmd.Verbosity),
	})
	var rej *ipc.RejectError
	switch {
	case errors.As(err, &rej):
		_ = channels.ReplyDiagnostics(ctx, ch, in.Chat, in.User, file, diags)
	case err != nil:
		private("✗ Could not start the pipeline: " + err.Error())
	default:
		h.log.Info("run started from chat", "run", run.ID, "user", in.User)
	}
}

func (h *Host) commandResume(ctx context.Context, g store.Group, runID string, reply, private func(string)) {
	if err := h.checkRunInGroup(ctx, g, runID); err != nil {
		private("✗ " + err.Error())
		return
	}
	run, err := h.store.GetRun(ctx, runID)
	if err != nil {
		private("✗ " + err.Error())
		return
	}
	if run.Status.Finished() {
		private(fmt.Sprintf("✗ Run %s already ended (%s); start a new one.", runID, run.Status))
		return
	}
	if _, ok := h.runs.isActive(runID); ok {
		private("Run " + runID + " is already running.")
		return
	}
	if err := h.runs.resume(ctx, run); err != nil {
		private("✗ " + err.Error())
		return
	}
	reply("Resuming run " + runID + " from its checkpoint …")
}

func (h *Host) checkRunInGroup(ctx context.Context, g store.Group, runID string) error {
	run, err := h.store.GetRun(ctx, runID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no run %s (see /pipeline list)", runID)
	}
	if err != nil {
		return err
	}
	if run.GroupFolder != g.Folder && !g.IsMain {
		return fmt.Errorf("run %s belongs to another group", runID)
	}
	return nil
}

// authorizeCommand decides whether in.User may start, cancel or resume runs
// in in.Chat. Slack is deny-by-default: the chat must be one of
// slack.policy.channels and the user one of slack.policy.starters.

func (h *Host) authorizeCommand(ctx context.Context, ch channels.Channel, in channels.Inbound, cmd channels.Command) error {
	if a, ok := ch.(CommandAuthorizer); ok {
		return a.AuthorizeCommand(ctx, in.User, in.Chat, cmd)
	}
	if ch.Name() != "slack" {
		return nil // the console is the operator's own terminal
	}
	// The Slack adapter checks the starter (user groups included) before it
	// delivers a command; the host re-checks the conversation as a backstop.
	if !slices.Contains(h.cfg.Slack.Policy.Channels, in.Chat) {
		return fmt.Errorf("runs cannot be started in this channel (it is not in slack.policy.channels)")
	}
	return nil
}

// findWorkflow finds <name>.dot: the group's workspace first, then the
// configured pipeline directories, then the bundled examples/ and
// skills/attractor/workflows/.
func (h *Host) findWorkflow(folder, name string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.Contains(name, "..") {
		return "", fmt.Errorf("%q is not a pipeline name (use a plain name such as demo)", name)
	}
	file := strings.TrimSuffix(name, ".dot") + ".dot"
	dirs := []string{h.GroupDir(folder)}
	dirs = append(dirs, h.cfg.Pipelines.Dirs...)
	dirs = append(dirs, filepath.Join(h.root, "examples"), filepath.Join(h.root, "skills", "attractor", "workflows"))
	for _, d := range dirs {
		p := filepath.Join(d, file)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", fmt.Errorf("no pipeline named %s: looked for %s in the group's workspace, %s", name, file, strings.Join(dirs[1:], ", "))
}

func (h *Host) listText(ctx context.Context, g store.Group) string {
	page, err := h.store.ListRuns(ctx, store.RunFilter{Group: g.Folder, Limit: 10})
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
	if err := h.checkRunInGroup(ctx, g, runID); err != nil {
		return "✗ " + err.Error()
	}
	st, err := h.runs.status(ctx, runID)
	if err != nil {
		return "✗ " + err.Error()
	}
	text := fmt.Sprintf("Run %s: %s", st.RunID, st.State)
	if st.CurrentNode != "" {
		text += " — at " + st.CurrentNode
	}
	if len(st.Completed) > 0 {
		text += " — done: " + strings.Join(st.Completed, ", ")
	}
	if st.Detail != "" {
		text += " — " + st.Detail
	}
	return text
}
