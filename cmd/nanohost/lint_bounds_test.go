//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nanohost/internal/pipeline/dot"
	"nanohost/internal/pipeline/lint"
)

// largestAttributeFile is one node with as many short attributes as the
// parser accepts (tokens under dot's MaxTokens, bytes under its MaxBytes),
// every other one a near miss of a known key, so each asks for a "did you
// mean": what an agent sends to keep the host busy. extra attributes more
// go over the token limit; values of valueLen bytes reach the byte limit
// first.
func largestAttributeFile(extra, valueLen int) string {
	known := []string{"prompt", "label", "shape", "goal_gate", "max_retries", "timeout", "llm_model", "fidelity",
		"retry_target", "thread_id", "reasoning_effort", "llm_provider", "allow_partial", "auto_status"}
	lim := dot.DefaultLimits
	var b strings.Builder
	b.WriteString("digraph G { start [shape=Mdiamond]; exit [shape=Msquare]; start -> n -> exit; n [")
	const tokensPerAttr, overhead = 4, 40
	for i := 0; ; i++ {
		key := fmt.Sprintf("q%x", i)
		if i%2 == 1 {
			k := known[i%len(known)]
			key = fmt.Sprintf("%s%x", k[:len(k)-2], i)
		}
		attr := key + "=" + strings.Repeat("v", valueLen) + ","
		if extra == 0 && ((i+1)*tokensPerAttr+overhead > lim.MaxTokens || b.Len()+len(attr)+4 > lim.MaxBytes) {
			break
		}
		if extra > 0 && (i+1)*tokensPerAttr > lim.MaxTokens+extra*tokensPerAttr {
			break
		}
		b.WriteString(attr)
	}
	b.WriteString("] }\n")
	return b.String()
}

// manyTargetsFile is as many nodes as the parser accepts, each naming a
// retry target that does not exist but is one edit from a node that does.
func manyTargetsFile() string {
	var b strings.Builder
	b.WriteString("digraph G {\nstart [shape=Mdiamond]\nexit [shape=Msquare]\nstart -> node0 -> exit\n")
	for i := 0; i < dot.DefaultLimits.MaxNodes-2; i++ {
		fmt.Fprintf(&b, "node%d [prompt=\"p\", retry_target=\"nodf%d\"]\n", i, i)
	}
	b.WriteString("}\n")
	return b.String()
}

// TestLintOfTheLargestAcceptedFileIsBounded: `pipeline validate` of the
// largest files the parser accepts, built to make the lint work hardest,
// costs at most a second of CPU and 200 MB of memory, and prints at most
// lint.MaxPerRule diagnostics per rule with "and N more"; a file over the
// parser's limits is refused before anything else looks at it.
func TestLintOfTheLargestAcceptedFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, src, want string
		code            int
	}{
		{"attributes", largestAttributeFile(0, 1), "more attr_unknown warnings like the", 0},
		{"long attributes", largestAttributeFile(0, 20), "more attr_unknown warnings like the", 0},
		{"targets", manyTargetsFile(), "more retry_target_exists", 1},
		{"over the limit", largestAttributeFile(50000, 1), fmt.Sprintf("more than %d tokens", dot.DefaultLimits.MaxTokens), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if len(c.src) > dot.DefaultLimits.MaxBytes {
				t.Fatalf("the %s file is %d bytes, over the parser's limit", c.name, len(c.src))
			}
			path := writeFile(t, dir, strings.ReplaceAll(c.name, " ", "-")+".dot", c.src)
			out, code, cpu, rss := measured(t, nanohostBin, "pipeline", "validate", path)
			t.Logf("%s: %d bytes, exit %d, %v CPU, %d MB peak memory", c.name, len(c.src), code, cpu.Round(time.Millisecond), rss>>20)
			if code != c.code && !(c.code == 1 && code == 2) {
				t.Errorf("exit %d, want %d:\n%s", code, c.code, tail(out))
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("the output lacks %q:\n%s", c.want, tail(out))
			}
			if lines := strings.Count(out, "\n"); lines > 10*lint.MaxPerRule {
				t.Errorf("%d lines of diagnostics: the per-rule cap does not hold", lines)
			}
			if rss > 200<<20 {
				t.Errorf("validate took %d MB: over 200 MB", rss>>20)
			}
			if cpu > time.Second {
				// CPU time grows on a machine busy with other work (shared
				// caches, the collector's threads waiting): measure the
				// machine now by the parser alone on the same file, which
				// validate runs too, and allow what lint adds on top of it.
				_, _, parse, _ := measured(t, nanohostBin, "pipeline", "parse", path)
				if cpu > parseShare*parse {
					t.Errorf("validate took %v of CPU, over 1 s and over %v× the %v the parse alone took now", cpu, parseShare, parse)
				}
			}
		})
	}
}

// parseShare bounds validate's CPU by the parse's of the same file when a
// busy machine makes the 1 s bound meaningless: validate takes 1.6-1.7
// times the parse ("attributes" at load 20: 0.70-0.78 s and 0.43-0.49 s),
// a lint rule gone quadratic many times that.
const parseShare = 3

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// measured runs name with args and returns its output, exit code, CPU time
// and peak memory. The peak is the child's own only when its parent is
// small: Linux counts in a child's ru_maxrss the memory of the process it
// was forked from, up to its exec (here, this test binary — hundreds of MB
// under -race). So this binary runs again as a small middleman
// (rusageHelper) that starts the command and reports its rusage.
func measured(t *testing.T, name string, args ...string) (out string, code int, cpu time.Duration, rss int64) {
	t.Helper()
	report := filepath.Join(t.TempDir(), "rusage.json")
	spec, _ := json.Marshal(append([]string{name}, args...))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NANOHOST_RUSAGE_CMD="+string(spec), "NANOHOST_RUSAGE_REPORT="+report)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the rusage middleman: %v\n%s", err, b)
	}
	var r rusageReport
	data, err := os.ReadFile(report)
	if err != nil || json.Unmarshal(data, &r) != nil {
		t.Fatalf("no rusage report (%v):\n%s", err, b)
	}
	return r.Output, r.Code, time.Duration(r.CPUNanos), r.MaxRSSKiB << 10
}

type rusageReport struct {
	Output    string `json:"output"`
	Code      int    `json:"code"`
	CPUNanos  int64  `json:"cpu_ns"`
	MaxRSSKiB int64  `json:"max_rss_kib"`
}

// rusageHelper is the middleman of measured: when this test binary is
// started with NANOHOST_RUSAGE_CMD, it runs that command, writes its
// rusage to NANOHOST_RUSAGE_REPORT and exits, before any test or TestMain.
func init() {
	spec := os.Getenv("NANOHOST_RUSAGE_CMD")
	if spec == "" {
		return
	}
	var argv []string
	if err := json.Unmarshal([]byte(spec), &argv); err != nil || len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "bad NANOHOST_RUSAGE_CMD:", err)
		os.Exit(2)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	data, _ := json.Marshal(rusageReport{Output: out.String(), Code: cmd.ProcessState.ExitCode(),
		CPUNanos: ru.Utime.Nano() + ru.Stime.Nano(), MaxRSSKiB: ru.Maxrss})
	if err := os.WriteFile(os.Getenv("NANOHOST_RUSAGE_REPORT"), data, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(0)
}
