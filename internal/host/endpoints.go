package host

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"nanohost/internal/channels"
	"nanohost/internal/config"
	"nanohost/internal/runs"
)

// Endpoint is one way people reach the host: a chat transport with what
// its people may do there, from configuration (never from the transport's
// type).
type Endpoint struct {
	Channel channels.Channel
	// Policy decides who may start, cancel and resume runs and answer gates.
	Policy runs.Policy
	// MayRegister decides who may register groups from the main group's
	// chat; nil: nobody may there.
	MayRegister func(ctx context.Context, user, chat string) error
}

// endpoints are the host's chat endpoints and their connection states.
type endpoints struct {
	list    []Endpoint
	metrics *Metrics
	log     *slog.Logger

	mu    sync.Mutex
	state map[string]channels.Connection // channel name → connected / disconnected / stopped
}

// stopped is the state of a channel whose Run has ended for good.
const stopped channels.Connection = "stopped"

func newEndpoints(list []Endpoint, m *Metrics, log *slog.Logger) *endpoints {
	return &endpoints{list: list, metrics: m, log: log, state: map[string]channels.Connection{}}
}

func (e *endpoints) channels() []channels.Channel {
	out := make([]channels.Channel, len(e.list))
	for i, ep := range e.list {
		out[i] = ep.Channel
	}
	return out
}

func (e *endpoints) has(name string) bool {
	_, ok := e.named(name)
	return ok
}

func (e *endpoints) named(name string) (Endpoint, bool) {
	for _, ep := range e.list {
		if ep.Channel.Name() == name {
			return ep, true
		}
	}
	return Endpoint{}, false
}

// channelFor returns the channel that owns chat.
func (e *endpoints) channelFor(chat string) (channels.Channel, error) {
	for _, ep := range e.list {
		if ep.Channel.Owns(chat) {
			return ep.Channel, nil
		}
	}
	return nil, fmt.Errorf("no channel of this host serves chat %q (is Slack configured?)", chat)
}

// policies are the runs service's policies: each chat endpoint's own, the
// dashboard's operators and the agents' IPC.
func (e *endpoints) policies(cfg *config.Config) runs.Policies {
	ps := runs.Policies{
		endpointWeb: runs.Operators{PreventSelfApproval: cfg.Slack.Policy.PreventSelfApproval},
		endpointIPC: runs.Agents{},
		// Scheduled tasks and webhooks were authorized when made (or
		// configured); like agents, they never answer gates.
		endpointSchedule: runs.Agents{},
	}
	for _, ep := range e.list {
		ps[ep.Channel.Name()] = ep.Policy
	}
	return ps
}

// The endpoints that are not chat transports.
const (
	endpointWeb = "web"
	endpointIPC = "ipc"
)

// registrar is who decides /register on the named channel.
func (e *endpoints) registrar(name string) func(ctx context.Context, user, chat string) error {
	if ep, ok := e.named(name); ok && ep.MayRegister != nil {
		return ep.MayRegister
	}
	return func(context.Context, string, string) error {
		return fmt.Errorf("%s cannot tell who may register groups, so nobody may there: use the main group's Slack channel or the console", name)
	}
}

// run runs every channel until ctx ends, handing what each delivers to handle.
func (e *endpoints) run(ctx context.Context, wg *sync.WaitGroup, handle func(context.Context, channels.Channel, channels.Inbound)) {
	for _, ep := range e.list {
		ch := ep.Channel
		wg.Go(func() { e.runChannel(ctx, ch, handle) })
	}
}

// runChannel runs one channel, reconnecting with backoff when it fails.
func (e *endpoints) runChannel(ctx context.Context, ch channels.Channel, handle func(context.Context, channels.Channel, channels.Inbound)) {
	backoff := time.Second
	for ctx.Err() == nil {
		runCtx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() { defer close(watched); e.watch(runCtx, ch) }()
		err := ch.Run(ctx, func(in channels.Inbound) { handle(ctx, ch, in) })
		stopWatch()
		<-watched
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			// The channel ended on its own (the console's input closed):
			// nothing to reconnect to. Runs keep going; their events wait
			// in the store.
			e.log.Info("channel ended", "channel", ch.Name())
			break
		}
		e.set(ch.Name(), connection(ch, channels.Disconnected))
		e.log.Warn("channel stopped; reconnecting", "channel", ch.Name(), "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
		}
		backoff = min(backoff*2, time.Minute)
	}
	e.set(ch.Name(), stopped)
}

// watch follows a channel's connection while its Run is going: what the
// transport reports, or connected when it reports nothing.
func (e *endpoints) watch(ctx context.Context, ch channels.Channel) {
	if ch.Capabilities().Connection == nil {
		e.set(ch.Name(), channels.Connected)
		return
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		e.set(ch.Name(), connection(ch, channels.Connected))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// connection is a channel's state for /healthz: what the transport says
// (connecting, invalid_auth, missing_scope, link_disabled… — also after its
// Run gave up), else otherwise.
func connection(ch channels.Channel, otherwise channels.Connection) channels.Connection {
	if conn := ch.Capabilities().Connection; conn != nil {
		return conn()
	}
	return otherwise
}

func (e *endpoints) set(name string, state channels.Connection) {
	e.mu.Lock()
	e.state[name] = state
	e.mu.Unlock()
	v := 0.0
	if state == channels.Connected {
		v = 1
	}
	e.metrics.ChannelConnected.WithLabelValues(name).Set(v)
}

func (e *endpoints) states() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]string, len(e.state))
	for k, v := range e.state {
		out[k] = string(v)
	}
	return out
}
