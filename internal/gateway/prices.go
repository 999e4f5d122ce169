package gateway

import "strings"

// Price is what a model costs, in US dollars per million tokens. Cache
// writes and reads default to 1.25× and 0.1× the input price (Anthropic's
// prompt caching) when zero.
type Price struct {
	Input      float64 `yaml:"input" json:"input"`
	Output     float64 `yaml:"output" json:"output"`
	CacheWrite float64 `yaml:"cache_write" json:"cache_write,omitempty"`
	CacheRead  float64 `yaml:"cache_read" json:"cache_read,omitempty"`
}

// Prices maps a model name prefix to its price; the longest prefix of a
// model's name wins ("claude-sonnet-4" prices "claude-sonnet-4-5-20250929").
type Prices map[string]Price

// DefaultPrices are the list prices nanohost knows (USD per million
// tokens); configuration (gateway.prices) adds to and overrides them.
func DefaultPrices() Prices {
	return Prices{
		"claude-opus-4-6":   {Input: 5, Output: 25},
		"claude-opus-4-5":   {Input: 5, Output: 25},
		"claude-opus-4-1":   {Input: 15, Output: 75},
		"claude-opus-4":     {Input: 15, Output: 75},
		"claude-sonnet-4":   {Input: 3, Output: 15},
		"claude-3-7-sonnet": {Input: 3, Output: 15},
		"claude-haiku-4-5":  {Input: 1, Output: 5},
		"claude-3-5-haiku":  {Input: 0.8, Output: 4},
		"gpt-4o-mini":       {Input: 0.15, Output: 0.6},
		"gpt-4o":            {Input: 2.5, Output: 10},
		"gpt-4.1-mini":      {Input: 0.4, Output: 1.6},
		"gpt-4.1":           {Input: 2, Output: 8},
	}
}

// With returns p overridden and extended by more.
func (p Prices) With(more Prices) Prices {
	out := make(Prices, len(p)+len(more))
	for k, v := range p {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

// Lookup finds the price of model by its longest matching prefix.
func (p Prices) Lookup(model string) (Price, bool) {
	best, found := "", false
	for prefix := range p {
		if strings.HasPrefix(model, prefix) && (!found || len(prefix) > len(best)) {
			best, found = prefix, true
		}
	}
	return p[best], found
}

// Cost prices a call; unknown is true for a model without a price (its
// tokens still count).
func (p Prices) Cost(model string, input, cacheWrite, cacheRead, output int64) (usd float64, unknown bool) {
	pr, ok := p.Lookup(model)
	if !ok {
		return 0, true
	}
	cw, cr := pr.CacheWrite, pr.CacheRead
	if cw == 0 {
		cw = pr.Input * 1.25
	}
	if cr == 0 {
		cr = pr.Input * 0.1
	}
	return (float64(input)*pr.Input + float64(cacheWrite)*cw + float64(cacheRead)*cr + float64(output)*pr.Output) / 1e6, false
}
