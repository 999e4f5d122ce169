package config

import (
	"strings"
	"testing"
	"time"
)

// config check validates every schedule's expression and every webhook,
// at their lines; a good schedule says when it fires next.
func TestConfigCheckValidatesSchedulesAndWebhooks(t *testing.T) {
	t.Setenv("HOOK_SECRET", "0123456789abcdef0123")
	c := loadYAML(t, `
timezone: Europe/Berlin
groups:
  - {folder: main, chat: "console:main", main: true}
schedules:
  - {name: summary, group: main, when: "0 9 * * 1-5", prompt: "summarise the open incidents"}
  - {name: bad-cron, group: main, when: "0 25 * * *", prompt: x}
  - {name: nowhere, group: ghost, when: "every 30m", pipeline: deploy}
  - {name: both, group: main, when: "every 1h", pipeline: deploy, prompt: x}
webhooks:
  - {name: push, secret: "${HOOK_SECRET}", pipeline: deploy, inputs: {repo: repository.full_name}}
  - {name: weak, secret: short, prompt: x}
`)
	var got []string
	for _, p := range c.Check() {
		if strings.HasPrefix(p.Field, "schedules") || strings.HasPrefix(p.Field, "webhooks") || p.Field == "timezone" {
			got = append(got, p.Field)
		}
	}
	want := []string{"schedules[1].when", "schedules[2].group", "schedules[3]", "webhooks[1].secret"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems at %v, want %v", got, want)
	}
	loc, _ := c.Location()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC) // a Friday
	next, err := c.Schedules[0].Next(now, loc)
	if err != nil || !next.Equal(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("the summary next fires %s (%v), want Monday 09:00 Berlin", next, err)
	}
	bad := loadYAML(t, "timezone: Mars/Olympus\n")
	if ps := bad.Check(); !strings.Contains(fieldsOf(ps), "timezone") {
		t.Errorf("an unknown zone: %v", ps)
	}
}

func fieldsOf(ps []Problem) string {
	var f []string
	for _, p := range ps {
		f = append(f, p.Field)
	}
	return strings.Join(f, " ")
}
