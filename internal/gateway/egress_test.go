package gateway_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"nanohost/internal/gateway"
)

// A tool's secret is brokered: the agent asks the proxy for
// http://api.test/…, the proxy goes on over HTTPS with the header set, and
// nothing the agent receives or sends holds the secret.
func TestEgressBrokersAToolSecret(t *testing.T) {
	const secret = "ghs-brokered-0123456789"
	var gotAuth string
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		if gotAuth != "Bearer "+secret {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, "authorized for "+r.URL.Path)
	}))
	defer upstream.Close()
	roots := x509.NewCertPool()
	roots.AddCert(upstream.Certificate())

	g, _, _ := setup(t, nil)
	egress := g.NewEgress(gateway.EgressConfig{
		Allow:    []string{"api.test"},
		Brokered: []gateway.BrokeredSecret{{Host: "api.test", Header: "Authorization", Value: "Bearer " + secret}},
		TLS:      &tls.Config{RootCAs: roots, ServerName: "example.com"}, // httptest's certificate
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr != "api.test:443" {
				t.Errorf("the proxy dialled %s, want api.test over HTTPS", addr)
			}
			return (&net.Dialer{}).DialContext(ctx, network, upstream.Listener.Addr().String())
		},
	})
	proxy := httptest.NewServer(egress)
	defer proxy.Close()
	pass := g.Admit(gateway.Binding{Run: "r", Node: "n", Group: "g"})
	proxyURL, _ := url.Parse(proxy.URL)
	proxyURL.User = url.UserPassword(gateway.EgressUser, pass.Token())
	client := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}}

	resp, err := client.Get("http://api.test/repos")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "authorized for /repos" {
		t.Fatalf("%d %s (the API saw %q)", resp.StatusCode, body, gotAuth)
	}
	for k, v := range resp.Header {
		if strings.Contains(strings.Join(v, " "), secret) {
			t.Errorf("the secret came back in header %s", k)
		}
	}

	pass.Revoke()
	if resp, err := client.Get("http://api.test/repos"); err != nil || resp.StatusCode != http.StatusProxyAuthRequired {
		t.Fatalf("a revoked token through the proxy: %v %v", resp, err)
	}
}
