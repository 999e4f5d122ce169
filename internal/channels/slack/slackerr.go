package slack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	slackgo "github.com/slack-go/slack"
)

// failure is what a failed Web API call means for whoever made it.
type failure int

const (
	// failRefused: Slack refused the call; trying again changes nothing.
	failRefused failure = iota
	// failAuth: Slack refused the token (the configuration must change).
	failAuth
	// failScope: the token lacks a scope (the app must be reinstalled).
	failScope
	// failLinkDisabled: Socket Mode is turned off in the app's settings.
	failLinkDisabled
	// failRateLimited: not done; try again after the wait Slack asked for.
	failRateLimited
	// failUnavailable: not done (the request never reached Slack, or Slack
	// said it did nothing); try again after a backoff.
	failUnavailable
	// failAmbiguous: Slack may have done it (a 5xx, a timeout, fatal_error:
	// "some aspect of the operation may have succeeded"). A post must be
	// looked for before it is sent again.
	failAmbiguous
	// failCanceled: the caller gave up.
	failCanceled
)

// authErrors are the answers that mean the token itself was refused.
var authErrors = map[string]bool{
	"invalid_auth": true, "not_authed": true, "account_inactive": true, "token_revoked": true,
	"token_expired": true, "not_allowed_token_type": true,
}

// classify says what err, from a call made with ctx, means, and how long
// Slack asked to wait (0 when it did not say). A deadline that is not
// ctx's is the HTTP client's timeout: the request may have landed.
func classify(ctx context.Context, err error) (failure, time.Duration) {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return failCanceled, 0
	}
	var rl *slackgo.RateLimitedError
	if errors.As(err, &rl) {
		return failRateLimited, rl.RetryAfter
	}
	var status slackgo.StatusCodeError
	if errors.As(err, &status) {
		switch {
		case status.Code == http.StatusTooManyRequests: // without Retry-After
			return failRateLimited, 0
		case status.Code >= 500 || status.Code == http.StatusRequestTimeout:
			return failAmbiguous, 0
		}
		return failRefused, 0
	}
	var slackErr slackgo.SlackErrorResponse
	if errors.As(err, &slackErr) {
		switch code := slackErr.Err; {
		case authErrors[code]:
			return failAuth, 0
		case code == "missing_scope":
			return failScope, 0
		case code == "link_disabled":
			return failLinkDisabled, 0
		case code == "ratelimited" || code == "rate_limited":
			return failRateLimited, 0
		case code == "fatal_error" || code == "internal_error" || code == "service_unavailable":
			return failAmbiguous, 0
		case code == "request_timeout": // the POST body did not arrive whole
			return failUnavailable, 0
		}
		return failRefused, 0
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return failUnavailable, 0 // never sent
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) {
		return failAmbiguous, 0 // sent, answer lost: it may have landed
	}
	return failRefused, 0
}

// retryable reports whether a call that failed this way is worth trying
// again.
func (f failure) retryable() bool {
	return f == failRateLimited || f == failUnavailable || f == failAmbiguous
}

// scopeError is a missing_scope answer explained: which scope, and how to
// get it.
func scopeError(method string, err error) error {
	var slackErr slackgo.SlackErrorResponse
	needed := "a scope"
	if errors.As(err, &slackErr) && slackErr.Needed != "" {
		needed = "the " + slackErr.Needed + " scope"
	}
	return fmt.Errorf("%s needs %s, which the bot token lacks (%w): add it under OAuth & Permissions (docs/slack-app-manifest.yaml lists every scope nanohost uses) and reinstall the app", method, needed, err)
}
