package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"nanohost/internal/pipeline"
)

// Fan-out over a list (docs/semantics.md, "Fan-out over a list"): a
// component node with foreach=<context key> runs the subgraph its one
// outgoing edge leads to once per item of the list under that key, each
// item's branch with item and item_index in its context, at most
// max_parallel at once, and joins them by its join and error policies as a
// parallel block does. parallel.results lists the items' results in item
// order.

// Attributes and context keys of a foreach node.
const (
	AttrForeach  = "foreach"
	AttrMaxItems = "max_items"
	// DefaultMaxItems bounds a foreach list when the node sets no max_items.
	DefaultMaxItems = 100
	KeyItem         = "item"
	KeyItemIndex    = "item_index"
)

// TooManyItemsError refuses a foreach list longer than its bound.
type TooManyItemsError struct {
	Node, Key   string
	Count, Most int
}

func (e *TooManyItemsError) Error() string {
	return fmt.Sprintf("foreach node %s: %s holds %d items, more than max_items=%d (raise max_items on the node, or split the list)", e.Node, e.Key, e.Count, e.Most)
}

func runForeach(ctx context.Context, st *Stage) (Outcome, error) {
	n := st.Node
	key := strings.TrimSpace(n.Attrs[AttrForeach])
	edges := st.Graph.Outgoing(n.ID)
	if len(edges) != 1 {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("foreach node %s has %d outgoing edges; it runs the subgraph of exactly one for each item", n.ID, len(edges))}, nil
	}
	cfg, err := parallelConfigFor(n)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("foreach node %s: %v", n.ID, err)}, nil
	}
	most, err := n.Attrs.Int(AttrMaxItems, DefaultMaxItems)
	if err != nil || most < 1 {
		most = DefaultMaxItems
	}
	items, err := foreachItems(st, key)
	if err != nil {
		return Outcome{Status: StatusFail, FailureReason: fmt.Sprintf("foreach node %s: %v", n.ID, err)}, nil
	}
	if len(items) > most {
		return Outcome{Status: StatusFail, FailureReason: (&TooManyItemsError{Node: n.ID, Key: key, Count: len(items), Most: most}).Error()}, nil
	}
	e := edges[0]
	specs := make([]branchSpec, len(items))
	for i, item := range items {
		name := e.To + "." + strconv.Itoa(i)
		path := n.ID + "/" + name
		if st.w.path != "" {
			path = st.w.path + "/" + path
		}
		specs[i] = branchSpec{edge: e, name: name, path: path, dir: filepath.Join(st.w.dir, n.ID, "item-"+strconv.Itoa(i)),
			item: item, index: i, hasItem: true}
	}
	restored := st.w.restoredBranches(st)
	data := map[string]any{"branch_count": len(items), "foreach": key, "join_policy": cfg.join, "error_policy": cfg.onError, "max_parallel": cfg.maxParallel}
	if len(restored) > 0 {
		done := make([]int, 0, len(restored))
		for i := range specs {
			if _, ok := restored[i]; ok {
				done = append(done, i)
			}
		}
		data["restored_items"] = done
	}
	st.Emit(Event{Type: EventParallelStarted, Label: n.Label(), Data: data})
	if len(items) == 0 {
		out := Outcome{Status: StatusSuccess, Notes: fmt.Sprintf("foreach=%s is an empty list: nothing to do", key),
			ContextUpdates: map[string]any{KeyParallelResults: []BranchResult{}, "parallel.success_count": 0, "parallel.failure_count": 0}}
		st.next = downstreamFanIn(st)
		st.Emit(Event{Type: EventParallelCompleted, Label: n.Label(), Status: out.Status, Data: map[string]any{"success_count": 0, "failure_count": 0, "fan_in": st.next}})
		return out, nil
	}
	spaces, _ := st.w.r.cfg.Backend.(BranchWorkspaces)
	var fork func(branchSpec) error
	if spaces != nil {
		// Each item's tree is forked as it starts: a long list does not
		// check out every tree before the first item runs.
		fork = func(sp branchSpec) error { return spaces.ForkBranches(ctx, st.w.path, []string{sp.path}) }
	}
	return fanOut(ctx, st, specs, cfg, restored, spaces, fork, "items")
}

// foreachItems reads the list under key, named as conditions name keys
// (context.items or items): a list value (a typed output's array), or text
// that parses as a JSON list.
func foreachItems(st *Stage, key string) ([]any, error) {
	lookup := st.w.r.lookup(st.Context)
	v, ok := lookup(key)
	if !ok {
		if rest, isContext := strings.CutPrefix(key, "context."); isContext {
			v, ok = lookup(rest)
		}
	}
	if !ok || v == nil {
		return nil, fmt.Errorf("foreach=%s: no stage has set %s", key, key)
	}
	return ItemsOf(v, key)
}

// ItemsOf reads v as a foreach list: a slice (any element type), or text
// holding a JSON list.
func ItemsOf(v any, key string) ([]any, error) {
	switch t := v.(type) {
	case []any:
		return t, nil
	case string:
		var list []any
		dec := json.NewDecoder(strings.NewReader(t))
		dec.UseNumber()
		if err := dec.Decode(&list); err != nil || dec.More() {
			return nil, fmt.Errorf("foreach=%s: its value is text that is not a JSON list (%s)", key, clipText(t, 80))
		}
		return list, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out, nil
	}
	return nil, fmt.Errorf("foreach=%s: its value is %T, not a list", key, v)
}

func clipText(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// IsForeach reports whether n fans out over a list.
func IsForeach(n *pipeline.Node) bool { return strings.TrimSpace(n.Attrs[AttrForeach]) != "" }
