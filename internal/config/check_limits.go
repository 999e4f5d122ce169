package config

import (
	"fmt"
	"os"
)

// minMemory is the least memory Docker accepts for a container.
const minMemory = 6 << 20

// checkLimits checks the values serve hands on as they are — container
// limits, timeouts, rates — so that config check refuses what serve would
// refuse (or pass on to Docker, which would refuse it when the first agent
// starts).
func (c *Config) checkLimits() []Problem {
	var ps []Problem
	add := func(field, msg, fix string) {
		ps = append(ps, Problem{Field: field, Message: msg, Fix: fix, Blocking: true})
	}
	r := c.Runtime
	if mem, err := ParseSize(r.Memory); err != nil {
		add("runtime.memory", fmt.Sprintf("%q is not a size", r.Memory), "write a size such as 512m or 2g (k, m and g are KiB, MiB and GiB)")
	} else if mem < minMemory {
		add("runtime.memory", fmt.Sprintf("%q is less than the 6m Docker allows a container (agents must run with a memory limit)", r.Memory), "set it to 2g (the default) or at least 512m")
	}
	if r.CPUs <= 0 {
		add("runtime.cpus", fmt.Sprintf("is %v: each agent container needs more than 0 CPUs", r.CPUs), "set it to 1 (the default), or 0.5 for half a CPU")
	}
	if r.Pids <= 0 {
		add("runtime.pids", fmt.Sprintf("is %d: each agent container needs to run at least 1 process", r.Pids), "set it to 512 (the default)")
	}
	if r.IdleTimeout < 0 {
		add("runtime.idle_timeout", fmt.Sprintf("%s is negative", r.IdleTimeout), "set a duration such as 10m (the default)")
	}
	if r.NodeTimeout < 0 {
		add("runtime.node_timeout", fmt.Sprintf("%s is negative", r.NodeTimeout), "set a duration such as 30m, or leave it out (no default timeout)")
	}
	if r.Agent == "script" && r.Script != "" {
		if _, err := os.Stat(r.Script); err != nil {
			add("runtime.script", fmt.Sprintf("%s cannot be read: %v", r.Script, err), "point it at an existing S.json script file (relative to where nanohost runs)")
		}
	}
	if c.Pipelines.MaxConcurrentRuns < 1 {
		add("pipelines.max_concurrent_runs", fmt.Sprintf("is %d: at least 1 run must be able to execute", c.Pipelines.MaxConcurrentRuns), "set it to 20 (the default)")
	}
	if n := c.Workspaces.Spares; n < 0 {
		add("workspaces.spares", fmt.Sprintf("%d is negative", n), "set it to 1 (the default), or 0 for no spare trees")
	}
	i := c.IPC
	if i.Rescan <= 0 {
		add("ipc.rescan", fmt.Sprintf("is %s: must be more than 0", i.Rescan), "set it to 2s (the default)")
	}
	if i.MaxRequestBytes <= 0 {
		add("ipc.max_request_bytes", fmt.Sprintf("is %d: must be more than 0", i.MaxRequestBytes), "set it to 2097152 (2 MiB, the default)")
	}
	if i.PipelinesPerHour < 0 {
		add("ipc.pipelines_per_hour", fmt.Sprintf("%d is negative", i.PipelinesPerHour), "set it to 30 (the default), or 0 for no limit")
	}
	if i.MessagesPerMinute < 0 {
		add("ipc.messages_per_minute", fmt.Sprintf("%d is negative", i.MessagesPerMinute), "set it to 30 (the default), or 0 for no limit")
	}
	return ps
}
