package hooks

import (
	"encoding/json"
	"testing"
	"time"
)

func TestLookupReadsDottedPaths(t *testing.T) {
	var payload any
	_ = json.Unmarshal([]byte(`{"ref":"refs/heads/main","repository":{"full_name":"acme/shop","private":true},"commits":[{"id":"a1"}],"n":3}`), &payload)
	for path, want := range map[string]string{
		"ref": "refs/heads/main", "repository.full_name": "acme/shop", "repository.private": "true", "commits.0.id": "a1", "n": "3",
	} {
		if got, ok := Lookup(payload, path); !ok || got != want {
			t.Errorf("Lookup(%s) = %q %v, want %q", path, got, ok, want)
		}
	}
	for _, path := range []string{"missing", "ref.x", "commits.1.id", "commits.-1", ""} {
		if got, ok := Lookup(payload, path); ok {
			t.Errorf("Lookup(%s) = %q, want nothing", path, got)
		}
	}
}

func TestSignaturesRoundTrip(t *testing.T) {
	secret, body := []byte("k"), []byte(`{"a":1}`)
	ts, v1 := parseSignature(SignAt(secret, body, time.Unix(1700000000, 0)))
	if ts != "1700000000" || !equalMAC(v1, mac(secret, []byte(ts+"."), body)) {
		t.Errorf("SignAt: t=%s v1=%s", ts, v1)
	}
	if equalMAC("zz", mac(secret, body)) || equalMAC(mac([]byte("other"), body), mac(secret, body)) {
		t.Error("a bad MAC matched")
	}
}

// Payloads and signature headers come from outside: reading them never
// panics.
func FuzzPayloadAndSignature(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,{"c":"d"}]}}`), "a.b.1.c", "t=1,v1=00")
	f.Add([]byte(`[]`), "0", "v1=,t=")
	f.Fuzz(func(t *testing.T, body []byte, path, sig string) {
		var payload any
		if json.Unmarshal(body, &payload) == nil {
			Lookup(payload, path)
		}
		ts, v1 := parseSignature(sig)
		equalMAC(v1, mac([]byte(ts), body))
	})
}
