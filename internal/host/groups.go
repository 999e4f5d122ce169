package host

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"nanohost/internal/ipc"
	"nanohost/internal/store"
)

// groupIndex is the registered groups in memory, by folder and by chat:
// what every inbound message, IPC request, run and task looks its group up
// in. The store is the record; groupRegistrar writes it and hands the
// index the new list. It implements ipc.Registry.
type groupIndex struct {
	mu     sync.RWMutex
	byDir  map[string]store.Group
	byChat map[string]store.Group
}

func newGroupIndex() *groupIndex {
	return &groupIndex{byDir: map[string]store.Group{}, byChat: map[string]store.Group{}}
}

// replace makes list the registered groups.
func (t *groupIndex) replace(list []store.Group) {
	byDir, byChat := make(map[string]store.Group, len(list)), make(map[string]store.Group, len(list))
	for _, g := range list {
		byDir[g.Folder], byChat[g.ChatID] = g, g
	}
	t.mu.Lock()
	t.byDir, t.byChat = byDir, byChat
	t.mu.Unlock()
}

// LookupGroup implements ipc.Registry.
func (t *groupIndex) LookupGroup(folder string) (ipc.Group, bool) {
	g, ok := t.get(folder)
	if !ok {
		return ipc.Group{}, false
	}
	return ipc.Group{Folder: g.Folder, Chat: g.ChatID, Main: g.IsMain}, true
}

// ChatRegistered implements ipc.Registry.
func (t *groupIndex) ChatRegistered(chat string) bool {
	_, ok := t.byChatID(chat)
	return ok
}

func (t *groupIndex) get(folder string) (store.Group, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.byDir[folder]
	return g, ok
}

func (t *groupIndex) byChatID(chat string) (store.Group, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	g, ok := t.byChat[chat]
	return g, ok
}

func (t *groupIndex) all() []store.Group {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]store.Group, 0, len(t.byDir))
	for _, g := range t.byDir {
		out = append(out, g)
	}
	return out
}

// pick is the named group, or the main one, or the only one.
func (t *groupIndex) pick(folder string) (store.Group, error) {
	all := t.all()
	if len(all) == 0 {
		return store.Group{}, errors.New("no group is registered yet: add one under groups in nanohost.yaml, or register a chat as a group")
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Folder < all[j].Folder })
	names := make([]string, len(all))
	for i, g := range all {
		names[i] = g.Folder
	}
	if folder != "" {
		if g, ok := t.get(folder); ok {
			return g, nil
		}
		return store.Group{}, fmt.Errorf("no group %q is registered (the groups are %s)", folder, strings.Join(names, ", "))
	}
	for _, g := range all {
		if g.IsMain {
			return g, nil
		}
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return store.Group{}, fmt.Errorf("say which group to run in (group: one of %s), or mark one group main", strings.Join(names, ", "))
}
