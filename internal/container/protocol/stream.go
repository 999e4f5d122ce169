package protocol

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// The stream transport (docs/agent-protocol.md, "Stream transport") is for
// containers that share no filesystem with the host — a Kubernetes pod on
// another node. Everything that the file transport carries through the
// mounted IPC directory travels over the container's attach stream instead:
//
//   - host → runner, on stdin after the first request: one Frame per line
//     (follow-up requests, the close request, answers to the agent's IPC
//     requests), each authenticated with the nonce like a request file;
//   - runner → host, on stdout: results as before (the status file of the
//     dispatch rides along in Result.OutcomeFile), and the agent's IPC
//     requests between IPC markers whose tag authenticates their sequence
//     number, so a replayed or forged block is refused.

// TransportStream in Request.Transport selects the stream transport.
const TransportStream = "stream"

// StreamVersion is the protocol version of a first request that asks for
// the stream transport: a runner that predates it refuses the request with
// "rebuild the agent image" instead of waiting for files that never come.
const StreamVersion = 2

// Frame kinds (host → runner).
const (
	FrameRequest     = "request"      // a follow-up request
	FrameClose       = "close"        // finish pending work and exit
	FrameIPCResponse = "ipc_response" // the host's answer to an IPC request
)

// FrameBody is what a stdin frame carries.
type FrameBody struct {
	Kind    string   `json:"kind"`
	Request *Request `json:"request,omitempty"`
	IPC     *IPCFile `json:"ipc,omitempty"`
}

// IPCFile is one file of the IPC queues relayed over the stream: a request
// the agent wrote into /workspace/ipc/<dir>/ (tasks, messages), or the
// host's answer for /workspace/ipc/responses/.
type IPCFile struct {
	// Seq numbers the runner's IPC blocks from 1; the host refuses one that
	// does not increase (a replay).
	Seq  int64  `json:"seq,omitempty"`
	Dir  string `json:"dir"`
	Name string `json:"name"`
	Data []byte `json:"data"`
}

// ipcFileName is what a relayed file may be called: a request id and
// .json, never a path (see ipc.ValidRequestID).
var ipcFileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.json$`)

// ValidIPCFileName reports whether name is a plain request file name.
func ValidIPCFileName(name string) bool {
	return ipcFileName.MatchString(name) && !strings.Contains(name, "..")
}

// EncodeFrame is one stdin line: {"auth": tag, "body": …}\n, the tag being
// RequestTag over the body's exact bytes.
func EncodeFrame(nonce string, body FrameBody) ([]byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s frame: %w", body.Kind, err)
	}
	line, err := json.Marshal(InputFile{Auth: RequestTag(nonce, b), Request: b})
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// DecodeFrame checks a stdin line's tag and returns its body. An error
// wrapping ErrUnauthenticated means the host did not write it.
func DecodeFrame(nonce string, line []byte) (FrameBody, error) {
	var f InputFile
	var body FrameBody
	if err := json.Unmarshal(line, &f); err != nil || len(f.Request) == 0 {
		return body, ErrUnauthenticated
	}
	if !hmac.Equal([]byte(f.Auth), []byte(RequestTag(nonce, f.Request))) {
		return body, ErrUnauthenticated
	}
	if err := json.Unmarshal(f.Request, &body); err != nil {
		return body, fmt.Errorf("invalid frame JSON: %w", err)
	}
	return body, nil
}

// IPCTag authenticates the runner's IPC block number seq: the first 128
// bits of HMAC-SHA256(nonce, "ipc:<seq>"), hex — distinct from every
// result and request tag.
func IPCTag(nonce string, seq int64) string {
	mac := hmac.New(sha256.New, []byte(nonce))
	mac.Write([]byte("ipc:" + strconv.FormatInt(seq, 10)))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

const (
	ipcStartPrefix = "---NANOHOST-IPC-START "
	ipcEndPrefix   = "---NANOHOST-IPC-END "
)

// WriteIPC frames an IPC file on w like WriteResult frames a result.
func WriteIPC(w io.Writer, nonce string, f IPCFile) error {
	body, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode IPC file %s: %w", f.Name, err)
	}
	tag := IPCTag(nonce, f.Seq)
	var sb strings.Builder
	sb.WriteString("\n" + ipcStartPrefix + tag + markerSuffix + "\n")
	sb.Write(body)
	sb.WriteString("\n" + ipcEndPrefix + tag + markerSuffix + "\n")
	_, err = io.WriteString(w, sb.String())
	return err
}
