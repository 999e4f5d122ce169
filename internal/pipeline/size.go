package pipeline

import (
	"fmt"
	"strings"
)

// MaxExpandedSize bounds the text of a prepared pipeline: every attribute
// key and value of the graph, its nodes and its edges after default blocks,
// the model stylesheet, $goal expansion and custom transforms, with $goal in
// a label counted expanded too (the label stands in for a missing prompt).
//
// The DOT source is at most 4 MiB (dot.Limits), but text that is repeated
// grows without that bound: a node [prompt=…] default block is written once
// and copied to every node, and $goal is replaced by the whole goal in every
// prompt — a 520 KB file can ask for tens of gigabytes. Every step that can
// grow the text computes the size it would produce and refuses to produce
// more than this. 16 MiB is four times the largest source and far more than
// any prompt an agent can use.
const MaxExpandedSize = 16 << 20

// RuleExpansionLimit is the diagnostic rule of a pipeline refused because
// preparing it would pass MaxExpandedSize.
const RuleExpansionLimit = "expansion_limit"

// ExpansionError says a step of preparing a graph would make its text
// larger than MaxExpandedSize. It is returned before the text is produced.
type ExpansionError struct {
	Step string // what would grow the text: "$goal expansion", "the model_stylesheet", …
	Size int64  // the size the text would reach, in bytes
	Fix  string // how to stay under the limit
}

func (e *ExpansionError) Error() string {
	return fmt.Sprintf("%s would make the pipeline %s of text, over the %s limit on a prepared pipeline (MaxExpandedSize)",
		e.Step, FormatBytes(e.Size), FormatBytes(MaxExpandedSize))
}

// TextSize is the size of g's text as MaxExpandedSize counts it:
// AttrTextSize plus LabelGoalGrowth. It is a sum of lengths: nothing is
// copied.
func (g *Graph) TextSize() int64 { return g.AttrTextSize() + g.LabelGoalGrowth() }

// AttrTextSize is the size of every attribute key and value of the graph,
// its nodes and its edges.
func (g *Graph) AttrTextSize() int64 {
	n := attrsSize(g.Attrs)
	for _, node := range g.Nodes {
		n += attrsSize(node.Attrs)
	}
	for _, e := range g.Edges {
		n += attrsSize(e.Attrs)
	}
	return n
}

// LabelGoalGrowth is how much $goal in the labels of nodes without a prompt
// adds when the engine expands it (the label is then the prompt).
func (g *Graph) LabelGoalGrowth() int64 {
	var n int64
	for _, node := range g.Nodes {
		if node.Attrs["prompt"] == "" {
			n += GoalGrowth(node.Attrs["label"], g.Goal())
		}
	}
	return n
}

// GoalGrowth is how many bytes replacing every $goal in text by goal adds
// (negative when the goal is shorter than "$goal").
func GoalGrowth(text, goal string) int64 {
	return int64(strings.Count(text, goalVar)) * int64(len(goal)-len(goalVar))
}

// goalVar is what $goal expansion replaces (transform.ExpandGoal, and the
// engine for a label standing in for a prompt).
const goalVar = "$goal"

func attrsSize(a Attrs) int64 {
	var n int64
	for k, v := range a {
		n += int64(len(k) + len(v))
	}
	return n
}

// CheckExpanded returns an *ExpansionError when size passes MaxExpandedSize.
func CheckExpanded(step string, size int64, fix string) error {
	if size > MaxExpandedSize {
		return &ExpansionError{Step: step, Size: size, Fix: fix}
	}
	return nil
}

// FormatBytes renders a size for people: 512 B, 16 MiB, 49.7 GiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %ciB", int64(v), "KMGTPE"[exp])
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[exp])
}
