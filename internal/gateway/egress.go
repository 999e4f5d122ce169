package gateway

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"
)

// EgressConfig configures the egress proxy: the only way out for agents
// that must fetch from named hosts (runtime.egress.allow).
type EgressConfig struct {
	// Allow lists the hosts agents may reach: "github.com" is that host,
	// "*.example.com" any host under example.com. Ports 80 and 443 only.
	Allow []string
	// Dial connects to an allowed host (default: a net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Brokered are secrets the proxy adds to requests for their host,
	// which must be allowed too: the agent sends a plain request
	// (http://host/…) through the proxy, the proxy sends it on over HTTPS
	// with the header set. The secret never enters the container.
	Brokered []BrokeredSecret
	// TLS configures the HTTPS connections to brokered hosts (default: the
	// system's roots).
	TLS *tls.Config
}

// BrokeredSecret is a header the egress proxy sets on requests for Host.
type BrokeredSecret struct {
	Host, Header, Value string
}

// EgressUser is the user name in the proxy URL agents get
// (http://nanohost:<token>@127.0.0.1:<port>): the password is the
// container's gateway token, so the proxy knows whose request it is.
const EgressUser = "nanohost"

// Egress is an HTTP proxy (plain requests and CONNECT) that lets an
// admitted container reach the allowed hosts and nothing else. Refusals
// are logged with the container's run and node.
type Egress struct {
	g        *Gateway
	allow    []string
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	http     *httputil.ReverseProxy
	brokered map[string][]BrokeredSecret // by lower-case host
}

// NewEgress returns the egress proxy of g's admitted containers.
func (g *Gateway) NewEgress(cfg EgressConfig) *Egress {
	e := &Egress{g: g, dial: cfg.Dial}
	for _, a := range cfg.Allow {
		e.allow = append(e.allow, strings.ToLower(strings.TrimSpace(a)))
	}
	if e.dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		e.dial = d.DialContext
	}
	e.brokered = map[string][]BrokeredSecret{}
	for _, b := range cfg.Brokered {
		h := strings.ToLower(b.Host)
		e.brokered[h] = append(e.brokered[h], b)
	}
	transport := &http.Transport{DialContext: e.dial, TLSClientConfig: cfg.TLS, MaxIdleConnsPerHost: 8, IdleConnTimeout: 90 * time.Second}
	e.http = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Del("Proxy-Authorization")
			pr.Out.Host = pr.In.Host
			if secrets := e.brokered[strings.ToLower(pr.In.URL.Hostname())]; len(secrets) > 0 {
				// Over HTTPS, with the secrets the agent never holds.
				pr.Out.URL.Scheme, pr.Out.URL.Host = "https", net.JoinHostPort(pr.In.URL.Hostname(), "443")
				for _, b := range secrets {
					pr.Out.Header.Set(b.Header, b.Value)
				}
			}
		},
		Transport:     transport,
		FlushInterval: -1,
	}
	return e
}

// Allowed reports whether host (without a port) is on the allowlist.
func (e *Egress) Allowed(host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range e.allow {
		if suffix, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		} else if host == a {
			return true
		}
	}
	return false
}

func (e *Egress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	pass := e.g.lookup(proxyToken(r))
	if pass == nil {
		w.Header().Set("Proxy-Authenticate", `Basic realm="nanohost egress"`)
		http.Error(w, "nanohost egress: unknown or revoked token", http.StatusProxyAuthRequired)
		return
	}
	target := r.Host
	if r.Method != http.MethodConnect {
		target = r.URL.Host
	}
	host, port, err := net.SplitHostPort(target)
	if err != nil {
		host, port = target, "80"
		if r.Method == http.MethodConnect {
			port = "443"
		}
	}
	b := pass.binding
	if !e.Allowed(host) || (port != "80" && port != "443") || (r.Method != http.MethodConnect && r.URL.Scheme != "http") {
		e.g.log.Warn("egress refused", "host", host, "port", port, "run", b.Run, "node", b.Node, "group", b.Group, "container", b.Container)
		http.Error(w, fmt.Sprintf("nanohost egress: %s is not on runtime.egress.allow", net.JoinHostPort(host, port)), http.StatusForbidden)
		return
	}
	e.g.log.Debug("egress", "host", host, "port", port, "run", b.Run, "node", b.Node)
	if r.Method == http.MethodConnect {
		e.tunnel(w, r, net.JoinHostPort(host, port))
		return
	}
	e.http.ServeHTTP(w, r)
}

// proxyToken is the password of the request's Proxy-Authorization.
func proxyToken(r *http.Request) string {
	raw, ok := strings.CutPrefix(r.Header.Get("Proxy-Authorization"), "Basic ")
	if !ok {
		return ""
	}
	dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(raw))
	if err != nil {
		return ""
	}
	_, token, _ := strings.Cut(string(dec), ":")
	return token
}

// tunnel answers a CONNECT: a byte pipe to the allowed host. The
// connection is taken over first: the client may have sent its first bytes
// (and closed its side) already, which ends the request's context.
func (e *Egress) tunnel(w http.ResponseWriter, r *http.Request, addr string) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "nanohost egress: cannot tunnel", http.StatusInternalServerError)
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	up, err := e.dial(ctx, "tcp", addr)
	cancel()
	if err != nil {
		fmt.Fprintf(conn, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nnanohost egress: %v\n", err)
		return
	}
	defer up.Close()
	if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, buf) // what the client sent after CONNECT, then the rest
		if c, ok := up.(interface{ CloseWrite() error }); ok {
			c.CloseWrite()
		}
	})
	io.Copy(conn, up)
	if c, ok := conn.(interface{ CloseWrite() error }); ok {
		c.CloseWrite()
	}
	wg.Wait()
}
