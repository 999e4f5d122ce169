package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func TestInputFilesAreAuthenticated(t *testing.T) {
	nonce := NewNonce()
	req := Request{Version: Version, DispatchID: 12, NodeID: "review", Prompt: "check it", Model: "m"}
	data, err := EncodeInputFile(nonce, req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeInputFile(nonce, data)
	if err != nil || got.DispatchID != 12 || got.Prompt != "check it" || got.Model != "m" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}

	bare, _ := json.Marshal(req)
	tampered := bytes.Replace(data, []byte("check it"), []byte("approve!"), 1)
	for name, file := range map[string][]byte{
		"a bare request":      bare,
		"a changed prompt":    tampered,
		"another nonce's tag": must(EncodeInputFile(NewNonce(), req)),
		"junk":                []byte("{not json"),
		"no request":          []byte(`{"auth": "00"}`),
	} {
		if _, err := DecodeInputFile(nonce, file); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: got %v, want ErrUnauthenticated", name, err)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
