package gateway

import (
	"testing"

	"nanohost/internal/gateway/modeltest"
)

// FuzzUsageReader feeds the reader whatever an upstream (or a man in the
// middle) might send, split anywhere: it never panics, never counts
// negative tokens, and reads the same usage however the body is split.
func FuzzUsageReader(f *testing.F) {
	f.Add([]byte(modeltest.StreamText("claude-sonnet-4-5", "some words here", modeltest.Usage{InputTokens: 10, OutputTokens: 5, CacheRead: 3})), uint16(7), true)
	f.Add([]byte(`{"model":"gpt-4o","usage":{"prompt_tokens":3,"completion_tokens":4}}`), uint16(2), false)
	f.Add([]byte("data: {\"usage\":{\"input_tokens\":-5}}\n\ndata: [DONE]\n"), uint16(1), true)
	f.Fuzz(func(t *testing.T, body []byte, split uint16, sse bool) {
		ct := "application/json"
		if sse {
			ct = "text/event-stream"
		}
		whole := newUsageReader(ct)
		whole.Write(body)
		_, u1, ok1 := whole.finish(DefaultPrices())

		parts := newUsageReader(ct)
		n := int(split)%(len(body)+1) + 1
		for i := 0; i < len(body); i += n {
			parts.Write(body[i:min(i+n, len(body))])
		}
		_, u2, ok2 := parts.finish(DefaultPrices())
		if u1 != u2 || ok1 != ok2 {
			t.Fatalf("split at %d changed the usage: %+v vs %+v", n, u1, u2)
		}
		if u1.InputTokens < 0 || u1.OutputTokens < 0 || u1.CostUSD < 0 {
			t.Fatalf("negative usage %+v", u1)
		}
	})
}

func TestUsageReaderReadsAnthropicStreams(t *testing.T) {
	use := modeltest.Usage{InputTokens: 10, OutputTokens: 77, CacheCreation: 5, CacheRead: 100}
	r := newUsageReader("text/event-stream; charset=utf-8")
	r.Write([]byte(modeltest.StreamText("claude-haiku-4-5", "x y z", use)))
	model, u, ok := r.finish(DefaultPrices())
	if !ok || model != "claude-haiku-4-5" || u.InputTokens != 115 || u.OutputTokens != 77 {
		t.Fatalf("%v %q %+v", ok, model, u)
	}
}
