package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Skipf("no zone data for %s: %v", name, err)
	}
	return loc
}

// Cron is read in the configured zone, across a daylight-saving change;
// once is a local time in that zone, never the process's.
func TestCronAndOnceAreReadInTheConfiguredZone(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	s, err := Parse(Cron, "0 9 * * 1-5", berlin)
	if err != nil {
		t.Fatal(err)
	}
	// Friday 27 March 2026 10:00 Berlin (CET): next is Monday 30 March
	// 09:00 CEST, after the clocks went forward.
	from := time.Date(2026, 3, 27, 9, 0, 0, 0, time.UTC)
	next, _ := s.First(from)
	if want := time.Date(2026, 3, 30, 7, 0, 0, 0, time.UTC); !next.Equal(want) {
		t.Errorf("next weekday 09:00 Berlin = %s, want %s", next.UTC(), want)
	}
	once, err := Parse(Once, "2026-12-01 09:00", berlin)
	if err != nil {
		t.Fatal(err)
	}
	if at, ok := once.First(from); !ok || !at.Equal(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("once = %s %v", at.UTC(), ok)
	}
	if _, ok := once.After(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), from); ok {
		t.Error("a once task has a second fire")
	}
	if _, ok := once.First(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)); ok {
		t.Error("a once time in the past fires")
	}
}

// An interval is anchored to its first due time: late fires and missed
// slots never shift it.
func TestIntervalIsAnchoredWithoutDrift(t *testing.T) {
	s, err := Parse(Interval, "1800000", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	due := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		now  time.Duration // after due
		want time.Duration
	}{
		{3 * time.Second, 30 * time.Minute},                          // fired a little late
		{30 * time.Minute, time.Hour},                                // exactly at the next slot
		{2*time.Hour + 10*time.Minute, 2*time.Hour + 30*time.Minute}, // missed four slots
	}
	for _, c := range cases {
		next, _ := s.After(due, due.Add(c.now))
		if !next.Equal(due.Add(c.want)) {
			t.Errorf("now due+%s: next due+%s, want due+%s", c.now, next.Sub(due), c.want)
		}
	}
}

func TestParseRefusesWithTheFix(t *testing.T) {
	for _, c := range []struct {
		typ   Type
		value string
		want  string
	}{
		{Cron, "every day", "not a cron expression"},
		{Cron, "CRON_TZ=UTC 0 9 * * *", "takes no time zone"},
		{Interval, "0", "out of range"},
		{Interval, "10s", "shorter than"},
		{Interval, "soon", "neither milliseconds"},
		{Once, "2026-12-01T09:00:00+01:00", "zone or offset"},
		{Once, "tomorrow", "not a local date"},
		{"weekly", "x", "not one of cron, interval, once"},
	} {
		if _, err := Parse(c.typ, c.value, time.UTC); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s, %q) = %v, want %q", c.typ, c.value, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0 9 * * 1-5", "@hourly", "1800000", "30m", "2026-12-01 09:00", "*/5 * * * *", "0 0 31 2 *"} {
		f.Add("cron", s)
		f.Add("interval", s)
		f.Add("once", s)
	}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, typ, value string) {
		s, err := Parse(Type(typ), value, time.UTC)
		if err != nil {
			return
		}
		first, ok := s.First(now)
		if !ok {
			return
		}
		if next, ok := s.After(first, first); ok && !next.IsZero() && !next.After(first) {
			t.Fatalf("%s %q: the fire after %s is %s", typ, value, first, next)
		}
	})
}
