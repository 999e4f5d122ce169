package slacktest

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// Slack's limits on what a message may carry.
const (
	// maxTextLen is chat.postMessage's limit on the text field.
	maxTextLen = 40000
	// maxBlocksText bounds all the text in a message's blocks together:
	// beyond it Slack answers msg_blocks_too_long (undocumented; about
	// 12,000 characters in practice).
	maxBlocksText = 12000
)

// textLen counts characters as Slack's clients do (UTF-16 code units): an
// emoji outside the Basic Multilingual Plane counts twice. Counting
// stricter than Slack may is what keeps the fake from passing text real
// Slack would refuse.
func textLen(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/api/")
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.calls[method]++
	f, faulted := s.takeFaultLocked(method)
	wait, limited := s.limits.take(method, r.Form.Get("channel"), time.Now())
	if limited && !faulted {
		s.limits.refused++
		s.notifyLocked()
	}
	s.mu.Unlock()
	switch {
	case faulted && f.Stored:
		s.serveMethod(method, httptest.NewRecorder(), r)
		s.writeFault(w, f)
	case faulted:
		s.writeFault(w, f)
	case limited:
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		http.Error(w, "rate limited", http.StatusTooManyRequests)
	default:
		s.serveMethod(method, w, r)
	}
}

// serveMethod does what a Web API method does, as the app's token allows.
func (s *Server) serveMethod(method string, w http.ResponseWriter, r *http.Request) {
	if method == "apps.connections.open" {
		s.openConnection(w, r)
		return
	}
	if token(r) != s.BotToken {
		slackError(w, "invalid_auth")
		return
	}
	s.mu.Lock()
	w.Header().Set("X-OAuth-Scopes", strings.Join(s.app.BotScopes, ","))
	s.mu.Unlock()
	if needed := s.neededScope(method, r); needed != "" {
		s.mu.Lock()
		provided := strings.Join(s.app.BotScopes, ",")
		s.mu.Unlock()
		writeJSON(w, map[string]any{"ok": false, "error": "missing_scope", "needed": needed, "provided": provided})
		return
	}
	switch method {
	case "auth.test":
		writeJSON(w, map[string]any{"ok": true, "url": "https://fake.slack.test/", "team": "Fake", "user": "nanohost",
			"team_id": s.TeamID, "user_id": s.BotUserID, "bot_id": s.BotID})
	case "chat.postMessage":
		s.postMessage(w, r)
	case "chat.update":
		s.updateMessage(w, r)
	case "chat.postEphemeral":
		s.postEphemeral(w, r)
	case "conversations.replies":
		s.replies(w, r)
	case "conversations.history":
		s.history(w, r)
	case "usergroups.users.list":
		s.mu.Lock()
		members, ok := s.groups[r.Form.Get("usergroup")]
		s.mu.Unlock()
		if !ok {
			slackError(w, "no_such_subteam")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "users": members})
	case "users.info":
		id := r.Form.Get("user")
		s.mu.Lock()
		name, ok := s.users[id]
		s.mu.Unlock()
		if !ok {
			slackError(w, "user_not_found")
			return
		}
		writeJSON(w, map[string]any{"ok": true, "user": map[string]any{"id": id, "name": strings.ToLower(name),
			"real_name": name, "profile": map[string]any{"display_name": name, "real_name": name}}})
	default:
		slackError(w, "unknown_method")
	}
}

// openConnection is apps.connections.open: a websocket URL for the app
// token, while Socket Mode is on.
func (s *Server) openConnection(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case token(r) != s.AppToken:
		slackError(w, "invalid_auth")
	case !slices.Contains(s.AppTokenScopes, "connections:write"):
		writeJSON(w, map[string]any{"ok": false, "error": "missing_scope", "needed": "connections:write",
			"provided": strings.Join(s.AppTokenScopes, ",")})
	case s.linkOff || !s.app.SocketMode:
		slackError(w, "link_disabled")
	default:
		ticket := s.nextIDLocked("ticket-")
		writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.URL, "http") + "/link/?ticket=" + ticket})
	}
}

// neededScope is the bot scope a call needs and the app lacks ("" if none).
func (s *Server) neededScope(method string, r *http.Request) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var scope string
	switch method {
	case "chat.postMessage", "chat.update", "chat.postEphemeral":
		scope = "chat:write"
	case "conversations.replies", "conversations.history":
		scope = historyScope(s.chans[r.Form.Get("channel")].kind)
	case "usergroups.users.list":
		scope = "usergroups:read"
	case "users.info":
		scope = "users:read"
	}
	if scope == "" || s.app.hasScope(scope) {
		return ""
	}
	return scope
}

func (s *Server) takeFaultLocked(method string) (Fault, bool) {
	for _, key := range []string{method, "*"} {
		if q := s.faults[key]; len(q) > 0 {
			s.faults[key] = q[1:]
			return q[0], true
		}
	}
	return Fault{}, false
}

func (s *Server) writeFault(w http.ResponseWriter, f Fault) {
	switch {
	case f.Drop:
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		http.Error(w, "dropped", http.StatusGatewayTimeout)
	case f.Status == 0:
		slackError(w, f.Error)
	default:
		if f.Status == http.StatusTooManyRequests && f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfter))
		}
		http.Error(w, http.StatusText(f.Status), f.Status)
	}
}

// checkContent applies Slack's limits to a message's text and blocks.
func checkContent(text, blocks string) (code string, details []string) {
	if text == "" && blocks == "" {
		return "no_text", nil
	}
	if textLen(text) > maxTextLen {
		return "msg_too_long", nil
	}
	if blocks != "" {
		if problems := validateBlocks(json.RawMessage(blocks)); len(problems) > 0 {
			return "invalid_blocks", problems
		}
		total := 0
		for _, t := range blockTexts(json.RawMessage(blocks)) {
			total += textLen(t)
		}
		if total > maxBlocksText {
			return "msg_blocks_too_long", []string{fmt.Sprintf("[ERROR] %d characters of text in blocks, more than %d", total, maxBlocksText)}
		}
	}
	return "", nil
}

// content reads a message's text and blocks, answering Slack's error (and
// ok=false) when they break its limits. Such a refusal is also a protocol
// error: an app that sends what Slack refuses shows people less than it
// meant to (or nothing).
func (s *Server) content(w http.ResponseWriter, r *http.Request) (text, blocks string, ok bool) {
	text, blocks = r.Form.Get("text"), r.Form.Get("blocks")
	if code, details := checkContent(text, blocks); code != "" {
		s.mu.Lock()
		s.protocolErrorLocked("%s refused: %s %v", strings.TrimPrefix(r.URL.Path, "/api/"), code, details)
		s.mu.Unlock()
		slackError(w, code, details...)
		return "", "", false
	}
	return text, blocks, true
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	channel, thread := r.Form.Get("channel"), r.Form.Get("thread_ts")
	text, blocks, ok := s.content(w, r)
	if !ok {
		return
	}
	metadata, ok := readMetadata(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	if code := s.postableLocked(channel); code != "" {
		s.mu.Unlock()
		slackError(w, code)
		return
	}
	if thread != "" {
		if root := s.findLocked(channel, thread); root == nil || root.ThreadTS != "" {
			s.mu.Unlock()
			slackError(w, "thread_not_found")
			return
		}
	}
	m := &Message{Channel: channel, TS: s.nextTSLocked(), ThreadTS: thread, User: s.BotUserID, BotID: s.BotID,
		Text: text, Blocks: rawOrNil(blocks), Metadata: metadata, PostedAt: time.Now()}
	s.messages[channel] = append(s.messages[channel], m)
	s.notifyLocked()
	echo := s.EchoBotMessages
	s.mu.Unlock()
	if echo {
		s.sendEvent(map[string]any{"type": "message", "channel": channel, "user": s.BotUserID, "bot_id": s.BotID,
			"text": text, "ts": m.TS, "thread_ts": emptyToNil(thread), "event_ts": m.TS})
	}
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": m.TS,
		"message": map[string]any{"type": "message", "text": text, "ts": m.TS, "thread_ts": emptyToNil(thread), "user": s.BotUserID, "bot_id": s.BotID}})
}

func (s *Server) updateMessage(w http.ResponseWriter, r *http.Request) {
	channel, ts := r.Form.Get("channel"), r.Form.Get("ts")
	text, blocks, ok := s.content(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.findLocked(channel, ts)
	switch {
	case m == nil:
		slackError(w, "message_not_found")
		return
	case m.BotID != s.BotID:
		slackError(w, "cant_update_message")
		return
	}
	m.Revisions = append(m.Revisions, Revision{Text: m.Text, Blocks: m.Blocks, Replaced: time.Now()})
	m.Text, m.Blocks = text, rawOrNil(blocks)
	s.notifyLocked()
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": ts, "text": text})
}

func (s *Server) postEphemeral(w http.ResponseWriter, r *http.Request) {
	channel, user := r.Form.Get("channel"), r.Form.Get("user")
	text, blocks, ok := s.content(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if code := s.postableLocked(channel); code != "" {
		slackError(w, code)
		return
	}
	if _, known := s.users[user]; !known {
		slackError(w, "user_not_in_channel")
		return
	}
	s.eph = append(s.eph, Ephemeral{Channel: channel, User: user, ThreadTS: r.Form.Get("thread_ts"), Text: text,
		Blocks: rawOrNil(blocks), At: time.Now()})
	s.notifyLocked()
	writeJSON(w, map[string]any{"ok": true, "message_ts": s.nextTSLocked()})
}

// readMetadata reads a message's metadata ({"event_type", "event_payload"}),
// answering invalid_metadata_format when it is not that.
func readMetadata(w http.ResponseWriter, r *http.Request) (json.RawMessage, bool) {
	raw := r.Form.Get("metadata")
	if raw == "" {
		return nil, true
	}
	var m struct {
		EventType    string         `json:"event_type"`
		EventPayload map[string]any `json:"event_payload"`
	}
	if err := json.Unmarshal([]byte(raw), &m); err != nil || m.EventType == "" || m.EventPayload == nil {
		slackError(w, "invalid_metadata_format")
		return nil, false
	}
	return json.RawMessage(raw), true
}

// replies is conversations.replies: a thread's root and replies, oldest
// first, paged with limit and cursor, filtered by oldest/latest.
func (s *Server) replies(w http.ResponseWriter, r *http.Request) {
	channel, root := r.Form.Get("channel"), r.Form.Get("ts")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.chans[channel]; !ok {
		slackError(w, "channel_not_found")
		return
	}
	parent := s.findLocked(channel, root)
	if parent == nil || parent.ThreadTS != "" {
		slackError(w, "thread_not_found")
		return
	}
	list := []*Message{parent}
	for _, m := range s.messages[channel] {
		if m.ThreadTS == root {
			list = append(list, m)
		}
	}
	s.writeMessagesLocked(w, r, list)
}

// history is conversations.history: the top-level messages, newest first.
func (s *Server) history(w http.ResponseWriter, r *http.Request) {
	channel := r.Form.Get("channel")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.chans[channel]; !ok {
		slackError(w, "channel_not_found")
		return
	}
	var list []*Message
	for _, m := range slices.Backward(s.messages[channel]) {
		if m.ThreadTS == "" {
			list = append(list, m)
		}
	}
	s.writeMessagesLocked(w, r, list)
}

// writeMessagesLocked answers a page of list as conversations.* does; a
// message's metadata is included only with include_all_metadata.
func (s *Server) writeMessagesLocked(w http.ResponseWriter, r *http.Request, list []*Message) {
	oldest, latest := r.Form.Get("oldest"), r.Form.Get("latest")
	var kept []*Message
	for _, m := range list {
		if (oldest == "" || tsAfter(m.TS, oldest)) && (latest == "" || tsAfter(latest, m.TS)) {
			kept = append(kept, m)
		}
	}
	limit, _ := strconv.Atoi(r.Form.Get("limit"))
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	start, _ := strconv.Atoi(r.Form.Get("cursor"))
	start = min(max(start, 0), len(kept))
	end := min(start+limit, len(kept))
	withMetadata := r.Form.Get("include_all_metadata") == "1" || r.Form.Get("include_all_metadata") == "true"
	out := make([]map[string]any, 0, end-start)
	for _, m := range kept[start:end] {
		msg := map[string]any{"type": "message", "ts": m.TS, "text": m.Text, "user": m.User}
		if m.BotID != "" {
			msg["bot_id"] = m.BotID
		}
		if m.ThreadTS != "" {
			msg["thread_ts"] = m.ThreadTS
		}
		if len(m.Blocks) > 0 {
			msg["blocks"] = m.Blocks
		}
		if withMetadata && len(m.Metadata) > 0 {
			msg["metadata"] = m.Metadata
		}
		out = append(out, msg)
	}
	resp := map[string]any{"ok": true, "messages": out, "has_more": end < len(kept)}
	if end < len(kept) {
		resp["response_metadata"] = map[string]any{"next_cursor": strconv.Itoa(end)}
	}
	writeJSON(w, resp)
}

// tsAfter reports whether Slack timestamp a ("1700000000.000123") is
// later than b (the fraction may be shorter or missing).
func tsAfter(a, b string) bool {
	as, af, _ := strings.Cut(a, ".")
	bs, bf, _ := strings.Cut(b, ".")
	ai, _ := strconv.ParseInt(as, 10, 64)
	bi, _ := strconv.ParseInt(bs, 10, 64)
	if ai != bi {
		return ai > bi
	}
	pad := func(f string) string { return (f + "000000")[:6] }
	return pad(af) > pad(bf)
}

// postableLocked says why the bot cannot post in channel ("" if it can).
func (s *Server) postableLocked(channel string) string {
	if _, ok := s.chans[channel]; !ok {
		return "channel_not_found"
	}
	if !s.botIn[channel] {
		return "not_in_channel"
	}
	return ""
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func emptyToNil(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// validateBlocks checks the Block Kit limits Slack enforces on the block
// types nanohost uses; it returns Slack-style problem descriptions.
func validateBlocks(raw json.RawMessage) []string {
	var blocks []map[string]any
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return []string{"[ERROR] blocks must be a JSON array of objects: " + err.Error()}
	}
	var problems []string
	bad := func(i int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("[ERROR] block %d: ", i)+fmt.Sprintf(format, args...))
	}
	if len(blocks) > 50 {
		problems = append(problems, fmt.Sprintf("[ERROR] %d blocks, more than 50", len(blocks)))
	}
	blockIDs, actionIDs := map[string]bool{}, map[string]bool{}
	for i, b := range blocks {
		if id, ok := b["block_id"].(string); ok {
			if len(id) > 255 || blockIDs[id] {
				bad(i, "block_id %q too long or repeated", id)
			}
			blockIDs[id] = true
		}
		switch b["type"] {
		case "section":
			t, hasText := b["text"].(map[string]any)
			fields, _ := b["fields"].([]any)
			if !hasText && len(fields) == 0 {
				bad(i, "section needs text or fields")
			}
			if hasText {
				checkTextObject(t, 3000, false, func(f string, a ...any) { bad(i, "section text: "+f, a...) })
			}
			if len(fields) > 10 {
				bad(i, "more than 10 fields")
			}
			for _, f := range fields {
				fo, _ := f.(map[string]any)
				checkTextObject(fo, 2000, false, func(f string, a ...any) { bad(i, "field: "+f, a...) })
			}
		case "header":
			t, _ := b["text"].(map[string]any)
			checkTextObject(t, 150, true, func(f string, a ...any) { bad(i, "header: "+f, a...) })
		case "context":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 10 {
				bad(i, "context needs 1 to 10 elements, has %d", len(els))
			}
			for _, e := range els {
				eo, _ := e.(map[string]any)
				checkTextObject(eo, 3000, false, func(f string, a ...any) { bad(i, "context element: "+f, a...) })
			}
		case "actions":
			els, _ := b["elements"].([]any)
			if len(els) == 0 || len(els) > 25 {
				bad(i, "actions needs 1 to 25 elements, has %d", len(els))
			}
			for _, e := range els {
				checkButton(e, actionIDs, func(f string, a ...any) { bad(i, f, a...) })
			}
		case "divider":
		default:
			bad(i, "unsupported block type %v", b["type"])
		}
	}
	return problems
}

func checkTextObject(t map[string]any, max int, plainOnly bool, bad func(string, ...any)) {
	if t == nil {
		bad("missing text object")
		return
	}
	typ, _ := t["type"].(string)
	if typ != "plain_text" && (plainOnly || typ != "mrkdwn") {
		bad("text type %q not allowed", typ)
	}
	// Each flag belongs to one type; Slack refuses it on the other.
	if _, has := t["emoji"]; has && typ != "plain_text" {
		bad("emoji is only allowed on plain_text")
	}
	if _, has := t["verbatim"]; has && typ != "mrkdwn" {
		bad("verbatim is only allowed on mrkdwn")
	}
	text, _ := t["text"].(string)
	if n := textLen(text); n == 0 || n > max {
		bad("text length %d outside 1..%d", n, max)
	}
}

func checkButton(e any, actionIDs map[string]bool, bad func(string, ...any)) {
	el, _ := e.(map[string]any)
	if el["type"] != "button" {
		bad("element type %v is not a button", el["type"])
		return
	}
	t, _ := el["text"].(map[string]any)
	checkTextObject(t, 75, true, func(f string, a ...any) { bad("button text: "+f, a...) })
	id, _ := el["action_id"].(string)
	if id == "" || len(id) > 255 || actionIDs[id] {
		bad("action_id %q empty, too long or repeated", id)
	}
	actionIDs[id] = true
	if v, _ := el["value"].(string); len(v) > 2000 {
		bad("button value longer than 2000")
	}
}
