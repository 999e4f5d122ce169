package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"

	"nanohost/internal/container/protocol"
)

// Where the agent finds its model API when the host runs a model gateway
// (docs/agent-protocol.md, "The model gateway").
const (
	anthropicPath = "/anthropic"
	openAIPath    = "/openai/v1"
)

// gatewayEnv starts reaching the host's model gateway (and egress proxy)
// as the first request says — a mounted socket relayed from a loopback
// port, or a URL — and returns the environment the agent's SDKs and tools
// read: the base URLs, and the proxy with the token as its password. The
// relays live as long as ctx.
func gatewayEnv(ctx context.Context, req protocol.Request, log *slog.Logger) (map[string]string, error) {
	if req.Gateway == "" {
		return nil, nil
	}
	base, err := reach(ctx, req.Gateway, log)
	if err != nil {
		return nil, fmt.Errorf("model gateway: %w", err)
	}
	env := map[string]string{
		"ANTHROPIC_BASE_URL": base + anthropicPath,
		"OPENAI_BASE_URL":    base + openAIPath,
		// Nothing but the model is reachable: Claude Code need not try.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
	if req.Egress != "" {
		proxy, err := reach(ctx, req.Egress, log)
		if err != nil {
			return nil, fmt.Errorf("egress proxy: %w", err)
		}
		u, err := url.Parse(proxy)
		if err != nil {
			return nil, fmt.Errorf("egress proxy: %w", err)
		}
		u.User = url.UserPassword(gatewayEgressUser, req.Secrets[protocol.EnvGatewayToken])
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = u.String()
		}
		// The gateway's loopback relay is reached directly.
		env["NO_PROXY"], env["no_proxy"] = "127.0.0.1,localhost", "127.0.0.1,localhost"
	}
	return env, nil
}

// gatewayEgressUser is the proxy user name the host expects (gateway.EgressUser).
const gatewayEgressUser = "nanohost"

// reach returns an http base URL for where: a URL as is, or a loopback
// port relayed to a unix socket ("unix:<path>").
func reach(ctx context.Context, where string, log *slog.Logger) (string, error) {
	if socket, ok := strings.CutPrefix(where, "unix:"); ok {
		addr, err := relayToSocket(ctx, socket, log)
		if err != nil {
			return "", err
		}
		return "http://" + addr, nil
	}
	if !strings.HasPrefix(where, "http://") && !strings.HasPrefix(where, "https://") {
		return "", fmt.Errorf("%q: want unix:<socket> or an http(s) URL", where)
	}
	return strings.TrimRight(where, "/"), nil
}

// relayToSocket listens on a loopback port and pipes every connection to
// the gateway's unix socket: the container needs no network at all to
// reach the host's gateway, and nothing else.
func relayToSocket(ctx context.Context, socket string, log *slog.Logger) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go pipeTo(c, socket, log)
		}
	}()
	return l.Addr().String(), nil
}

func pipeTo(c net.Conn, socket string, log *slog.Logger) {
	defer c.Close()
	up, err := net.Dial("unix", socket)
	if err != nil {
		log.Warn("model gateway unreachable", "err", err)
		return
	}
	defer up.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, c)
		up.(*net.UnixConn).CloseWrite()
	})
	io.Copy(c, up)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.CloseWrite()
	}
	wg.Wait()
}
