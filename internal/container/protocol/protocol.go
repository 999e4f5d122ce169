// Package protocol is the wire contract between the host and the nanoagent
// runner inside an agent container (docs/agent-protocol.md). Both sides
// import it, so it stays a leaf: no Docker, no engine.
//
// In short: the first request arrives on the container's stdin as one JSON
// object carrying a per-container nonce and the secrets; follow-up requests
// arrive as files in the mounted IPC input directory, written atomically;
// every result goes to stdout between two marker lines carrying a tag that
// only a holder of the nonce can compute. The host accepts only the result
// whose dispatch id it is waiting for.
package protocol

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Version is the protocol version a request carries; the runner refuses
// requests from a newer host so a stale image fails with a clear error.
const Version = 1

// Paths inside the container.
const (
	// WorkspaceDir is where the group's workspace is mounted (the working directory).
	WorkspaceDir = "/workspace/group"
	// IPCDir is the per-container IPC directory.
	IPCDir = "/workspace/ipc"
	// InputDir receives follow-up requests as <dispatch_id>.json, and CloseFile.
	InputDir = IPCDir + "/input"
	// OutcomeDir is where an agent may write <dispatch_id>.json, a status file
	// in the Appendix C layout.
	OutcomeDir = IPCDir + "/outcome"
	// ScriptPath is where a script file is mounted read-only in script mode.
	ScriptPath = "/nanohost/script.json"
	// GatewaySocket is where the host's model gateway socket is mounted
	// (Request.Gateway "unix:" + GatewaySocket).
	GatewaySocket = "/nanohost/gateway.sock"
	// EgressSocket is where the host's egress proxy socket is mounted.
	EgressSocket = "/nanohost/egress.sock"
	// EnvGatewayToken carries the container's gateway token in the
	// secrets: the runner writes it into the egress proxy's URL.
	EnvGatewayToken = "NANOHOST_GATEWAY_TOKEN"
)

// CloseFile, written into InputDir, tells the runner to finish and exit.
const CloseFile = "_close"

// Environment variables the runner gives the agent process (never the container).
const (
	EnvDispatchID  = "NANOHOST_DISPATCH_ID"
	EnvNodeID      = "NANOHOST_NODE_ID"
	EnvOutcomeFile = "NANOHOST_OUTCOME_FILE"
)

// Result statuses.
const (
	StatusSuccess = "success"
	StatusError   = "error"
)

// Request is one prompt for the agent.
type Request struct {
	Version    int    `json:"v"`
	DispatchID int64  `json:"dispatch_id"`
	NodeID     string `json:"node_id"`
	// Execution is the 1-based count of dispatches for NodeID in the run,
	// which script mode uses to pick the n-th response. 0 lets the runner
	// use its own counter.
	Execution       int    `json:"execution,omitempty"`
	Prompt          string `json:"prompt"`
	Model           string `json:"model,omitempty"`
	Provider        string `json:"provider,omitempty"`
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
	// Workdir is the directory, relative to the workspace, the agent works
	// in ("" for the workspace): a manager loop's stack.child_workdir. The
	// runner refuses one that leaves the workspace.
	Workdir string `json:"workdir,omitempty"`
	// ToolHooks are shell commands the agent runs around each of its tool
	// calls (tool_hooks.pre/post, spec §9.7), when it has hooks (Claude Code).
	ToolHooks *ToolHooks `json:"tool_hooks,omitempty"`
	// SessionID asks the agent to resume that conversation.
	SessionID string `json:"session_id,omitempty"`
	// ForkSession resumes SessionID as a new conversation forked from it
	// (Claude Code's --fork-session): the agent answers with the fork's
	// session id and the original conversation is left as it was. A group's
	// agent's pipeline continues its chat this way (docs/semantics.md).
	ForkSession bool `json:"fork_session,omitempty"`
	// Once makes the runner exit after answering this request (a fresh,
	// single-node container) instead of waiting for follow-ups.
	Once bool `json:"once,omitempty"`

	// Nonce and Secrets only ever travel on stdin in the first request:
	// never in a file, an argument, the environment or a label.
	Nonce   string            `json:"nonce,omitempty"`
	Secrets map[string]string `json:"secrets,omitempty"`

	// Gateway, in the first request, is how the agent reaches its model
	// API through the host's gateway: "unix:<path>" (a socket mounted into
	// the container: the runner relays to it from a loopback port) or an
	// http URL (used as is). The runner points ANTHROPIC_BASE_URL and
	// OPENAI_BASE_URL there; the secrets then hold the gateway's token,
	// never a real key. "" = no gateway.
	Gateway string `json:"gateway,omitempty"`
	// Egress, in the first request, is the host's egress proxy for the
	// allowed hosts (runtime.egress.allow), in the same forms as Gateway:
	// the runner points HTTP_PROXY and HTTPS_PROXY there, with the token
	// (EnvGatewayToken) as the proxy password. "" = no way out.
	Egress string `json:"egress,omitempty"`

	// Transport, in the first request, is TransportStream for a container
	// that shares no filesystem with the host (stream.go); "" = files.
	Transport string `json:"transport,omitempty"`
	// Script, in the first request of a script-mode agent on the stream
	// transport, is the script itself (there is no file to mount).
	Script []byte `json:"script,omitempty"`
}

// Usage is what one agent call cost.
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CostUSD      float64 `json:"cost_usd"`
}

// Result is the runner's answer to one request.
type Result struct {
	DispatchID int64  `json:"dispatch_id"`
	Status     string `json:"status"`
	Result     string `json:"result"`
	SessionID  string `json:"session_id,omitempty"`
	Usage      Usage  `json:"usage"`
	Error      string `json:"error,omitempty"`
	// Transient marks an error that a retry may fix (rate limit, overload).
	Transient bool `json:"transient,omitempty"`
	// Truncated says Result was cut to the runner's size cap.
	Truncated bool `json:"truncated,omitempty"`
	// OutcomeFile is the status file the agent wrote for this dispatch, on
	// the stream transport (the host cannot read the container's files);
	// OutcomeError says why the runner could not read one that is there.
	OutcomeFile  []byte `json:"outcome_file,omitempty"`
	OutcomeError string `json:"outcome_error,omitempty"`
	// Hooks are the tool hooks that ran during the dispatch, in order
	// (at most MaxHookRuns; Output bounded to MaxHookOutput).
	Hooks []HookRun `json:"hooks,omitempty"`
}

// ToolHooks are the commands run before and after each tool call.
type ToolHooks struct {
	Pre  string `json:"pre,omitempty"`
	Post string `json:"post,omitempty"`
}

// HookRun is one run of a tool hook.
type HookRun struct {
	Phase    string `json:"phase"` // pre or post
	Tool     string `json:"tool,omitempty"`
	ExitCode int    `json:"exit_code"`
	// Blocked says a pre-hook's failure skipped the tool call.
	Blocked bool   `json:"blocked,omitempty"`
	Output  string `json:"output,omitempty"`
}

// Bounds on what a dispatch reports of its tool hooks.
const (
	MaxHookRuns   = 200
	MaxHookOutput = 2048
)

// NewNonce returns a fresh random nonce (128 bits, hex).
func NewNonce() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err)) // unrecoverable: the OS has no entropy source
	}
	return hex.EncodeToString(b[:])
}

// ResultTag authenticates the result of one dispatch: the first 128 bits of
// HMAC-SHA256(nonce, "result:<dispatch_id>"), hex. The nonce itself never
// appears on stdout, and a tag seen on stdout is worthless for any other
// dispatch, so a process that snoops the container's stdout still cannot
// forge a result.
func ResultTag(nonce string, dispatchID int64) string {
	mac := hmac.New(sha256.New, []byte(nonce))
	mac.Write([]byte("result:" + strconv.FormatInt(dispatchID, 10)))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

const (
	startPrefix  = "---NANOHOST-RESULT-START "
	endPrefix    = "---NANOHOST-RESULT-END "
	markerSuffix = "---"
)

// StartMarker and EndMarker are the lines framing a result on stdout.
func StartMarker(tag string) string { return startPrefix + tag + markerSuffix }

// EndMarker closes a result block.
func EndMarker(tag string) string { return endPrefix + tag + markerSuffix }

// WriteResult frames r on w: a newline (ending any partial line something
// else left on the shared stdout), start marker, one line of JSON, end
// marker. json.Marshal escapes newlines, so nothing in r can start a line
// of its own.
func WriteResult(w io.Writer, nonce string, r Result) error {
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result %d: %w", r.DispatchID, err)
	}
	tag := ResultTag(nonce, r.DispatchID)
	var sb strings.Builder
	sb.Grow(len(body) + 2*len(StartMarker(tag)) + 4)
	sb.WriteByte('\n')
	sb.WriteString(StartMarker(tag))
	sb.WriteByte('\n')
	sb.Write(body)
	sb.WriteByte('\n')
	sb.WriteString(EndMarker(tag))
	sb.WriteByte('\n')
	_, err = io.WriteString(w, sb.String())
	return err
}

// InputFile is the content of a follow-up request file: the request and a
// tag that only a holder of the nonce can compute. The agent can write into
// the input directory too; without the tag it could plant the next
// dispatch's request and have the runner answer a prompt of its choosing.
type InputFile struct {
	Auth    string          `json:"auth"`
	Request json.RawMessage `json:"request"`
}

// ErrUnauthenticated marks an input file that the host did not write.
var ErrUnauthenticated = errors.New("request file not written by the host (missing or wrong auth tag)")

// RequestTag authenticates a request file's body: HMAC-SHA256(nonce,
// "request:" + body), hex. The tag covers the exact bytes, so nothing in
// the request can be changed, and it differs from every result tag.
func RequestTag(nonce string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(nonce))
	mac.Write([]byte("request:"))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// EncodeInputFile is the file the host writes for a follow-up request.
func EncodeInputFile(nonce string, req Request) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request %d: %w", req.DispatchID, err)
	}
	return json.Marshal(InputFile{Auth: RequestTag(nonce, body), Request: body})
}

// DecodeInputFile checks a request file's tag and returns its request. An
// error wrapping ErrUnauthenticated means the host did not write the file.
func DecodeInputFile(nonce string, data []byte) (Request, error) {
	var f InputFile
	var req Request
	if err := json.Unmarshal(data, &f); err != nil || len(f.Request) == 0 {
		return req, ErrUnauthenticated
	}
	if !hmac.Equal([]byte(f.Auth), []byte(RequestTag(nonce, f.Request))) {
		return req, ErrUnauthenticated
	}
	if err := json.Unmarshal(f.Request, &req); err != nil {
		return req, fmt.Errorf("invalid request JSON: %w", err)
	}
	return req, nil
}

// InputFileName is the name of the follow-up request file for a dispatch.
func InputFileName(dispatchID int64) string {
	return strconv.FormatInt(dispatchID, 10) + ".json"
}

// OutcomeFileName is the name of the status file for a dispatch.
func OutcomeFileName(dispatchID int64) string { return InputFileName(dispatchID) }

// ParseInputFileName returns the dispatch id of an input file name, or false
// for anything else (temp files, CloseFile, junk an agent left there).
func ParseInputFileName(name string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(stem, 10, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return id, true
}
