package engine

import "strings"

// How a gate's answer names one of its options. This is the one
// implementation of option matching: the engine's human handler, the runs
// service (chat buttons, typed keys, the web) and the terminal interviewer
// all go through it, so an answer means the same option everywhere.

// OptionIndex returns the position of the option an answer names: an
// accelerator key (case-insensitively), else a label (its accelerator
// prefix, case and surrounding space ignored), else a target node id
// (exactly, then case-insensitively); the first match wins.
func OptionIndex(opts []Option, answer string) (int, bool) {
	v := strings.TrimSpace(answer)
	if v == "" {
		return 0, false
	}
	norm := NormalizeLabel(v)
	for _, match := range []func(Option) bool{
		func(o Option) bool { return strings.EqualFold(o.Key, v) },
		func(o Option) bool { return NormalizeLabel(o.Label) == norm },
		func(o Option) bool { return o.To == v },
		func(o Option) bool { return strings.EqualFold(o.To, v) },
	} {
		for i, o := range opts {
			if match(o) {
				return i, true
			}
		}
	}
	return 0, false
}

// Option returns the option an answer names (see OptionIndex).
func (q Question) Option(answer string) (Option, bool) {
	if i, ok := OptionIndex(q.Options, answer); ok {
		return q.Options[i], true
	}
	return Option{}, false
}

// ChoiceValue is the value that answers q with its i-th option: the first
// of its key, label and target that names that option alone. Two options
// can share an accelerator key ("Approve" and "Abort" both get A): answered
// "A", the engine would take the first, so a click on "Abort" is answered
// with its label instead.
func (q Question) ChoiceValue(i int) string {
	o := q.Options[i]
	for _, v := range []string{o.Key, o.Label, o.To} {
		if j, ok := OptionIndex(q.Options, v); ok && j == i {
			return v
		}
	}
	// Identical options: any of them is the same choice.
	if o.Key != "" {
		return o.Key
	}
	return o.Label
}

// KeyShared reports whether more than one option of q has the accelerator
// key key, so typing it would not say which one is meant.
func (q Question) KeyShared(key string) bool {
	key = strings.TrimSpace(key)
	n := 0
	for _, o := range q.Options {
		if o.Key != "" && strings.EqualFold(o.Key, key) {
			n++
		}
	}
	return n > 1
}

// AcceptsText reports whether q takes free text (a freeform question, or a
// freeform edge among its options).
func (q Question) AcceptsText() bool {
	if q.Type == QuestionFreeform {
		return true
	}
	_, ok := freeformOption(q.Options)
	return ok
}

// freeformOption is the option that takes free text, if there is one.
func freeformOption(opts []Option) (Option, bool) {
	for _, o := range opts {
		if o.Freeform {
			return o, true
		}
	}
	return Option{}, false
}
