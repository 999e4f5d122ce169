package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	slackgo "github.com/slack-go/slack"
	"github.com/slack-go/slack/socketmode"
)

// maxAckBytes is Slack's limit on a Socket Mode response: larger ones are
// dropped without a word (slack-go measured it: 20 KB).
const maxAckBytes = 20 * 1024

// writeBufferSize keeps an ack in one websocket frame (Slack does not
// reassemble continuation frames).
const writeBufferSize = 32 * 1024

var errAckTooLarge = errors.New("socket mode response too large for Slack")

// socket is one Socket Mode websocket. It speaks the wire protocol with
// slack-go's types (socketmode.Request in, socketmode.Response out); the
// pool decides when to open and close sockets, which slack-go's own client
// cannot do the way Slack wants (see pool).
type socket struct {
	id  int
	ws  *websocket.Conn
	wmu sync.Mutex

	closeOnce sync.Once
}

// openSocket asks Slack for a websocket URL (apps.connections.open, with
// the app-level token) and dials it.
func openSocket(ctx context.Context, api *slackgo.Client, id int) (*socket, error) {
	_, url, err := api.StartSocketModeContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("apps.connections.open: %w", err)
	}
	dialer := websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 30 * time.Second, WriteBufferSize: writeBufferSize}
	ws, resp, err := dialer.DialContext(ctx, url, http.Header{"Origin": {"https://api.slack.com"}})
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("dial the socket mode websocket: %w", err)
	}
	return &socket{id: id, ws: ws}, nil
}

// read reads requests until the connection fails, handing each to on. Any
// frame or ping from Slack (it pings every few seconds) proves the
// connection alive; silence for pingTimeout ends it.
func (s *socket) read(pingTimeout time.Duration, on func(req socketmode.Request, raw json.RawMessage)) error {
	alive := func() { _ = s.ws.SetReadDeadline(time.Now().Add(pingTimeout)) }
	alive()
	s.ws.SetPingHandler(func(data string) error {
		alive()
		s.wmu.Lock()
		defer s.wmu.Unlock()
		err := s.ws.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(10*time.Second))
		var netErr net.Error
		if errors.Is(err, websocket.ErrCloseSent) || errors.As(err, &netErr) && netErr.Timeout() {
			return nil // the read loop notices a dead connection
		}
		return err
	})
	for {
		_, data, err := s.ws.ReadMessage()
		if err != nil {
			return err
		}
		alive()
		var req socketmode.Request
		if err := json.Unmarshal(data, &req); err != nil {
			req = socketmode.Request{Type: "unreadable"}
		}
		on(req, data)
	}
}

// ack acknowledges an envelope, with an optional response payload.
func (s *socket) ack(envelopeID string, payload any) error {
	data, err := json.Marshal(socketmode.Response{EnvelopeID: envelopeID, Payload: payload})
	if err != nil {
		return fmt.Errorf("encode ack: %w", err)
	}
	if len(data) >= maxAckBytes {
		return errAckTooLarge
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return s.ws.WriteMessage(websocket.TextMessage, data)
}

func (s *socket) close() {
	s.closeOnce.Do(func() { _ = s.ws.Close() })
}
