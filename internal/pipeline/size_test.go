package pipeline

import "testing"

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", MaxExpandedSize: "16 MiB",
		50_000_000_000: "46.6 GiB", 1 << 62: "4 EiB",
	} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTextSizeCountsGoalInPromptlessLabels(t *testing.T) {
	g := New("g")
	g.Attrs["goal"] = "0123456789" // 10 bytes: each $goal adds 5
	a := g.AddNode("a")
	a.Attrs["label"] = "$goal and $goal"
	b := g.AddNode("b")
	b.Attrs["label"] = "$goal"
	b.Attrs["prompt"] = "p" // a prompt: the label is never expanded
	g.AddEdge("a", "b", Attrs{"weight": "1"})
	want := int64(len("goal0123456789") + len("label$goal and $goal") + len("label$goalpromptp") + len("weight1") + 2*5)
	if got := g.TextSize(); got != want {
		t.Errorf("TextSize = %d, want %d", got, want)
	}
	if got := GoalGrowth("$goal$goal", ""); got != -10 {
		t.Errorf("GoalGrowth with an empty goal = %d", got)
	}
}
