package gateway

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Usage is what calls cost. InputTokens counts every input token the model
// read, cache writes and reads included (CacheWrite and CacheRead say how
// many of them were which, for the price).
type Usage struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	CacheWrite   int64   `json:"cache_write_tokens,omitempty"`
	CacheRead    int64   `json:"cache_read_tokens,omitempty"`
	CostUSD      float64 `json:"cost_usd"`
	// UnpricedCalls counts the calls to a model without a price: their
	// tokens count, their cost is unknown (not in CostUSD).
	UnpricedCalls int64 `json:"unpriced_calls,omitempty"`
}

// CostUnknown says some of the calls' cost is unknown (not in CostUSD).
func (u Usage) CostUnknown() bool { return u.UnpricedCalls > 0 }

// Tokens is input plus output.
func (u Usage) Tokens() int64 { return u.InputTokens + u.OutputTokens }

// Add sums usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{InputTokens: u.InputTokens + o.InputTokens, OutputTokens: u.OutputTokens + o.OutputTokens,
		CacheWrite: u.CacheWrite + o.CacheWrite, CacheRead: u.CacheRead + o.CacheRead,
		CostUSD: u.CostUSD + o.CostUSD, UnpricedCalls: u.UnpricedCalls + o.UnpricedCalls}
}

// apiUsage is the usage object of both API families: Anthropic's
// (input/output, cache creation and read) and OpenAI's (prompt/completion).
type apiUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
	PromptTokens             *int64 `json:"prompt_tokens"`
	CompletionTokens         *int64 `json:"completion_tokens"`
}

// apiEvent is what the gateway reads from a JSON response body or one SSE
// event's data: Anthropic's message (or message_start's message), its
// message_delta usage, and OpenAI's completion (or last chunk).
type apiEvent struct {
	Type    string    `json:"type"`
	Model   string    `json:"model"`
	Usage   *apiUsage `json:"usage"`
	Message *struct {
		Model string    `json:"model"`
		Usage *apiUsage `json:"usage"`
	} `json:"message"`
}

// usageReader follows a response body and keeps the latest usage it said.
// Anthropic streams give the input in message_start and the cumulative
// output in each message_delta; OpenAI streams give both in the last chunk
// (stream_options.include_usage). Input it cannot parse is ignored: the
// agent gets the body untouched whatever it holds.
type usageReader struct {
	sse   bool
	line  []byte // the SSE line being read
	body  []byte // a JSON body, up to maxJSONBody
	over  bool   // the JSON body was longer than maxJSONBody
	model string

	input, output, cacheWrite, cacheRead int64
	seen                                 bool
}

const (
	maxJSONBody = 8 << 20
	maxSSELine  = 1 << 20
)

func newUsageReader(contentType string) *usageReader {
	return &usageReader{sse: strings.HasPrefix(strings.ToLower(strings.TrimSpace(contentType)), "text/event-stream")}
}

// Write feeds body bytes as they pass to the agent.
func (u *usageReader) Write(p []byte) (int, error) {
	if !u.sse {
		if len(u.body)+len(p) > maxJSONBody {
			u.over = true
		} else if !u.over {
			u.body = append(u.body, p...)
		}
		return len(p), nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			u.appendLine(p)
			break
		}
		u.appendLine(p[:i])
		u.sseLine(u.line)
		u.line = u.line[:0]
		p = p[i+1:]
	}
	return len(p), nil
}

func (u *usageReader) appendLine(p []byte) {
	if len(u.line)+len(p) <= maxSSELine {
		u.line = append(u.line, p...)
	}
}

func (u *usageReader) sseLine(line []byte) {
	line = bytes.TrimRight(line, "\r")
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return // [DONE], or nothing
	}
	u.event(data)
}

func (u *usageReader) event(data []byte) {
	var ev apiEvent
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	if ev.Model != "" {
		u.model = ev.Model
	}
	if ev.Message != nil {
		if ev.Message.Model != "" {
			u.model = ev.Message.Model
		}
		u.take(ev.Message.Usage)
	}
	u.take(ev.Usage)
}

// take records the counts a usage object gives; Anthropic's counts are
// cumulative within a message, so the latest of each wins.
func (u *usageReader) take(a *apiUsage) {
	if a == nil {
		return
	}
	set := func(dst *int64, v *int64) {
		if v != nil && *v >= 0 {
			*dst = *v
			u.seen = true
		}
	}
	set(&u.input, a.InputTokens)
	set(&u.output, a.OutputTokens)
	set(&u.cacheWrite, a.CacheCreationInputTokens)
	set(&u.cacheRead, a.CacheReadInputTokens)
	set(&u.input, a.PromptTokens)
	set(&u.output, a.CompletionTokens)
}

// finish returns the model and usage the body gave (priced), and whether it
// gave any.
func (u *usageReader) finish(prices Prices) (string, Usage, bool) {
	if !u.sse {
		if !u.over && len(u.body) > 0 {
			u.event(u.body)
		}
	} else if len(u.line) > 0 {
		u.sseLine(u.line)
		u.line = nil
	}
	if !u.seen {
		return u.model, Usage{}, false
	}
	use := Usage{InputTokens: u.input + u.cacheWrite + u.cacheRead, OutputTokens: u.output,
		CacheWrite: u.cacheWrite, CacheRead: u.cacheRead}
	var unknown bool
	use.CostUSD, unknown = prices.Cost(u.model, u.input, u.cacheWrite, u.cacheRead, u.output)
	if unknown {
		use.UnpricedCalls = 1
	}
	return u.model, use, true
}
