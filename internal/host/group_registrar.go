package host

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"nanohost/internal/config"
	"nanohost/internal/ipc"
	"nanohost/internal/runlog"
	"nanohost/internal/store"
)

// groupStore is what registering groups needs of the store.
type groupStore interface {
	UpsertChat(ctx context.Context, c store.Chat) error
	CreateGroup(ctx context.Context, g store.Group) error
	UpdateGroup(ctx context.Context, g store.Group) error
	ListGroups(ctx context.Context) ([]store.Group, error)
}

// groupRegistrar registers groups — the configured ones at start-up, and
// those registered from chat or by the main group's agent — in the store,
// prepares their folders, and hands the index what the store then holds.
type groupRegistrar struct {
	store      groupStore
	folders    groupFolders
	index      *groupIndex
	configured []config.Group // configGroups: the configuration's, and the console's
}

// syncFromConfig registers (or updates) every configured group in the
// store, prepares its folders, then loads every registered group — config
// ones and those registered from chat — into the index.
func (r *groupRegistrar) syncFromConfig(ctx context.Context) error {
	for _, g := range r.configured {
		if err := r.save(ctx, g, true); err != nil {
			return fmt.Errorf("register group %s from the config: %w", g.Folder, err)
		}
	}
	return r.reload(ctx)
}

// configGroups are the configured groups, plus a main group on the console
// when the console is on and no group lives there (the quick start has no
// config file at all).
func configGroups(gs []config.Group, consoleOn bool) []config.Group {
	if !consoleOn {
		return gs
	}
	hasMain := false
	for _, g := range gs {
		if normalizeChat(g.Chat) == "console" {
			return gs
		}
		hasMain = hasMain || g.Main
	}
	return append(gs, config.Group{Folder: "main", Name: "Console", Chat: "console", Main: !hasMain})
}

// save stores g — creating it, or with update (the configuration is the
// authority on its groups) also updating an existing group of that
// folder — and prepares its folders.
func (r *groupRegistrar) save(ctx context.Context, g config.Group, update bool) error {
	if err := ipc.ValidGroupName(g.Folder); err != nil {
		return err
	}
	channel, _, _ := strings.Cut(g.Chat, ":")
	g.Chat = normalizeChat(g.Chat)
	if err := r.store.UpsertChat(ctx, store.Chat{ID: g.Chat, Channel: channel, Name: g.Name}); err != nil {
		return err
	}
	sg := store.Group{Folder: g.Folder, Name: nonEmpty(g.Name, g.Folder), ChatID: g.Chat, Trigger: nonEmpty(g.Trigger, "@mention"), IsMain: g.Main}
	err := r.store.CreateGroup(ctx, sg)
	if errors.Is(err, store.ErrExists) && update {
		err = r.store.UpdateGroup(ctx, sg)
	}
	if err != nil {
		return err
	}
	return r.folders.prepare(sg)
}

// registerConflict is why a /register of g would clash with a group that
// exists — its chat already has a group, or its folder is taken — if it
// would (runlog words it). It is checked before anything is written, so a
// refusal changes nothing: registering from chat never renames a chat or
// moves a group.
func (r *groupRegistrar) registerConflict(g config.Group) (runlog.RegisterClash, bool) {
	clash := runlog.RegisterClash{Chat: g.Chat, Folder: g.Folder}
	if err := ipc.ValidGroupName(g.Folder); err != nil {
		clash.Invalid = err
		return clash, true
	}
	chat := normalizeChat(g.Chat)
	if owner, taken := r.index.byChatID(chat); taken {
		clash.ChatOwner, clash.Console = owner.Folder, chat == "console"
		return clash, true
	}
	if existing, taken := r.index.get(g.Folder); taken {
		clash.FolderChat = existing.ChatID
		return clash, true
	}
	return runlog.RegisterClash{}, false
}

// reload prepares the folders of every group the store holds, then makes
// them the index's groups (left as they were when a folder fails).
func (r *groupRegistrar) reload(ctx context.Context) error {
	list, err := r.store.ListGroups(ctx)
	if err != nil {
		return err
	}
	for _, g := range list {
		if err := r.folders.prepare(g); err != nil {
			return err
		}
	}
	r.index.replace(list)
	return nil
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// normalizeChat maps the config's chat names to the ids channels use:
// "console:<name>" is the console's one chat, "console"; "slack:C0123" is
// the Slack conversation id "C0123".
func normalizeChat(chat string) string {
	if strings.HasPrefix(chat, "console:") {
		return "console"
	}
	return strings.TrimPrefix(chat, "slack:")
}
