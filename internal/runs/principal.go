package runs

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Principal is who asks for something, and through which endpoint.
type Principal struct {
	// Endpoint is where the request came in: "slack", "console", "web",
	// "ipc". Each has its own Policy, from configuration.
	Endpoint string
	// User is who, as recorded (StartedBy, AnsweredBy): a Slack user id,
	// "console", "web:<name>", "agent:<group>".
	User string
	// Chat is the chat the request came from ("" for the web and IPC).
	// A chat answer must come from the chat its gate was asked in.
	Chat string
}

func (p Principal) String() string { return p.Endpoint + ":" + p.User }

// Policy decides what principals of one endpoint may do. Each endpoint has
// its own, built from configuration (slack.policy, the console's local
// operator, the dashboard's operators): never from the transport's type.
// A refusal is an error whose text is shown to the person.
type Policy interface {
	// MayControl decides whether who may start, cancel or resume runs in chat.
	MayControl(ctx context.Context, who Principal, chat string) error
	// MayAnswer decides whether who may answer gate g of run with the
	// option at 1-based position option (0: free text).
	MayAnswer(ctx context.Context, who Principal, run Run, g Gate, option int) error
}

// Policies maps an endpoint name to its policy. An endpoint without one
// may do nothing (deny by default).
type Policies map[string]Policy

func (ps Policies) of(who Principal) (Policy, error) {
	if p, ok := ps[who.Endpoint]; ok && p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: requests through %q are not accepted here", ErrNotAllowed, who.Endpoint)
}

// LocalOperator is the console's policy: whoever sits at the host's own
// terminal runs it, and may do anything there — but only as themselves.
type LocalOperator struct{ User string }

// MayControl implements Policy.
func (l LocalOperator) MayControl(_ context.Context, who Principal, _ string) error {
	return l.self(who)
}

// MayAnswer implements Policy.
func (l LocalOperator) MayAnswer(_ context.Context, who Principal, _ Run, _ Gate, _ int) error {
	return l.self(who)
}

func (l LocalOperator) self(who Principal) error {
	if l.User != "" && who.User != l.User {
		return fmt.Errorf("%w: only the person at the console acts there", ErrNotAllowed)
	}
	return nil
}

// Operators is the dashboard's policy: its users hold the host's token (or
// sit at its loopback) and run the host. They may start and cancel runs and
// answer gates — unless a gate names its approvers (chat users the
// dashboard cannot vouch for), or they started the run and self-approval is
// off.
type Operators struct{ PreventSelfApproval bool }

// MayControl implements Policy.
func (Operators) MayControl(context.Context, Principal, string) error { return nil }

// MayAnswer implements Policy.
func (o Operators) MayAnswer(_ context.Context, who Principal, run Run, g Gate, _ int) error {
	if strings.TrimSpace(g.Approvers) != "" {
		return fmt.Errorf("%w: this gate names its approvers (%s); one of them has to answer it in the chat", ErrNotAllowed, g.Approvers)
	}
	if o.PreventSelfApproval && run.StartedBy != "" && run.StartedBy == who.User {
		return fmt.Errorf("%w: you started this run, and self-approval is turned off (prevent_self_approval): someone else has to answer", ErrNotAllowed)
	}
	return nil
}

// Agents is the IPC endpoint's policy: an agent's request was authorized
// for its group by the IPC layer (ipc.Authorize) before it got here, so it
// may control runs; agents never answer gates (a person decides).
type Agents struct{}

// MayControl implements Policy.
func (Agents) MayControl(context.Context, Principal, string) error { return nil }

// MayAnswer implements Policy.
func (Agents) MayAnswer(context.Context, Principal, Run, Gate, int) error {
	return fmt.Errorf("%w: agents do not answer human gates", ErrNotAllowed)
}

// PolicyFuncs adapts two functions to Policy (nil allows).
type PolicyFuncs struct {
	Control func(ctx context.Context, who Principal, chat string) error
	Answer  func(ctx context.Context, who Principal, run Run, g Gate, option int) error
}

// MayControl implements Policy.
func (f PolicyFuncs) MayControl(ctx context.Context, who Principal, chat string) error {
	if f.Control == nil {
		return nil
	}
	return notAllowed(f.Control(ctx, who, chat))
}

// MayAnswer implements Policy.
func (f PolicyFuncs) MayAnswer(ctx context.Context, who Principal, run Run, g Gate, option int) error {
	if f.Answer == nil {
		return nil
	}
	return notAllowed(f.Answer(ctx, who, run, g, option))
}

// notAllowed makes a policy's refusal an ErrNotAllowed (keeping its text).
func notAllowed(err error) error {
	if err == nil || errors.Is(err, ErrNotAllowed) {
		return err
	}
	return &refusal{err}
}

type refusal struct{ err error }

func (r *refusal) Error() string   { return r.err.Error() }
func (r *refusal) Unwrap() []error { return []error{ErrNotAllowed, r.err} }
