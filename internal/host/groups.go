package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"nanohost/internal/channels"
	"nanohost/internal/config"
	"nanohost/internal/container"
	"nanohost/internal/ipc"
	"nanohost/internal/store"
)

// groupTable is the registered groups: the store is the record, this is
// the in-memory index every inbound message and IPC request consults. It
// implements ipc.Registry.
type groupTable struct {
	store     *store.Store
	cfg       *config.Config
	consoleOn bool // the console is one of the host's channels
	log       *slog.Logger

	mu     sync.RWMutex
	byDir  map[string]store.Group
	byChat map[string]store.Group
}

func newGroupTable(st *store.Store, cfg *config.Config, consoleOn bool, log *slog.Logger) *groupTable {
	return &groupTable{store: st, cfg: cfg, consoleOn: consoleOn, log: log, byDir: map[string]store.Group{}, byChat: map[string]store.Group{}}
}

// dir is data/groups/<folder>, the group's workspace.
func (t *groupTable) dir(folder string) string { return filepath.Join(t.cfg.DataDir, "groups", folder) }

// syncFromConfig registers (or updates) every configured group in the
// store, prepares its folders, then loads every registered group — config
// ones and those registered from chat — into the index.
func (t *groupTable) syncFromConfig(ctx context.Context) error {
	for _, g := range t.configGroups() {
		if err := t.register(ctx, g); err != nil {
			return fmt.Errorf("register group %s from the config: %w", g.Folder, err)
		}
	}
	return t.reload(ctx)
}

// configGroups are the configured groups, plus a main group on the console
// when the console is on and no group lives there (the quick start has no
// config file at all).
func (t *groupTable) configGroups() []config.Group {
	gs := t.cfg.Groups
	if !t.consoleOn {
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

// register stores g, updating a group of that folder (the configuration
// is the authority on its groups), and prepares data/groups/<folder>/
// (with CLAUDE.md) and data/ipc/<folder>/.
func (t *groupTable) register(ctx context.Context, g config.Group) error {
	return t.save(ctx, g, true)
}

// save stores g — creating it, or with update also updating an existing
// group of that folder — and prepares its folders.
func (t *groupTable) save(ctx context.Context, g config.Group, update bool) error {
	if err := ipc.ValidGroupName(g.Folder); err != nil {
		return err
	}
	channel, _, _ := strings.Cut(g.Chat, ":")
	g.Chat = normalizeChat(g.Chat)
	if err := t.store.UpsertChat(ctx, store.Chat{ID: g.Chat, Channel: channel, Name: g.Name}); err != nil {
		return err
	}
	sg := store.Group{Folder: g.Folder, Name: nonEmpty(g.Name, g.Folder), ChatID: g.Chat, Trigger: nonEmpty(g.Trigger, "@mention"), IsMain: g.Main}
	err := t.store.CreateGroup(ctx, sg)
	if errors.Is(err, store.ErrExists) && update {
		err = t.store.UpdateGroup(ctx, sg)
	}
	if err != nil {
		return err
	}
	return t.prepareFolders(sg)
}

// registerConflict says why a /register of g would clash with a group that
// exists — its chat already has a group, or its folder is taken — or "".
// It is checked before anything is written, so a refusal changes nothing:
// registering from chat never renames a chat or moves a group.
func (t *groupTable) registerConflict(g config.Group) string {
	if err := ipc.ValidGroupName(g.Folder); err != nil {
		return err.Error() + "."
	}
	chat := normalizeChat(g.Chat)
	if owner, taken := t.byChatID(chat); taken {
		if chat == "console" {
			return fmt.Sprintf("the console is a single chat, and it already belongs to group %s: a chat belongs to one group. Register a Slack channel (/register slack:<channel id> %s) instead.", owner.Folder, g.Folder)
		}
		return fmt.Sprintf("chat %s already belongs to group %s: a chat belongs to one group. Pick another chat, or change group %s in the configuration.", g.Chat, owner.Folder, owner.Folder)
	}
	if existing, taken := t.get(g.Folder); taken {
		return fmt.Sprintf("a group named %s already exists (its chat is %s): choose another folder name.", g.Folder, existing.ChatID)
	}
	return ""
}

func (t *groupTable) prepareFolders(g store.Group) error {
	dir := t.dir(g.Folder)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create workspace of group %s: %w", g.Folder, err)
	}
	memory := filepath.Join(dir, "CLAUDE.md")
	if _, err := os.Stat(memory); errors.Is(err, os.ErrNotExist) {
		text := fmt.Sprintf("# %s\n\nThis is the memory of the %q group. Agents read it at the start of every conversation;\n"+
			"write down what should be remembered across conversations.\n", g.Name, g.Folder)
		if err := os.WriteFile(memory, []byte(text), 0o644); err != nil {
			return fmt.Errorf("create memory of group %s: %w", g.Folder, err)
		}
	}
	if err := handToAgents(dir, memory); err != nil {
		return fmt.Errorf("give the workspace of group %s to its agents: %w", g.Folder, err)
	}
	// The IPC directories stay owned by this process's user: agents run
	// as the workspace owner (see container.resolveUser), who is us unless
	// the host runs as root — then the directories are opened up.
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = container.DefaultAgentUID, container.DefaultAgentGID
	}
	return ipc.EnsureGroup(ipcRoot(t.cfg), g.Folder, uid, gid)
}

// handToAgents lets agents work in a workspace a root host created. Agents
// run as the workspace owner (container.resolveUser), or as the default
// agent user when root owns it — who could then not write a single file. So
// a root host gives a root-owned workspace (and its memory file) to the
// default agent user; a workspace someone else owns is left alone.
func handToAgents(paths ...string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	for _, p := range paths {
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != 0 || st.Mode()&os.ModeSymlink != 0 {
			continue
		}
		if err := os.Lchown(p, container.DefaultAgentUID, container.DefaultAgentGID); err != nil {
			return err
		}
	}
	return nil
}

func (t *groupTable) reload(ctx context.Context) error {
	list, err := t.store.ListGroups(ctx)
	if err != nil {
		return err
	}
	byDir, byChat := map[string]store.Group{}, map[string]store.Group{}
	for _, g := range list {
		byDir[g.Folder], byChat[g.ChatID] = g, g
		if err := t.prepareFolders(g); err != nil {
			return err
		}
	}
	t.mu.Lock()
	t.byDir, t.byChat = byDir, byChat
	t.mu.Unlock()
	return nil
}

// LookupGroup implements ipc.Registry.
func (t *groupTable) LookupGroup(folder string) (ipc.Group, bool) {
	g, ok := t.get(folder)
	if !ok {
		return ipc.Group{}, false
	}
	return ipc.Group{Folder: g.Folder, Chat: g.ChatID, Main: g.IsMain}, true
}

// ChatRegistered implements ipc.Registry.
func (t *groupTable) ChatRegistered(chat string) bool {
	_, ok := t.byChatID(chat)
	return ok
}

func (t *groupTable) get(folder string) (store.Group, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.byDir[folder]
	return g, ok
}

func (t *groupTable) byChatID(chat string) (store.Group, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.byChat[chat]
	return g, ok
}

func (t *groupTable) all() []store.Group {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]store.Group, 0, len(t.byDir))
	for _, g := range t.byDir {
		out = append(out, g)
	}
	return out
}

// triggered reports whether in should wake g's agent: a mention when the
// trigger is "@mention"; the trigger word anywhere in the text otherwise.
// The console is one person's own terminal, so every message there counts.
func triggered(g store.Group, in channels.Inbound) bool {
	if in.Kind == channels.KindMention || in.Channel == "console" {
		return true
	}
	trig := strings.TrimSpace(g.Trigger)
	if trig == "" || trig == "@mention" {
		return false
	}
	re, err := regexp.Compile(`(?i)(^|\W)` + regexp.QuoteMeta(strings.TrimPrefix(trig, "@")) + `($|\W)`)
	return err == nil && re.MatchString(in.Text)
}

// replyThread is where a reply to in goes: its thread, or a new thread
// under it when it was posted at the top level.
func replyThread(in channels.Inbound) string {
	if in.Thread != "" || strings.HasPrefix(in.MsgID, promptKeyPrefix) {
		return in.Thread // a scheduled prompt is no chat message: its reply stands on its own
	}
	return in.MsgID
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
