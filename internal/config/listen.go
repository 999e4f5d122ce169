package config

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
)

// ListenError explains why the HTTP endpoint (dashboard, /healthz,
// /metrics) cannot listen on http.listen, naming the setting that chose the
// address and how to change it.
func (c *Config) ListenError(err error) error {
	where := "http.listen"
	switch {
	case c.fromEnv["http.listen"] != "":
		where = "NANOHOST_HTTP_LISTEN (it overrides http.listen)"
	case c.Source != "":
		where = "http.listen in " + c.Source
	case c.HTTP.Listen == Defaults().HTTP.Listen:
		where = "http.listen (the default)"
	}
	reason := err.Error()
	var sys syscall.Errno
	if errors.As(err, &sys) {
		reason = map[syscall.Errno]string{
			syscall.EADDRINUSE:    "the address is in use: another program (maybe another nanohost) listens there",
			syscall.EACCES:        "permission denied: ports below 1024 need privileges",
			syscall.EADDRNOTAVAIL: "this machine has no such address",
		}[sys]
		if reason == "" {
			reason = sys.Error()
		}
	}
	return fmt.Errorf("cannot serve the dashboard on %s, as %s says: %s (fix: set http.listen in nanohost.yaml, or NANOHOST_HTTP_LISTEN, to a free address such as %s; an empty value turns the dashboard off)",
		c.HTTP.Listen, where, reason, nextPort(c.HTTP.Listen))
}

// nextPort is addr with the port after its own: a likely free neighbour.
func nextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n <= 0 || n >= 65535 {
		return "127.0.0.1:8378"
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}
