package container

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestContainersAreLockedDownAndSecretsStayOutOfInspect(t *testing.T) {
	t.Parallel()
	const secret = "sk-ant-TEST-5ecret-value-0123456789"
	h := newHarness(t, func(c *Config) {
		c.Network = "" // the default, bridge
		c.Limits = Limits{MemoryBytes: 300 << 20, CPUs: 0.5, Pids: 64}
		c.Secrets = map[string]string{"ANTHROPIC_API_KEY": secret}
		c.TZ = "Asia/Tokyo"
		c.Agent = AgentConfig{Kind: "command", Command: `printf '%s|%s|%s|%s' "$(printf %s "$ANTHROPIC_API_KEY" | tr a-z A-Z)" "$(id -u)" "$(cat /proc/self/status | grep CapEff)" "$TZ"`}
	})
	res := h.mustRun(codergenReq("run-sec", "n", "full"))
	got := strings.Split(res.Text, "|")
	// Upper-cased, as the secret itself is redacted from answers.
	if len(got) != 4 || got[0] != strings.ToUpper(secret) {
		t.Fatalf("the agent process did not get its secret from stdin: %q", res.Text)
	}
	if got[1] == "0" {
		t.Errorf("the agent runs as root")
	}
	if !strings.HasSuffix(strings.TrimSpace(got[2]), "0000000000000000") {
		t.Errorf("the agent has capabilities: %q", got[2])
	}
	if got[3] != "Asia/Tokyo" {
		t.Errorf("the agent's TZ is %q, want the configured Asia/Tokyo", got[3])
	}

	live := h.running(map[string]string{LabelRun: "run-sec"})
	if len(live) != 1 {
		t.Fatalf("want the live session container, got %d", len(live))
	}
	insp, err := h.d.Client().ContainerInspect(context.Background(), live[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	hc := insp.HostConfig
	checks := []struct {
		what string
		ok   bool
	}{
		{"all capabilities dropped", slices.Equal(hc.CapDrop, []string{"ALL"}) && len(hc.CapAdd) == 0},
		{"no-new-privileges", slices.Contains(hc.SecurityOpt, "no-new-privileges")},
		{"read-only root filesystem", hc.ReadonlyRootfs},
		{"not privileged", !hc.Privileged},
		{"memory limit 300 MiB without extra swap", hc.Memory == 300<<20 && hc.MemorySwap == 300<<20},
		{"half a CPU", hc.NanoCPUs == 5e8},
		{"pids limit 64", hc.PidsLimit != nil && *hc.PidsLimit == 64},
		{"default bridge network", string(hc.NetworkMode) == "bridge"},
		{"init reaps zombies", hc.Init != nil && *hc.Init},
		{"non-root user", insp.Config.User == "1000:1000"},
		{"tmpfs /tmp and HOME", hc.Tmpfs["/tmp"] != "" && hc.Tmpfs[DefaultHomeDir] != ""},
		{"labelled", insp.Config.Labels[LabelManaged] == "true" && insp.Config.Labels[LabelHost] == h.cfg.HostID &&
			insp.Config.Labels[LabelNode] == "n" && insp.Config.Labels[LabelThread] == "main"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("docker inspect: want %s", c.what)
		}
	}
	for _, m := range insp.Mounts {
		if strings.Contains(m.Source, "docker.sock") || strings.Contains(m.Destination, "docker.sock") {
			t.Errorf("the Docker socket is mounted: %+v", m)
		}
	}
	raw, _ := json.Marshal(insp)
	if strings.Contains(string(raw), secret) {
		t.Errorf("the secret is visible in docker inspect")
	}
	if h.logs.Contains(secret) {
		t.Errorf("the secret was logged")
	}
}

func TestNetworkNoneIsHonoured(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) {
		c.Network = "none"
		c.Agent = AgentConfig{Kind: "command", Command: `ls /sys/class/net | tr '\n' ' '`}
	})
	res := h.mustRun(codergenReq("run-net", "n", "compact"))
	if strings.TrimSpace(res.Text) != "lo" {
		t.Errorf("with network none the container has interfaces %q, want only lo", res.Text)
	}
}

// An agent that prints its environment — in its answer, a status file, on
// stderr before dying, or straight onto the container's stdout — cannot get
// a secret into the run's results, errors or the host's logs.
func TestSecretsAreRedactedFromWhatContainersReturn(t *testing.T) {
	t.Parallel()
	const secret = "sk-ant-LEAKY-0123456789abcdef"
	h := newHarness(t, func(c *Config) {
		c.Secrets = map[string]string{"ANTHROPIC_API_KEY": secret, "SHORT": "1"}
		c.Agent = AgentConfig{Kind: "command", Command: `echo "stray $ANTHROPIC_API_KEY" > /proc/1/fd/1
case "$NANOHOST_NODE_ID" in
	talk) printf '{"outcome": "success", "notes": "key %s"}' "$ANTHROPIC_API_KEY" > "$NANOHOST_OUTCOME_FILE"
	      echo "my key is $ANTHROPIC_API_KEY, short is $SHORT" ;;
	die)  echo "fatal: bad key $ANTHROPIC_API_KEY" >&2; sleep 1; kill -9 $PPID; sleep 5 ;;
	fail) echo "auth failed for $ANTHROPIC_API_KEY" >&2; exit 1 ;;
esac`}
	})
	req := codergenReq("run-leak", "talk", "compact")
	req.StageDir = t.TempDir()
	res := h.mustRun(req)
	if strings.Contains(res.Text, secret) || !strings.Contains(res.Text, "[secret ANTHROPIC_API_KEY redacted]") {
		t.Errorf("answer %q: want the secret redacted", res.Text)
	}
	if !strings.Contains(res.Text, "short is 1") {
		t.Errorf("answer %q: a one-character value must not be redacted everywhere", res.Text)
	}
	if res.Outcome == nil || strings.Contains(res.Outcome.Notes, secret) {
		t.Errorf("status file notes %+v: want the secret redacted", res.Outcome)
	}
	if data, _ := os.ReadFile(filepath.Join(req.StageDir, "status.json")); strings.Contains(string(data), secret) {
		t.Errorf("the stored status.json holds the secret")
	}
	for _, node := range []string{"die", "fail"} {
		_, err := h.run(codergenReq("run-leak", node, "compact"))
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "redacted") {
			t.Errorf("%s: error %v; want the agent's message with the secret redacted", node, err)
		}
	}
	if h.logs.Contains(secret) {
		t.Errorf("the secret reached the host's logs")
	}
	if !h.logs.Contains("stray [secret ANTHROPIC_API_KEY redacted]") {
		t.Errorf("stray stdout was not logged (redacted); the test did not exercise that path:\n%s", h.logs.String())
	}
}
