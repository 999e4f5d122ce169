package pipeline

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"strings"
	"time"
)

// Attrs maps attribute keys to decoded string values. Values stay strings so
// that nothing the author wrote is lost; the typed getters convert on use and
// say exactly what was wrong when a value has the wrong type.
type Attrs map[string]string

// Clone returns a copy (nil stays an empty map).
func (a Attrs) Clone() Attrs {
	c := make(Attrs, len(a))
	maps.Copy(c, a)
	return c
}

// Has reports whether key is set (even to "").
func (a Attrs) Has(key string) bool {
	_, ok := a[key]
	return ok
}

// String returns the value of key, or def when it is unset or empty.
func (a Attrs) String(key, def string) string {
	if v := a[key]; v != "" {
		return v
	}
	return def
}

// AttrError says an attribute's value does not have the type the key needs.
type AttrError struct {
	Key, Value string
	Want       string // "an integer", "a duration", ...
	Example    string // a valid value, for the fix
}

func (e *AttrError) Error() string {
	return fmt.Sprintf("attribute %s=%q is not %s (for example %s=%s)", e.Key, e.Value, e.Want, e.Key, e.Example)
}

// Int returns key as an integer, def when unset or empty. An integral
// number written as a float ("2.0", "1e3") is that integer: pipelines from
// other implementations write weights that way, and nothing is lost. A
// fractional value ("2.5") is an error whose Example is the nearest integers.
func (a Attrs) Int(key string, def int) (int, error) {
	v := strings.TrimSpace(a[key])
	if v == "" {
		return def, nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	switch {
	case err != nil || math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) > 1<<53:
		return def, &AttrError{Key: key, Value: a[key], Want: "an integer", Example: "3"}
	case f != math.Trunc(f):
		return def, &AttrError{Key: key, Value: a[key], Want: "a whole number",
			Example: fmt.Sprintf("%d (or %d)", int64(math.Floor(f)), int64(math.Ceil(f)))}
	}
	return int(f), nil
}

// Float returns key as a float, def when unset or empty.
func (a Attrs) Float(key string, def float64) (float64, error) {
	v := strings.TrimSpace(a[key])
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return def, &AttrError{Key: key, Value: a[key], Want: "a number", Example: "0.5"}
	}
	return f, nil
}

// Bool returns key as a boolean (true/false, case-insensitive; also 1/0 and
// yes/no), def when unset or empty.
func (a Attrs) Bool(key string, def bool) (bool, error) {
	v := strings.ToLower(strings.TrimSpace(a[key]))
	switch v {
	case "":
		return def, nil
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return def, &AttrError{Key: key, Value: a[key], Want: "a boolean", Example: "true"}
}

// Duration returns key as a duration, def when unset or empty. See ParseDuration.
func (a Attrs) Duration(key string, def time.Duration) (time.Duration, error) {
	v := strings.TrimSpace(a[key])
	if v == "" {
		return def, nil
	}
	d, err := ParseDuration(v)
	if err != nil {
		return def, &AttrError{Key: key, Value: a[key], Want: "a duration", Example: "900s"}
	}
	return d, nil
}

// ParseDuration reads the spec's Duration (an integer with unit ms, s, m, h
// or d), a bare integer (seconds), or a Go duration such as "1h30m".
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if isInteger(s) { // not "900s": ParseInt's error would cost two allocations per value
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Duration(n) * time.Second, nil
		}
	}
	if num, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad duration %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: use an integer with ms, s, m, h or d, e.g. 900s", s)
	}
	return d, nil
}

// isInteger reports whether s is an optionally signed run of digits.
func isInteger(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
