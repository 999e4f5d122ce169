package container

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"nanohost/internal/container/containertest"
)

// The production image cannot be built here (no base image can be pulled,
// and `docker build --check` needs BuildKit, which this engine lacks), so
// this test reads the Dockerfile the way the builder does — continuation
// lines joined, comments dropped — and checks what nanohost relies on.
func TestProductionDockerfile(t *testing.T) {
	root, err := containertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(data))
	if len(stages) != 2 {
		t.Fatalf("want a Go builder stage and the agent stage, got %d stages", len(stages))
	}
	build, final := stages[0], stages[1]

	if !strings.HasPrefix(build.from, "golang:") || !build.has("RUN", `CGO_ENABLED=0 go build .* ./cmd/nanoagent`) {
		t.Error("the builder stage must build ./cmd/nanoagent statically (CGO_ENABLED=0) from a golang image")
	}
	if !strings.HasPrefix(final.from, "node:") {
		t.Errorf("the agent stage is FROM %q, want a Node base", final.from)
	}
	for what, re := range map[string]string{
		"Claude Code CLI":         `npm install -g .*@anthropic-ai/claude-code`,
		"git":                     `apt-get install .*\bgit\b`,
		"build tools":             `apt-get install .*\bbuild-essential\b`,
		"tzdata (TZ is honoured)": `apt-get install .*\btzdata\b`,
	} {
		if !final.has("RUN", re) {
			t.Errorf("the agent image lacks %s", what)
		}
	}
	if !final.has("COPY", `--from=nanoagent .*/usr/local/bin/nanoagent`) {
		t.Error("nanoagent is not copied from the builder stage")
	}
	user := final.last("USER")
	if user == "" || user == "root" || user == "0" || strings.HasPrefix(user, "0:") {
		t.Errorf("USER %q: the image must end as a non-root user", user)
	}
	if ep := final.last("ENTRYPOINT"); !strings.Contains(ep, `"/usr/local/bin/nanoagent"`) {
		t.Errorf("ENTRYPOINT %s, want nanoagent", ep)
	}
	env := final.all("ENV")
	if !slices.ContainsFunc(env, func(e string) bool { return strings.Contains(e, "HOME="+DefaultHomeDir) }) {
		t.Errorf("ENV must set HOME=%s (the tmpfs nanohost mounts)", DefaultHomeDir)
	}
	if !slices.ContainsFunc(env, func(e string) bool { return strings.Contains(e, "TZ=") }) {
		t.Error("ENV must set a default TZ")
	}
	if final.has("RUN", regexp.QuoteMeta(DefaultHomeDir)) || final.has("WORKDIR", regexp.QuoteMeta(DefaultHomeDir)) {
		t.Errorf("the image must not create %s (Docker would copy its owner over the tmpfs)", DefaultHomeDir)
	}
}

type dockerStage struct {
	from  string
	instr [][2]string // instruction, arguments
}

func (s dockerStage) all(name string) []string {
	var out []string
	for _, in := range s.instr {
		if in[0] == name {
			out = append(out, in[1])
		}
	}
	return out
}

func (s dockerStage) last(name string) string {
	all := s.all(name)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1]
}

func (s dockerStage) has(name, pattern string) bool {
	re := regexp.MustCompile(pattern)
	return slices.ContainsFunc(s.all(name), re.MatchString)
}

var knownInstructions = []string{"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT",
	"VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}

func parseDockerfile(t *testing.T, src string) []dockerStage {
	t.Helper()
	var stages []dockerStage
	var logical []string
	cur := ""
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == "") {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur += strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		logical = append(logical, cur+trimmed)
		cur = ""
	}
	if cur != "" {
		t.Fatalf("Dockerfile ends inside a continued line: %q", cur)
	}
	for _, l := range logical {
		name, args, _ := strings.Cut(l, " ")
		name = strings.ToUpper(name)
		if !slices.Contains(knownInstructions, name) {
			t.Fatalf("unknown Dockerfile instruction %q", l)
		}
		if name == "FROM" {
			stages = append(stages, dockerStage{from: strings.Fields(args)[0]})
			continue
		}
		if len(stages) == 0 {
			if name != "ARG" {
				t.Fatalf("%s before the first FROM", name)
			}
			continue
		}
		st := &stages[len(stages)-1]
		st.instr = append(st.instr, [2]string{name, strings.TrimSpace(args)})
	}
	return stages
}
