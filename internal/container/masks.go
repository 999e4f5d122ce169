package container

import (
	"fmt"
	"strings"

	"nanohost/internal/mounts"
	"nanohost/internal/pipeline/engine"
)

// A mask's folders and skills reach a container only when the node it runs
// wears the mask (engine.Request.Masks), read-only, and only after the mount
// allowlist accepted them (mounts.MaskGrants): folders at /workspace/masks/<mask>/<name>,
// skills at /workspace/mask-skills/<mask>/<skill>, where the runner installs
// them for that container (cmd/nanoagent/skills.go). A full-fidelity
// thread's live container is reused only by a node wearing the same masks
// (backend.go), so a grant never outlives its node.

// maskMounts are the mounts the masks a request wears grant, in equip order.
func (b *Backend) maskMounts(req engine.Request) ([]mounts.Mount, error) {
	var out []mounts.Mount
	for _, name := range req.Masks {
		ms, ok := b.cfg.MaskMounts[name]
		if !ok {
			return nil, fmt.Errorf("node %s wears mask %q, which the container backend was not given: define it under masks: in nanohost.yaml (or --masks FILE) and start again", req.NodeID, name)
		}
		out = append(out, ms...)
	}
	return out, nil
}

// wearing is a request's masks, and the provider whose agent the
// container runs, as one comparable value: a live container serves a
// thread's next node only when both are the same. Without runtime.agents
// every provider is served by the one agent, so a node naming another
// provider still continues the thread's live container.
func (c *Config) wearing(req engine.Request) string {
	provider := strings.ToLower(strings.TrimSpace(req.Provider))
	if len(c.Agents) == 0 {
		provider = ""
	}
	return strings.Join(req.Masks, ",") + "\x00" + provider
}
