// Package schedule is work that starts itself on a clock: a task's
// schedule (cron, interval, once — NanoClaw's schedule_type words), when it
// next fires, and the Scheduler that fires what is due, once, through a
// Firer. It knows nothing of chat, containers or SQL: the host fires, the
// store keeps (docs/schedules.md).
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Type is how a task's schedule_value is read.
type Type string

const (
	// Cron: a five-field cron expression (or @hourly, @daily…), in the
	// host's configured time zone.
	Cron Type = "cron"
	// Interval: every N milliseconds (NanoClaw's form) or a Go duration
	// ("30m"), anchored to the previous due time, so fires never drift.
	Interval Type = "interval"
	// Once: a local date and time in the configured zone
	// ("2026-12-01T09:00:00" or "2026-12-01 09:00"), no zone or offset.
	Once Type = "once"
)

// Spec is a parsed schedule.
type Spec struct {
	Type  Type
	Value string
	// Loc is the zone cron and once are read in.
	Loc *time.Location

	cron  cron.Schedule
	every time.Duration
	at    time.Time
}

// MinInterval is the shortest interval taken: shorter is a busy loop.
const MinInterval = time.Minute

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads value as a schedule of type typ in loc (nil: UTC). Its
// errors say what to write instead.
func Parse(typ Type, value string, loc *time.Location) (Spec, error) {
	if loc == nil {
		loc = time.UTC
	}
	value = strings.TrimSpace(value)
	s := Spec{Type: typ, Value: value, Loc: loc}
	switch typ {
	case Cron:
		if strings.HasPrefix(value, "CRON_TZ=") || strings.HasPrefix(value, "TZ=") {
			return Spec{}, errors.New("a cron expression takes no time zone: it is read in the host's timezone (nanohost.yaml timezone:)")
		}
		sched, err := cronParser.Parse(value)
		if err != nil {
			return Spec{}, fmt.Errorf("%q is not a cron expression (minute hour day-of-month month day-of-week, e.g. \"0 9 * * 1-5\"): %v", value, err)
		}
		if spec, ok := sched.(*cron.SpecSchedule); ok {
			spec.Location = loc
		}
		s.cron = sched
	case Interval:
		d, err := parseInterval(value)
		if err != nil {
			return Spec{}, err
		}
		s.every = d
	case Once:
		t, err := ParseLocal(value, loc)
		if err != nil {
			return Spec{}, err
		}
		s.at = t
	default:
		return Spec{}, fmt.Errorf("schedule_type %q is not one of cron, interval, once", typ)
	}
	return s, nil
}

func parseInterval(value string) (time.Duration, error) {
	var d time.Duration
	if ms, err := strconv.ParseInt(value, 10, 64); err == nil {
		if ms <= 0 || ms > int64(366*24*time.Hour/time.Millisecond) {
			return 0, fmt.Errorf("interval %s ms is out of range: give a positive number of milliseconds up to a year", value)
		}
		d = time.Duration(ms) * time.Millisecond
	} else if d, err = time.ParseDuration(value); err != nil || d <= 0 {
		return 0, fmt.Errorf("interval %q is neither milliseconds (\"1800000\") nor a duration (\"30m\", \"2h\")", value)
	}
	if d < MinInterval {
		return 0, fmt.Errorf("interval %s is shorter than %s: schedule less often", d, MinInterval)
	}
	return d, nil
}

// localLayouts are the forms a once time is written in.
var localLayouts = []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"}

// ParseLocal reads a local date and time in loc — never the process's
// zone (NanoClaw's bug: once and cron disagreed when TZ was set only in
// .env). A time with a zone or offset is refused: it would mean two zones.
func ParseLocal(value string, loc *time.Location) (time.Time, error) {
	v := strings.TrimSpace(value)
	for _, layout := range localLayouts {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t, nil
		}
	}
	if _, err := time.Parse(time.RFC3339, v); err == nil {
		return time.Time{}, fmt.Errorf("once time %q has a zone or offset: write the local time without it (\"2026-12-01T09:00:00\"); it is read in %s", value, loc)
	}
	return time.Time{}, fmt.Errorf("once time %q is not a local date and time (\"2026-12-01T09:00:00\" or \"2026-12-01 09:00\")", value)
}

// First is when a task created at now first fires; ok is false when it
// never does (a once time in the past).
func (s Spec) First(now time.Time) (time.Time, bool) {
	switch s.Type {
	case Cron:
		return s.cron.Next(now), true
	case Interval:
		return now.Add(s.every), true
	case Once:
		return s.at, !s.at.Before(now.Add(-time.Minute))
	}
	return time.Time{}, false
}

// After is the fire after the one due at due, the first later than now:
// missed slots are skipped, and an interval stays anchored to its first
// due time (due + k·interval), so it never drifts. ok is false when there
// is none (once).
func (s Spec) After(due, now time.Time) (time.Time, bool) {
	switch s.Type {
	case Cron:
		from := due
		if now.After(from) {
			from = now
		}
		return s.cron.Next(from), true
	case Interval:
		next := due.Add(s.every)
		if !next.After(now) {
			k := now.Sub(due)/s.every + 1
			next = due.Add(k * s.every)
		}
		return next, true
	}
	return time.Time{}, false
}

// Every is the interval of an interval spec (0 otherwise).
func (s Spec) Every() time.Duration { return s.every }

// ParseWhen reads a schedule as people write it — "every 30m", "at
// 2026-12-01 09:00", or a cron expression ("0 9 * * 1-5", "@daily") — as
// a type and value for Parse.
func ParseWhen(when string) (Type, string, error) {
	when = strings.TrimSpace(when)
	word, rest, _ := strings.Cut(when, " ")
	switch strings.ToLower(word) {
	case "every":
		return Interval, strings.TrimSpace(rest), nil
	case "at":
		return Once, strings.TrimSpace(rest), nil
	case "":
		return "", "", errors.New(`no schedule given: a cron expression ("0 9 * * 1-5"), "every 30m" or "at 2026-12-01 09:00"`)
	}
	return Cron, when, nil
}
