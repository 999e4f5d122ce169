package pipeline

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAttrsInt(t *testing.T) {
	a := Attrs{"n": "3", "neg": "-1", "sp": " 7 ", "empty": "", "bad": "3.5", "word": "many",
		"float": "2.0", "negfloat": "-1.0", "exp": "1e3", "inf": "1e400"}
	for key, want := range map[string]int{"n": 3, "neg": -1, "sp": 7, "empty": 42, "missing": 42, "float": 2, "negfloat": -1, "exp": 1000} {
		if got, err := a.Int(key, 42); err != nil || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", key, got, err, want)
		}
	}
	for _, key := range []string{"bad", "word", "inf"} {
		got, err := a.Int(key, 42)
		var ae *AttrError
		if !errors.As(err, &ae) || got != 42 || ae.Key != key || ae.Value != a[key] {
			t.Errorf("Int(%s) = %d, %v; want default and an AttrError", key, got, err)
		}
	}
	_, err := a.Int("word", 0)
	if want := `attribute word="many" is not an integer (for example word=3)`; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
	// A fractional value names the integers it lies between.
	_, err = a.Int("bad", 0)
	if want := `attribute bad="3.5" is not a whole number (for example bad=3 (or 4))`; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
}

func TestAttrsFloat(t *testing.T) {
	a := Attrs{"half": "0.5", "neg": "-3.14", "int": "2", "bad": "gpt-5.2"}
	for key, want := range map[string]float64{"half": 0.5, "neg": -3.14, "int": 2, "missing": 1.5} {
		if got, err := a.Float(key, 1.5); err != nil || got != want {
			t.Errorf("Float(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
	if got, err := a.Float("bad", 1.5); err == nil || got != 1.5 || !strings.Contains(err.Error(), "not a number") {
		t.Errorf("Float(bad) = %v, %v", got, err)
	}
}

func TestAttrsBool(t *testing.T) {
	a := Attrs{"t": "true", "T": "TRUE", "one": "1", "yes": "yes", "f": "false", "zero": "0", "no": "No", "bad": "maybe"}
	for key, want := range map[string]bool{"t": true, "T": true, "one": true, "yes": true, "f": false, "zero": false, "no": false} {
		if got, err := a.Bool(key, !want); err != nil || got != want {
			t.Errorf("Bool(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
	if got, err := a.Bool("missing", true); err != nil || !got {
		t.Errorf("Bool(missing) = %v, %v; want the default", got, err)
	}
	if got, err := a.Bool("bad", true); err == nil || !got || !strings.Contains(err.Error(), "is not a boolean (for example bad=true)") {
		t.Errorf("Bool(bad) = %v, %v", got, err)
	}
}

func TestAttrsDuration(t *testing.T) {
	a := Attrs{
		"s": "900s", "m": "15m", "h": "2h", "ms": "250ms", "d": "1d", "bare": "30", "go": "1h30m", "bad": "soon", "badday": "xd",
	}
	want := map[string]time.Duration{
		"s": 900 * time.Second, "m": 15 * time.Minute, "h": 2 * time.Hour, "ms": 250 * time.Millisecond,
		"d": 24 * time.Hour, "bare": 30 * time.Second, "go": 90 * time.Minute, "missing": time.Minute,
	}
	for key, w := range want {
		if got, err := a.Duration(key, time.Minute); err != nil || got != w {
			t.Errorf("Duration(%s) = %v, %v; want %v", key, got, err, w)
		}
	}
	for _, key := range []string{"bad", "badday"} {
		got, err := a.Duration(key, time.Minute)
		var ae *AttrError
		if !errors.As(err, &ae) || got != time.Minute || ae.Example != "900s" {
			t.Errorf("Duration(%s) = %v, %v", key, got, err)
		}
	}
}

func TestAttrsStringHasClone(t *testing.T) {
	a := Attrs{"label": "Plan", "empty": ""}
	if a.String("label", "x") != "Plan" || a.String("empty", "x") != "x" || a.String("missing", "x") != "x" {
		t.Error("String does not fall back to the default for empty and missing keys")
	}
	if !a.Has("empty") || a.Has("missing") {
		t.Error("Has must report keys set to empty")
	}
	c := a.Clone()
	c["label"] = "changed"
	if a["label"] != "Plan" {
		t.Error("Clone shares the map")
	}
	var nilAttrs Attrs
	if c := nilAttrs.Clone(); c == nil || len(c) != 0 {
		t.Error("Clone of nil must be an empty, usable map")
	}
}
