// Package hooks is POST /hooks/<name>: a signed delivery from outside (a
// GitHub push, an alert) starts a configured pipeline or prompt. It
// verifies the signature (HMAC-SHA256: GitHub's X-Hub-Signature-256, or
// X-Nanohost-Signature with a timestamp at most five minutes old), caps
// the body, rate-limits each hook, filters deliveries and maps payload
// fields to run inputs; what a delivery starts, exactly once per delivery
// id, is the Starter's (the host's). A refusal is a 4xx whose JSON body
// says why. See docs/schedules.md.
package hooks

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"
)

// Hook is one configured webhook.
type Hook struct {
	Name   string
	Secret []byte
	// Inputs map run inputs to payload paths ("repository.full_name").
	Inputs map[string]string
	// When keeps only deliveries whose payload path equals the value.
	When map[string]string
	// PerMinute bounds the deliveries taken (default 30); MaxBytes the
	// body (default 1 MiB).
	PerMinute int
	MaxBytes  int64
}

// Delivery is one verified, accepted delivery.
type Delivery struct {
	Hook string
	// ID is the sender's delivery id (X-GitHub-Delivery,
	// X-Nanohost-Delivery), else one derived from the signed content: a
	// redelivery has the same.
	ID       string
	Inputs   map[string]string
	Received time.Time
}

// Result is what a delivery started.
type Result struct {
	RunID string `json:"run_id,omitempty"`
	// Prompt is set when it gave the group's agent a prompt.
	Prompt bool `json:"prompt,omitempty"`
	// Repeated: this delivery id was seen before; nothing new started.
	Repeated bool `json:"redelivery,omitempty"`
}

// Starter starts what a delivery asks, once per (hook, delivery id).
type Starter interface {
	Start(ctx context.Context, d Delivery) (Result, error)
}

// StarterFunc adapts a function to Starter.
type StarterFunc func(ctx context.Context, d Delivery) (Result, error)

// Start implements Starter.
func (f StarterFunc) Start(ctx context.Context, d Delivery) (Result, error) { return f(ctx, d) }

// Filtered records a delivery the When filter dropped (optional).
type Filtered interface {
	Filtered(ctx context.Context, d Delivery, why string)
}

// Rate bounds the deliveries a hook takes per minute among every replica
// sharing a store (the host's: slots held for a minute, on the database's
// clock). Allow takes one of hook's perMinute slots for the delivery; false
// when every one is held. Without a Rate, each Handler counts its own.
type Rate interface {
	Allow(ctx context.Context, hook, delivery string, perMinute int) (bool, error)
}

// MaxAge is how old an X-Nanohost-Signature timestamp may be (either way).
const MaxAge = 5 * time.Minute

// Handler serves POST /hooks/{name}.
type Handler struct {
	hooks map[string]*hook
	start Starter
	rate  Rate
	now   func() time.Time
	log   *slog.Logger
}

type hook struct {
	Hook
	limit *rate.Limiter
}

// NewHandler serves hooks, starting deliveries through start.
func NewHandler(hooks []Hook, start Starter, now func() time.Time, log *slog.Logger) *Handler {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	h := &Handler{hooks: map[string]*hook{}, start: start, now: now, log: log}
	for _, c := range hooks {
		if c.PerMinute <= 0 {
			c.PerMinute = 30
		}
		if c.MaxBytes <= 0 {
			c.MaxBytes = 1 << 20
		}
		h.hooks[c.Name] = &hook{Hook: c, limit: rate.NewLimiter(rate.Every(time.Minute/time.Duration(c.PerMinute)), c.PerMinute)}
	}
	return h
}

// SharedRate makes every hook's per-minute bound one among the replicas
// (r), checked once a delivery is verified; each Handler still refuses
// more than that many attempts a minute of its own before verifying them,
// so a flood of forged deliveries costs little.
func (h *Handler) SharedRate(r Rate) *Handler {
	h.rate = r
	return h
}

// refusal is a 4xx (or 5xx) with why.
type refusal struct {
	status int
	Error  string `json:"error"`
	Fix    string `json:"fix,omitempty"`
	retry  time.Duration
}

func refuse(status int, msg, fix string) *refusal {
	return &refusal{status: status, Error: msg, Fix: fix}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, ref := h.serve(r)
	if ref != nil {
		if ref.retry > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(ref.retry.Seconds()))))
		}
		h.log.Info("webhook delivery refused", "hook", r.PathValue("name"), "status", ref.status, "why", ref.Error)
		writeJSON(w, ref.status, ref)
		return
	}
	status := http.StatusAccepted
	if res.Repeated || res.Filtered != "" {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
}

// answer is the body of a delivery taken.
type answer struct {
	Delivery string `json:"delivery"`
	Result
	Filtered string `json:"filtered,omitempty"`
}

func (h *Handler) serve(r *http.Request) (answer, *refusal) {
	if r.Method != http.MethodPost {
		return answer{}, refuse(http.StatusMethodNotAllowed, "webhooks take POST", "")
	}
	hk, ok := h.hooks[r.PathValue("name")]
	if !ok {
		return answer{}, refuse(http.StatusNotFound, fmt.Sprintf("no webhook named %q", r.PathValue("name")), "configure it under webhooks: in nanohost.yaml")
	}
	if res := hk.limit.Reserve(); !res.OK() || res.Delay() > 0 {
		wait := res.Delay()
		res.Cancel()
		return answer{}, &refusal{status: http.StatusTooManyRequests, Error: fmt.Sprintf("too many deliveries to %s: at most %d a minute", hk.Name, hk.PerMinute),
			Fix: "retry later", retry: max(wait, time.Second)}
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, hk.MaxBytes))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return answer{}, refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("the body is larger than %d bytes", hk.MaxBytes), "send less, or raise max_bytes for this webhook")
	}
	if err != nil {
		return answer{}, refuse(http.StatusBadRequest, "the body could not be read: "+err.Error(), "")
	}
	id, ref := h.verify(hk, r, body)
	if ref != nil {
		return answer{}, ref
	}
	var payload any
	if err := json.Unmarshal(body, &payload); err != nil {
		return answer{}, refuse(http.StatusBadRequest, "the body is not JSON: "+err.Error(), "send a JSON payload with Content-Type: application/json")
	}
	d := Delivery{Hook: hk.Name, ID: id, Received: h.now()}
	for path, want := range hk.When {
		if got, ok := Lookup(payload, path); !ok || got != want {
			why := fmt.Sprintf("%s is %q, not %q", path, got, want)
			if f, ok := h.start.(Filtered); ok {
				f.Filtered(r.Context(), d, why)
			}
			return answer{Delivery: id, Filtered: why}, nil
		}
	}
	d.Inputs = map[string]string{}
	for key, path := range hk.Inputs {
		v, ok := Lookup(payload, path)
		if !ok {
			return answer{}, refuse(http.StatusUnprocessableEntity, fmt.Sprintf("the payload has no %s (input %s)", path, key), "send it, or change the webhook's inputs mapping")
		}
		d.Inputs[key] = v
	}
	if h.rate != nil {
		ok, err := h.rate.Allow(r.Context(), hk.Name, id, hk.PerMinute)
		if err != nil {
			return answer{}, &refusal{status: http.StatusServiceUnavailable, Error: "the delivery rate could not be checked: " + err.Error(),
				Fix: "retry later", retry: time.Second}
		}
		if !ok {
			return answer{}, &refusal{status: http.StatusTooManyRequests, Error: fmt.Sprintf("too many deliveries to %s: at most %d a minute", hk.Name, hk.PerMinute),
				Fix: "retry later", retry: max(time.Minute/time.Duration(hk.PerMinute), time.Second)}
		}
	}
	res, err := h.start.Start(r.Context(), d)
	if err != nil {
		var busy *BusyError
		if errors.As(err, &busy) {
			return answer{}, &refusal{status: http.StatusConflict, Error: err.Error(), Fix: "retry: the delivery is being started", retry: time.Second}
		}
		return answer{}, refuse(http.StatusUnprocessableEntity, "the delivery could not start anything: "+err.Error(), "")
	}
	return answer{Delivery: id, Result: res}, nil
}

// BusyError is a delivery another replica is starting right now.
type BusyError struct{ Holder string }

func (e *BusyError) Error() string {
	return "another replica (" + e.Holder + ") is starting this delivery"
}

// verify checks the signature and returns the delivery id.
func (h *Handler) verify(hk *hook, r *http.Request, body []byte) (string, *refusal) {
	id := firstHeader(r, "X-GitHub-Delivery", "X-Nanohost-Delivery")
	if sig := r.Header.Get("X-Hub-Signature-256"); sig != "" {
		hexSig, ok := strings.CutPrefix(sig, "sha256=")
		if !ok || !equalMAC(hexSig, mac(hk.Secret, body)) {
			return "", refuse(http.StatusUnauthorized, "X-Hub-Signature-256 does not match the body", "sign with the webhook's secret: sha256=HMAC-SHA256(secret, body) in hex")
		}
		return orDerived(id, body), nil
	}
	if sig := r.Header.Get("X-Nanohost-Signature"); sig != "" {
		ts, v1 := parseSignature(sig)
		t, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || v1 == "" {
			return "", refuse(http.StatusUnauthorized, "X-Nanohost-Signature is not t=<unix seconds>,v1=<hex>", "send t=<unix seconds>,v1=HMAC-SHA256(secret, t + \".\" + body) in hex")
		}
		if !equalMAC(v1, mac(hk.Secret, []byte(ts+"."), body)) {
			return "", refuse(http.StatusUnauthorized, "X-Nanohost-Signature does not match the body", "sign t + \".\" + body with the webhook's secret")
		}
		if age := h.now().Sub(time.Unix(t, 0)); age > MaxAge || age < -MaxAge {
			return "", refuse(http.StatusUnauthorized, fmt.Sprintf("the signature's timestamp is %s off the host's clock; at most %s is taken", age.Round(time.Second), MaxAge), "sign each delivery when it is sent (and keep the sender's clock right)")
		}
		return orDerived(id, []byte(ts+"."), body), nil
	}
	return "", refuse(http.StatusUnauthorized, "the delivery is not signed", "send X-Hub-Signature-256 (GitHub) or X-Nanohost-Signature: t=<unix seconds>,v1=<HMAC-SHA256 hex>")
}

func firstHeader(r *http.Request, names ...string) string {
	for _, n := range names {
		if v := strings.TrimSpace(r.Header.Get(n)); v != "" && len(v) <= 128 {
			return v
		}
	}
	return ""
}

// orDerived is id, or one derived from the signed content (a redelivery
// of the same content is the same delivery).
func orDerived(id string, parts ...[]byte) string {
	if id != "" {
		return id
	}
	s := sha256.New()
	for _, p := range parts {
		s.Write(p)
	}
	return "sha256-" + hex.EncodeToString(s.Sum(nil))[:32]
}

func parseSignature(sig string) (ts, v1 string) {
	for _, part := range strings.Split(sig, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	return ts, v1
}

// mac is HMAC-SHA256(secret, parts…) in hex.
func mac(secret []byte, parts ...[]byte) string {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return hex.EncodeToString(m.Sum(nil))
}

// Sign is the X-Hub-Signature-256 value of body (senders and tests).
func Sign(secret, body []byte) string { return "sha256=" + mac(secret, body) }

// SignAt is the X-Nanohost-Signature value of body sent at t.
func SignAt(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, []byte(ts+"."), body)
}

func equalMAC(got, want string) bool {
	g, err := hex.DecodeString(got)
	if err != nil {
		return false
	}
	w, _ := hex.DecodeString(want)
	return hmac.Equal(g, w)
}

// Lookup is the value at a dotted path of a JSON payload, as text
// (strings as they are, other values as JSON): "repository.full_name",
// "commits.0.id".
func Lookup(payload any, path string) (string, bool) {
	v := payload
	for _, part := range strings.Split(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			next, ok := node[part]
			if !ok {
				return "", false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(node) {
				return "", false
			}
			v = node[i]
		default:
			return "", false
		}
	}
	switch x := v.(type) {
	case string:
		return x, true
	case nil:
		return "", false
	}
	data, err := json.Marshal(v)
	return string(data), err == nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
