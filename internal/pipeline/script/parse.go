package script

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"nanohost/internal/pipeline/engine"
)

// Load reads and validates a script file (S.json).
func Load(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Parse reads and validates a script. Errors say where (line and column),
// which node and which execution, and what to write instead.
func Parse(data []byte) (*Script, error) {
	p := &parser{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	// Check the syntax over the whole document first: the token decoder's
	// syntax errors carry offsets relative to its buffer, not the file.
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New(`script is empty: want an object such as {"nodes": {"plan": ["[outcome:success]"]}}`)
	}
	var whole json.RawMessage
	if err := json.Unmarshal(data, &whole); err != nil {
		return nil, p.describe(err)
	}
	s, err := p.script()
	if err != nil {
		return nil, p.describe(err)
	}
	return s, nil
}

// parser walks the document with a token decoder so that every error can
// point at the place it comes from.
type parser struct {
	data []byte
	dec  *json.Decoder
}

// posError is an error at a byte offset of the script.
type posError struct {
	offset int64
	msg    string
}

func (e *posError) Error() string { return e.msg }

func (p *parser) errorf(offset int64, format string, args ...any) error {
	return &posError{offset: offset, msg: fmt.Sprintf(format, args...)}
}

// describe prefixes an error with its line and column.
func (p *parser) describe(err error) error {
	var pe *posError
	var syn *json.SyntaxError
	switch {
	case errors.As(err, &pe):
		line, col := lineCol(p.data, pe.offset)
		return fmt.Errorf("line %d, column %d: %s", line, col, pe.msg)
	case errors.As(err, &syn):
		line, col := lineCol(p.data, syn.Offset-1) // Offset is just past the bad byte
		return fmt.Errorf("line %d, column %d: invalid JSON: %v", line, col, syn)
	}
	return err
}

// next returns the offset where the next value starts (InputOffset stops
// before the separators and spaces in front of it).
func (p *parser) next() int64 {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) && strings.IndexByte(" \t\r\n,:", p.data[off]) >= 0 {
		off++
	}
	return off
}

func (p *parser) script() (*Script, error) {
	start := p.next()
	if err := p.expectDelim('{', start, `the script must be a JSON object such as {"nodes": {"plan": ["[outcome:success]"]}}`); err != nil {
		return nil, err
	}
	s := &Script{Nodes: map[string][]Response{}}
	for p.dec.More() {
		keyAt := p.next()
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		switch key {
		case "nodes":
			if err := p.nodes(s); err != nil {
				return nil, err
			}
		case "default":
			r, err := p.response("default")
			if err != nil {
				return nil, err
			}
			s.Default = &r
		case "comment":
			var ignored any
			if err := p.dec.Decode(&ignored); err != nil {
				return nil, err
			}
		default:
			return nil, p.errorf(keyAt, `unknown key %q: a script has "nodes", "default" and "comment"`, key)
		}
	}
	if _, err := p.dec.Token(); err != nil { // the closing '}'
		return nil, err
	}
	return s, nil
}

func (p *parser) nodes(s *Script) error {
	if err := p.expectDelim('{', p.next(), `"nodes" must be an object mapping node ids to lists of responses`); err != nil {
		return err
	}
	for p.dec.More() {
		keyAt := p.next()
		id, err := p.key()
		if err != nil {
			return err
		}
		if _, dup := s.Nodes[id]; dup {
			return p.errorf(keyAt, "node %q is listed twice", id)
		}
		list, err := p.responses(id)
		if err != nil {
			return err
		}
		if len(list) == 0 {
			return p.errorf(keyAt, "node %q: empty response list; give at least one response, e.g. [\"[outcome:success]\"]", id)
		}
		s.Nodes[id] = list
	}
	_, err := p.dec.Token()
	return err
}

// responses reads a node's list, or a single response standing for a list of one.
func (p *parser) responses(id string) ([]Response, error) {
	if p.peek() != '[' {
		r, err := p.response(fmt.Sprintf("node %q", id))
		return []Response{r}, err
	}
	if _, err := p.dec.Token(); err != nil {
		return nil, err
	}
	var list []Response
	for p.dec.More() {
		r, err := p.response(fmt.Sprintf("node %q execution %d", id, len(list)+1))
		if err != nil {
			return nil, err
		}
		list = append(list, r)
	}
	_, err := p.dec.Token()
	return list, err
}

// response reads one response: agent text or an object; where names it in errors.
func (p *parser) response(where string) (Response, error) {
	at := p.next()
	var raw json.RawMessage
	if err := p.dec.Decode(&raw); err != nil {
		return Response{}, err
	}
	switch raw[0] {
	case '"':
		var text string
		if err := json.Unmarshal(raw, &text); err != nil {
			return Response{}, p.errorf(at, "%s: %v", where, err)
		}
		return Text(text), nil
	case '{':
		return p.object(raw, at, where)
	}
	return Response{}, p.errorf(at, `%s: want agent text (a string) or an object such as {"status": "fail"}, got %s`, where, raw)
}

func (p *parser) object(raw json.RawMessage, at int64, where string) (Response, error) {
	var r Response
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return r, p.errorf(at+typ.Offset, "%s: field %q must be %s, got %s", where, typ.Field, goTypeName(typ.Type.String()), typ.Value)
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return r, p.errorf(at, "%s: unknown field %s (known: status, preferred_label, suggested_next_ids, context_updates, notes, failure_reason, response, delay_ms, exit_code, error, transient, usage)", where, field)
		}
		return r, p.errorf(at, "%s: %v", where, err)
	}
	if r.Status != "" {
		st, err := engine.ParseStatus(r.Status)
		if err != nil {
			return r, p.errorf(at, "%s: %v", where, err)
		}
		r.Status = string(st)
	}
	if r.DelayMS < 0 {
		return r, p.errorf(at, "%s: delay_ms is %d; it must be 0 or more", where, r.DelayMS)
	}
	if r.ExitCode != nil && (*r.ExitCode < 0 || *r.ExitCode > 255) {
		return r, p.errorf(at, "%s: exit_code %d is out of range 0..255", where, *r.ExitCode)
	}
	if r.Transient && r.Error == "" {
		return r, p.errorf(at, `%s: "transient" only applies to an "error"; add "error": "what went wrong"`, where)
	}
	return r, nil
}

func goTypeName(t string) string {
	switch t {
	case "string":
		return "a string"
	case "int", "*int", "int64":
		return "an integer"
	case "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "[]string":
		return "a list of strings"
	case "map[string]interface {}":
		return "an object"
	}
	return t
}

func (p *parser) key() (string, error) {
	at := p.next()
	tok, err := p.dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", p.errorf(at, "want a key, got %v", tok)
	}
	return key, nil
}

func (p *parser) expectDelim(want json.Delim, at int64, msg string) error {
	tok, err := p.dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return p.errorf(at, "%s", msg)
	}
	return nil
}

// peek returns the first byte of the next value.
func (p *parser) peek() byte {
	if off := p.next(); off < int64(len(p.data)) {
		return p.data[off]
	}
	return 0
}

// lineCol converts the offset of a byte into its 1-based line and column.
func lineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(offset) - bytes.LastIndexByte(before, '\n')
	return line, col
}
