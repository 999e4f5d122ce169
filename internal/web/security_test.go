package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"nanohost/internal/runs"
	"nanohost/internal/store"
	"nanohost/internal/store/storetest"
	"nanohost/internal/web"
)

func TestANonLoopbackBindRequiresAToken(t *testing.T) {
	st, err := store.Open(context.Background(), storetest.URL(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, listen := range []string{"0.0.0.0:8377", ":8377", "192.168.1.5:80", "[::]:80"} {
		_, err := web.New(web.Options{Store: st, Listen: listen})
		if err == nil || !strings.Contains(err.Error(), "set http.token") {
			t.Errorf("listen %s without a token: err = %v", listen, err)
		}
		if _, err := web.New(web.Options{Store: st, Listen: listen, Token: "t"}); err != nil {
			t.Errorf("listen %s with a token: %v", listen, err)
		}
	}
	for _, listen := range []string{"127.0.0.1:8377", "localhost:0", "[::1]:9000"} {
		if _, err := web.New(web.Options{Store: st, Listen: listen}); err != nil {
			t.Errorf("loopback %s: %v", listen, err)
		}
	}
}

func TestEveryEndpointRequiresTheToken(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "correct horse", listen: "0.0.0.0:8377"})
	id := f.start(linearDOT)
	f.waitStatus(id, runs.Succeeded)
	anon := &fixture{t: t, base: f.base}
	wrong := &fixture{t: t, base: f.base, token: "wrong"}
	for _, rt := range f.srv.Routes() {
		if rt.Public {
			continue
		}
		path := strings.NewReplacer("{id}", id, "{qid}", "review-1", "{node}", "plan", "{file}", "prompt.md", "{$}", "").Replace(rt.Path)
		for name, c := range map[string]*fixture{"no token": anon, "wrong token": wrong} {
			res := c.do(rt.Method, path, `{}`)
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: %d, want 401", rt.Method, path, name, res.StatusCode)
			}
		}
	}
	e := decode[errorBody](t, anon.do("GET", "/pipelines", ""), 401)
	if !strings.Contains(e.Fix, "Authorization: Bearer") {
		t.Errorf("401 body = %+v", e)
	}
	// A browser is sent to the login form instead.
	res := anon.do("GET", "/runs/"+id, "", "Accept", "text/html")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?next=%2Fruns%2F"+id {
		t.Errorf("browser without a session: %d → %q", res.StatusCode, res.Header.Get("Location"))
	}
	// The login form and its assets are public.
	for _, p := range []string{"/login", "/static/app.css", "/static/app.js"} {
		if res := anon.do("GET", p, ""); res.StatusCode != 200 {
			t.Errorf("GET %s without a token: %d", p, res.StatusCode)
		}
	}
	f.get("/pipelines/" + id) // and the right token works
}

// loginCookie logs in through the form and returns the session cookie.
func loginCookie(t *testing.T, f *fixture, name, token string) *http.Cookie {
	t.Helper()
	form := url.Values{"name": {name}, "token": {token}, "next": {"/runs/x"}}
	req, _ := http.NewRequest("POST", f.base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", f.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "nanohost_session" {
			if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/runs/x" {
				t.Errorf("login: %d → %q", res.StatusCode, res.Header.Get("Location"))
			}
			return c
		}
	}
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("login refused with %d, want 401", res.StatusCode)
	}
	return nil
}

func TestLoginSessionCookieAndCrossSiteProtection(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "correct horse", listen: "0.0.0.0:8377"})
	if c := loginCookie(t, f, "ana", "wrong"); c != nil {
		t.Fatal("a wrong token logged in")
	}
	c := loginCookie(t, f, "Ana <admin>", "correct horse")
	if c == nil {
		t.Fatal("no session cookie")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || strings.Contains(c.Value, "correct") {
		t.Errorf("cookie = %+v", c)
	}
	session := &fixture{t: t, base: f.base}
	withCookie := func(method, path, body string, hdr ...string) *http.Response {
		return session.do(method, path, body, append([]string{"Cookie", c.Name + "=" + c.Value}, hdr...)...)
	}

	id := f.start(gateDOT)
	g := f.waitGate(id)
	answer := "/pipelines/" + id + "/questions/" + g.GateID + "/answer"

	// Cross-site requests are refused even with the cookie.
	for name, hdr := range map[string][]string{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site", "cross-site"},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site", "same-site"},
		"foreign Origin":            {"Origin", "http://evil.example"},
	} {
		res := withCookie("POST", answer, `{"choice":"A"}`, hdr...)
		e := decode[errorBody](t, res, http.StatusForbidden)
		if !strings.Contains(e.Error, "cross-site") {
			t.Errorf("%s: %+v", name, e)
		}
		res = withCookie("POST", "/pipelines/"+id+"/cancel", "", hdr...)
		res.Body.Close()
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s cancel: %d", name, res.StatusCode)
		}
	}
	if g2, _ := f.st.GetGate(context.Background(), id, g.GateID); g2.Status != runs.GateOpen {
		t.Fatalf("a cross-site answer settled the gate: %+v", g2)
	}

	// The dashboard's own request works, and the answer is recorded as the user.
	res := withCookie("POST", answer, `{"choice":"A"}`, "Sec-Fetch-Site", "same-origin", "Origin", f.base)
	ok := decode[struct {
		AnsweredBy string `json:"answered_by"`
	}](t, res, 200)
	if ok.AnsweredBy != "web:Ana-admin" {
		t.Errorf("answered_by = %q", ok.AnsweredBy)
	}

	// A tampered or foreign cookie is no session.
	forged := strings.Replace(c.Value, c.Value[:4], "YWRt", 1)
	res = session.do("GET", "/pipelines", "", "Cookie", c.Name+"="+forged)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("forged cookie: %d", res.StatusCode)
	}
	// Logging out clears the cookie.
	res = withCookie("POST", "/logout", "", "Sec-Fetch-Site", "same-origin")
	res.Body.Close()
	cleared := false
	for _, rc := range res.Cookies() {
		cleared = cleared || rc.Name == c.Name && rc.MaxAge < 0
	}
	if !cleared || res.Header.Get("Location") != "/login" {
		t.Errorf("logout: cleared=%v location=%q", cleared, res.Header.Get("Location"))
	}
}

func TestLoginRedirectStaysOnSite(t *testing.T) {
	f := newFixture(t, fixtureOpts{token: "tok"})
	for _, next := range []string{"//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"} {
		form := url.Values{"token": {"tok"}, "next": {next}}
		req, _ := http.NewRequest("POST", f.base+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if loc := res.Header.Get("Location"); loc != "/" {
			t.Errorf("next=%q redirected to %q", next, loc)
		}
	}
}

func TestLoopbackWithoutTokenRefusesForeignHostNames(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	// DNS rebinding: evil.example resolving to 127.0.0.1 is same-origin to
	// the browser, so the Host header is what gives it away.
	e := decode[errorBody](t, f.do("GET", "/pipelines", "", "Host", "evil.example:8377"), http.StatusMisdirectedRequest)
	if !strings.Contains(e.Error, "loopback host names") {
		t.Errorf("%+v", e)
	}
	for _, host := range []string{"localhost:8377", "127.0.0.1:8377", "[::1]:8377"} {
		res := f.do("GET", "/pipelines", "", "Host", host)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("Host %s: %d", host, res.StatusCode)
		}
	}
	// Cross-site protection holds without a token too.
	res := f.do("POST", "/pipelines", `{"dot":"digraph{}"}`, "Sec-Fetch-Site", "cross-site")
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST on loopback: %d", res.StatusCode)
	}
}

func TestSecurityHeadersAndEscapedAgentText(t *testing.T) {
	f := newFixture(t, fixtureOpts{script: hostileScript()})
	dot := strings.Replace(linearDOT, `label="Build"`, `label="<img src=x onerror=alert(2)>"`, 1)
	dot = strings.Replace(dot, `goal="ship the feature"`, `goal="</title><script>alert(3)</script>"`, 1)
	id := f.start(dot)
	f.waitStatus(id, runs.Succeeded)
	for _, p := range []string{"/", "/runs/" + id} {
		res := f.do("GET", p, "")
		body := readAll(t, res)
		for h, want := range map[string]string{
			"Content-Security-Policy": "script-src 'self'", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY",
		} {
			if !strings.Contains(res.Header.Get(h), want) {
				t.Errorf("%s: %s = %q", p, h, res.Header.Get(h))
			}
		}
		for _, bad := range []string{`<script>alert`, `<img src=x`, `onerror=alert(2)>`} {
			if strings.Contains(body, bad) {
				t.Errorf("%s contains unescaped %q", p, bad)
			}
		}
	}
	page := f.get("/runs/" + id)
	if !strings.Contains(page, `&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;`) {
		t.Error("the run page does not show the agent's text (escaped)")
	}
	if !strings.Contains(page, `&lt;img src=x onerror=alert(2)&gt;`) {
		t.Error("the graph does not show the hostile label (escaped)")
	}
}

func readAll(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		t.Fatalf("%s: %d %s", res.Request.URL.Path, res.StatusCode, b)
	}
	return string(b)
}
