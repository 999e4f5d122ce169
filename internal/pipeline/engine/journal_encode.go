package engine

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"nanohost/internal/pipeline/fidelity"
)

// appendJournalLine appends e (with the commit d, when not nil) as one
// line of events.jsonl, without its newline: exactly what encoding/json
// makes of journalLine{e, d}, without reflection for the fields every node
// writes. Values it has no fast path for go through encoding/json.
//
// A field added to Event, Delta, EdgeKey, Decision or fidelity.Stage must
// be added here too: TestJournalEncodingCoversEveryField fills every field
// and compares with encoding/json.
func appendJournalLine(b []byte, e *Event, d *Delta) ([]byte, error) {
	b = append(b, `{"run_id":`...)
	b = appendJSONString(b, e.RunID)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"time":"`...)
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","type":`...)
	b = appendJSONString(b, string(e.Type))
	b = appendStringField(b, "node_id", e.NodeID)
	b = appendStringField(b, "label", e.Label)
	b = appendIntField(b, "index", int64(e.Index))
	b = appendIntField(b, "total", int64(e.Total))
	b = appendStringField(b, "branch", e.Branch)
	b = appendStringField(b, "status", string(e.Status))
	b = appendIntField(b, "attempt", int64(e.Attempt))
	b = appendIntField(b, "max_attempt", int64(e.MaxAttempt))
	b = appendIntField(b, "duration_ns", int64(e.Duration))
	b = appendIntField(b, "delay_ns", int64(e.Delay))
	b = appendStringField(b, "message", e.Message)
	if e.WillRetry {
		b = append(b, `,"will_retry":true`...)
	}
	b = appendStringField(b, "by", e.By)
	var err error
	if e.Usage != nil {
		if b, err = appendMarshalField(b, "usage", e.Usage); err != nil {
			return nil, err
		}
	}
	if e.Question != nil {
		if b, err = appendMarshalField(b, "question", e.Question); err != nil {
			return nil, err
		}
	}
	if e.Answer != nil {
		if b, err = appendMarshalField(b, "answer", e.Answer); err != nil {
			return nil, err
		}
	}
	if e.Decision != nil {
		b = append(b, `,"decision":`...)
		b = appendDecision(b, e.Decision)
	}
	if e.Changes != nil {
		if b, err = appendMarshalField(b, "changes", e.Changes); err != nil {
			return nil, err
		}
	}
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		if b, err = appendAnyMap(b, e.Data); err != nil {
			return nil, err
		}
	}
	b = appendStringField(b, "persona", e.Persona)
	b = appendStringsField(b, "masks", e.Masks)
	if e.Switch != nil {
		if b, err = appendMarshalField(b, "walker_switch", e.Switch); err != nil {
			return nil, err
		}
	}
	if d != nil {
		b = append(b, `,"commit":`...)
		if b, err = appendDelta(b, d); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendDelta(b []byte, d *Delta) ([]byte, error) {
	b = append(b, '{')
	if d.CurrentNode != "" {
		b = append(b, `"current_node":`...)
		b = appendJSONString(b, d.CurrentNode)
		b = append(b, ',')
	}
	b = append(b, `"next_node":`...)
	b = appendJSONString(b, d.NextNode)
	if k := d.Incoming; k != nil {
		b = append(b, `,"incoming_edge":{"from":`...)
		b = appendJSONString(b, k.From)
		b = append(b, `,"to":`...)
		b = appendJSONString(b, k.To)
		b = append(b, `,"index":`...)
		b = strconv.AppendInt(b, int64(k.Index), 10)
		b = append(b, '}')
	}
	b = appendStringField(b, "state", d.State)
	b = appendStringField(b, "failure_reason", d.Reason)
	var err error
	if d.Branch != nil {
		if b, err = appendMarshalField(b, "branch", d.Branch); err != nil {
			return nil, err
		}
	}
	b = appendStringsField(b, "path", d.Path)
	b = appendStringsField(b, "completed_nodes", d.CompletedNodes)
	b = appendCountsField(b, "visits", d.Visits)
	b = appendCountsField(b, "attempts", d.Attempts)
	b = appendCountsField(b, "stage_index", d.StageIndex)
	b = appendCountsField(b, "node_retries", d.NodeRetries)
	if d.ResetGates {
		b = append(b, `,"reset_goal_gates":true`...)
	}
	if len(d.GoalGates) > 0 {
		b = append(b, `,"goal_gate_outcomes":{`...)
		for i, k := range slices.Sorted(maps.Keys(d.GoalGates)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, string(d.GoalGates[k]))
		}
		b = append(b, '}')
	}
	if d.ResetContext {
		b = append(b, `,"reset_context":true`...)
	}
	if len(d.Context) > 0 {
		b = append(b, `,"context":`...)
		if b, err = appendAnyMap(b, d.Context); err != nil {
			return nil, err
		}
	}
	if d.ResetHistory {
		b = append(b, `,"reset_history":true`...)
	}
	if len(d.History) > 0 {
		b = append(b, `,"history":[`...)
		for i := range d.History {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStage(b, &d.History[i])
		}
		b = append(b, ']')
	}
	b = appendStringsField(b, "logs", d.Logs)
	if d.Usage != (Usage{}) {
		if b, err = appendMarshalField(b, "usage", d.Usage); err != nil {
			return nil, err
		}
	}
	b = appendTally(b, &d.Tally)
	b = appendStringField(b, "stage_root", d.StageRoot)
	return append(b, '}'), nil
}

// appendTally appends every counter of t as a field, zeros too (as
// encoding/json does for the tags without omitempty).
func appendTally(b []byte, t *Tally) []byte {
	for _, c := range t.counters() {
		b = append(b, ',', '"')
		b = append(b, c.name...)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, int64(*c.n), 10)
	}
	return b
}

func appendStage(b []byte, s *fidelity.Stage) []byte {
	b = append(b, `{"node_id":`...)
	b = appendJSONString(b, s.NodeID)
	b = appendStringField(b, "label", s.Label)
	b = appendStringField(b, "persona", s.Persona)
	b = append(b, `,"status":`...)
	b = appendJSONString(b, s.Status)
	b = appendStringField(b, "notes", s.Notes)
	b = appendStringField(b, "failure_reason", s.FailureReason)
	b = appendStringField(b, "response", s.Response)
	b = appendIntField(b, "duration_ns", int64(s.Duration))
	b = appendIntField(b, "attempts", int64(s.Attempts))
	return append(b, '}')
}

func appendDecision(b []byte, d *Decision) []byte {
	b = append(b, `{"from":`...)
	b = appendJSONString(b, d.From)
	b = appendStringField(b, "to", d.To)
	b = append(b, `,"rule":`...)
	b = appendJSONString(b, d.Rule)
	if len(d.Values) > 0 {
		b = append(b, `,"values":{`...)
		for i, k := range slices.Sorted(maps.Keys(d.Values)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, d.Values[k])
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendAnyMap appends m with sorted keys; values of the common kinds are
// written here, the rest by encoding/json.
func appendAnyMap(b []byte, m map[string]any) ([]byte, error) {
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendAny(b, m[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

func appendAny(b []byte, v any) ([]byte, error) {
	switch t := v.(type) {
	case string:
		return appendJSONString(b, t), nil
	case Status:
		return appendJSONString(b, string(t)), nil
	case int:
		return strconv.AppendInt(b, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(b, t, 10), nil
	case bool:
		return strconv.AppendBool(b, t), nil
	case nil:
		return append(b, "null"...), nil
	case []string:
		if t == nil {
			return append(b, "null"...), nil
		}
		return appendStrings(b, t), nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

func appendMarshalField(b []byte, name string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return append(b, data...), nil
}

// appendStringField appends ,"name":"s" unless s is empty (omitempty).
func appendStringField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, s)
}

// appendIntField appends ,"name":n unless n is 0 (omitempty).
func appendIntField(b []byte, name string, n int64) []byte {
	if n == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, n, 10)
}

func appendStringsField(b []byte, name string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendStrings(b, ss)
}

func appendCountsField(b []byte, name string, c Counts) []byte {
	if len(c) == 0 {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendCounts(b, c)
}

// appendStrings appends ss as a JSON array.
func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as encoding/json writes a string: the usual
// identifiers and plain text directly, anything to escape (control
// characters, quotes, backslashes, the HTML characters <, > and &,
// non-ASCII text) through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
