//go:build !lean

package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"nanohost/internal/channels/slack"
	"nanohost/internal/config"
	"nanohost/internal/host"
	"nanohost/internal/store"
)

// slackEndpoint builds the Slack adapter from the configuration, with what
// slack.policy allows people there.
func slackEndpoint(cfg *config.Config, claim inboundClaim) (host.Endpoint, func(), error) {
	p := cfg.Slack.Policy
	ch, err := slack.New(slack.Config{
		BotToken: cfg.Slack.BotToken.Reveal(),
		AppToken: cfg.Slack.AppToken.Reveal(),
		APIURL:   cfg.Slack.APIURL,
		Policy: slack.Policy{
			Channels: p.Channels, Starters: p.Starters, Approvers: p.Approvers, PreventSelfApproval: p.PreventSelfApproval,
		},
		Claim:  claim,
		Logger: slog.Default().With("component", "slack"),
	})
	if err != nil {
		return host.Endpoint{}, nil, err
	}
	return host.Endpoint{Channel: ch, Policy: ch.Policy(), MayRegister: ch.MayRegister}, ch.Close, nil
}

// inboundClaim claims an inbound chat envelope once among the replicas.
type inboundClaim = func(ctx context.Context, key string) (first bool, err error)

// inboundClaimTTL is how long an envelope's claim is kept: a chat
// redelivers an event within minutes.
const inboundClaimTTL = 24 * time.Hour

// inboundClaims claims envelopes in the store as replica, pruning the
// claims old enough to be forgotten now and then (at most hourly).
func inboundClaims(ctx context.Context, st *store.Store, replica string, log *slog.Logger) inboundClaim {
	var pruned atomic.Int64 // when, in Unix seconds
	prune := func(ctx context.Context) {
		pruned.Store(time.Now().Unix())
		if n, err := st.PruneInboundClaims(ctx, time.Now().Add(-inboundClaimTTL)); err != nil {
			log.Warn("prune old inbound claims", "err", err)
		} else if n > 0 {
			log.Debug("pruned old inbound claims", "n", n)
		}
	}
	prune(ctx)
	return func(ctx context.Context, key string) (bool, error) {
		if time.Since(time.Unix(pruned.Load(), 0)) > time.Hour {
			prune(ctx)
		}
		return st.ClaimInbound(ctx, key, replica)
	}
}

// consoleMayRegister: the console is the local operator's own terminal.
func consoleMayRegister(context.Context, string, string) error { return nil }
