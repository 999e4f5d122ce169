package main

import (
	"context"
	"io"
	"os/signal"
	"syscall"

	"nanohost/internal/ipc/client"
)

// runIPC is `nanoagent ipc …`: the agent asks the host to start, query or
// cancel a pipeline, or to post a chat message, by writing a request into
// the mounted IPC directory and waiting for the answer. The logic lives in
// internal/ipc/client so it can be tested against a real watcher.
func runIPC(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return client.Main(ctx, args, stdin, stdout, stderr)
}
