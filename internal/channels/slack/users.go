package slack

import (
	"container/list"
	"context"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"
)

// nameTTL is how long a looked-up display name is reused.
const nameTTL = 10 * time.Minute

// nameCache remembers users' display names (users.info).
type nameCache struct {
	lookup func(ctx context.Context, user string) (string, error)

	mu    sync.Mutex
	names map[string]cachedName
}

type cachedName struct {
	name    string
	fetched time.Time
}

func newNameCache(lookup func(ctx context.Context, user string) (string, error)) *nameCache {
	return &nameCache{lookup: lookup, names: make(map[string]cachedName)}
}

// get returns user's display name, or "" when Slack does not know it.
func (n *nameCache) get(ctx context.Context, user string) string {
	n.mu.Lock()
	c, ok := n.names[user]
	n.mu.Unlock()
	if ok && time.Since(c.fetched) < nameTTL {
		return c.name
	}
	name, err := n.lookup(ctx, user)
	if err != nil {
		return c.name // stale beats nothing; "" if never known
	}
	n.mu.Lock()
	n.names[user] = cachedName{name: name, fetched: time.Now()}
	n.mu.Unlock()
	return name
}

func displayName(u *slackgo.User) string {
	for _, n := range []string{u.Profile.DisplayName, u.RealName, u.Profile.RealName, u.Name} {
		if n != "" {
			return n
		}
	}
	return u.ID
}

// lru is a bounded set of recently seen keys, for de-duplicating retried
// deliveries without growing forever.
type lru struct {
	mu    sync.Mutex
	cap   int
	order *list.List
	keys  map[string]*list.Element
}

func newLRU(capacity int) *lru {
	return &lru{cap: capacity, order: list.New(), keys: make(map[string]*list.Element)}
}

// add records key and reports whether it was new.
func (l *lru) add(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.keys[key]; ok {
		l.order.MoveToFront(e)
		return false
	}
	l.keys[key] = l.order.PushFront(key)
	if l.order.Len() > l.cap {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.keys, oldest.Value.(string))
	}
	return true
}

// has reports whether key is in the set.
func (l *lru) has(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.keys[key]
	return ok
}

// remove takes key out of the set.
func (l *lru) remove(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.keys[key]; ok {
		l.order.Remove(e)
		delete(l.keys, key)
	}
}
