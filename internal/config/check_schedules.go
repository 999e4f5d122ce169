package config

import (
	"fmt"
	"regexp"
	"time"

	"nanohost/internal/schedule"
)

var hookName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// checkSchedules checks timezone, every schedule's expression, and every
// webhook.
func (c *Config) checkSchedules() []Problem {
	var ps []Problem
	loc, err := c.Location()
	if err != nil {
		ps = append(ps, Problem{"timezone", err.Error(), "use an IANA zone name such as Europe/Berlin or UTC, or leave it out for the host's", true})
		loc = time.UTC
	}
	groups := configuredGroups(c)
	seen := map[string]bool{}
	for i, s := range c.Schedules {
		field := fmt.Sprintf("schedules[%d]", i)
		add := func(sub, msg, fix string) { ps = append(ps, Problem{field + sub, msg, fix, true}) }
		switch {
		case !hookName.MatchString(s.Name):
			add(".name", fmt.Sprintf("%q is not a schedule name", s.Name), "use lowercase letters, digits, - and _ (e.g. weekday-summary)")
		case seen[s.Name]:
			add(".name", fmt.Sprintf("%q is used twice", s.Name), "give every schedule its own name")
		}
		seen[s.Name] = true
		if !groups[s.Group] {
			add(".group", fmt.Sprintf("%q is not a configured group", s.Group), "name a group from groups: (its folder)")
		}
		if (s.Pipeline == "") == (s.Prompt == "") {
			add("", "needs exactly one of pipeline and prompt", "set pipeline: <a stored pipeline's name> (with inputs:) or prompt: <text for the agent>")
		}
		if !oneOf(s.ContextMode, "", "group", "isolated") {
			add(".context_mode", fmt.Sprintf("%q is not a context mode", s.ContextMode), "use group (the group's conversation) or isolated (a fresh session)")
		}
		if !oneOf(s.CatchUp, "", "once", "skip") {
			add(".catch_up", fmt.Sprintf("%q is not a catch-up policy", s.CatchUp), "use once (a fire missed while down runs once at start-up) or skip")
		}
		if _, err := s.Next(time.Now(), loc); err != nil {
			add(".when", err.Error(), `use cron ("0 9 * * 1-5"), "every 30m" or "at 2026-12-01 09:00"`)
		}
	}
	return append(ps, c.checkWebhooks()...)
}

// Next is when s fires next after now, read in loc.
func (s Schedule) Next(now time.Time, loc *time.Location) (time.Time, error) {
	typ, value, err := schedule.ParseWhen(s.When)
	if err != nil {
		return time.Time{}, err
	}
	spec, err := schedule.Parse(typ, value, loc)
	if err != nil {
		return time.Time{}, err
	}
	next, ok := spec.First(now)
	if !ok || next.IsZero() {
		return time.Time{}, fmt.Errorf("%q never fires again (it is in the past)", s.When)
	}
	return next, nil
}

func (c *Config) checkWebhooks() []Problem {
	var ps []Problem
	seen := map[string]bool{}
	groups := configuredGroups(c)
	for i, h := range c.Webhooks {
		field := fmt.Sprintf("webhooks[%d]", i)
		add := func(sub, msg, fix string) { ps = append(ps, Problem{field + sub, msg, fix, true}) }
		switch {
		case !hookName.MatchString(h.Name):
			add(".name", fmt.Sprintf("%q is not a hook name", h.Name), "use lowercase letters, digits, - and _: it is the path /hooks/<name>")
		case seen[h.Name]:
			add(".name", fmt.Sprintf("%q is used twice", h.Name), "give every webhook its own name")
		}
		seen[h.Name] = true
		if len(h.Secret) < 16 {
			add(".secret", "is missing or shorter than 16 characters: nobody could be told from a forger", "set secret: ${HOOK_SECRET} with a long random value in the environment (openssl rand -hex 32)")
		}
		if (h.Pipeline == "") == (h.Prompt == "") {
			add("", "needs exactly one of pipeline and prompt", "set pipeline: <a stored pipeline's name> or prompt: <text for the agent>")
		}
		if h.Group != "" && !groups[h.Group] {
			add(".group", fmt.Sprintf("%q is not a configured group", h.Group), "name a group from groups: (its folder)")
		}
	}
	return ps
}

// configuredGroups is the set of group folders a schedule or webhook may
// name: the configured groups, and the console's main group when it is on.
func configuredGroups(c *Config) map[string]bool {
	groups := map[string]bool{"main": c.Console.Enabled != "false"}
	for _, g := range c.Groups {
		groups[g.Folder] = true
	}
	return groups
}
