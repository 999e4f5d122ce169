package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
)

// Where the agent finds its model API when the host runs a model gateway
// (docs/agent-protocol.md, "The model gateway").
const (
	anthropicPath = "/anthropic"
	openAIPath    = "/openai/v1"
)

// gatewayEnv starts reaching the host's model gateway as the first request
// says — a mounted socket relayed from a loopback port, or a URL — and
// returns the base URLs the agent's SDKs use. The relay lives as long as ctx.
func gatewayEnv(ctx context.Context, gateway string, log *slog.Logger) (map[string]string, error) {
	if gateway == "" {
		return nil, nil
	}
	base := strings.TrimRight(gateway, "/")
	if socket, ok := strings.CutPrefix(gateway, "unix:"); ok {
		addr, err := relayToSocket(ctx, socket, log)
		if err != nil {
			return nil, fmt.Errorf("model gateway: %w", err)
		}
		base = "http://" + addr
	} else if !strings.HasPrefix(gateway, "http://") && !strings.HasPrefix(gateway, "https://") {
		return nil, fmt.Errorf("model gateway %q: want unix:<socket> or an http(s) URL", gateway)
	}
	return map[string]string{
		"ANTHROPIC_BASE_URL": base + anthropicPath,
		"OPENAI_BASE_URL":    base + openAIPath,
		// Nothing but the model is reachable: Claude Code need not try.
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}, nil
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
