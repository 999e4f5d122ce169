package interview

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"nanohost/internal/pipeline/engine"
)

// Console asks on a terminal (spec §6.4 ConsoleInterviewer): it prints
//
//	[?] Review the change
//	  [A] Approve
//	  [F] Fix
//	Select:
//
// and reads one line, asking again until the line names an option. It
// honours the question's timeout (answering "timeout") and cancellation, and
// answers "skipped" once In is exhausted. Use it by pointer; questions from
// parallel branches are asked one at a time.
//
// One goroutine owns In and reads it a line at a time, so a line typed after
// a question timed out answers the next question rather than being lost. It
// ends at EOF; if In never ends and no question comes, it waits for ever.
type Console struct {
	In  io.Reader
	Out io.Writer
	// Words words a question for people: the host passes
	// runlog.QuestionText, which also says why a gate asks again. Nil
	// prints the question's own prompt (Question.Text).
	Words func(engine.Question) string

	once  sync.Once
	lines chan line
	turn  chan struct{} // a one-slot semaphore: one question on screen at a time
	eof   bool          // In is exhausted; guarded by turn
	// queued counts the questions waiting for their turn (not yet printed),
	// so a test knows a question is held back rather than pausing to see.
	queued atomic.Int32
}

type line struct {
	text string
	err  error
}

// NewConsole returns a console interviewer on in and out.
func NewConsole(in io.Reader, out io.Writer) *Console {
	return &Console{In: in, Out: out}
}

func (c *Console) start() {
	c.once.Do(func() {
		c.lines = make(chan line)
		c.turn = make(chan struct{}, 1)
		go readLines(bufio.NewReader(c.In), c.lines)
	})
}

// readLines hands In to Ask one line at a time, then its error (io.EOF at the end).
func readLines(r *bufio.Reader, out chan<- line) {
	for {
		s, err := r.ReadString('\n')
		if s != "" {
			out <- line{text: strings.TrimRight(s, "\r\n")}
		}
		if err != nil {
			out <- line{err: err}
			return
		}
	}
}

// Ask prints q and waits for a line that answers it.
func (c *Console) Ask(ctx context.Context, q engine.Question) (engine.Answer, error) {
	c.start()
	c.queued.Add(1)
	select {
	case c.turn <- struct{}{}:
		c.queued.Add(-1)
		defer func() { <-c.turn }()
	case <-ctx.Done():
		c.queued.Add(-1)
		return engine.Answer{}, ctx.Err()
	}

	c.printQuestion(q)
	var timeout <-chan time.Time
	if q.TimeoutSeconds > 0 {
		t := time.NewTimer(time.Duration(q.TimeoutSeconds * float64(time.Second)))
		defer t.Stop()
		timeout = t.C
	}
	for {
		if c.eof {
			c.printf("(no input left: skipped)\n")
			return engine.Answer{Kind: engine.AnswerSkipped, By: "console"}, nil
		}
		c.printf("%s", prompt(q))
		select {
		case l := <-c.lines:
			if l.err != nil {
				c.eof = true
				if errors.Is(l.err, io.EOF) {
					continue
				}
				return engine.Answer{}, fmt.Errorf("read answer from console: %w", l.err)
			}
			if a, ok := interpret(q, l.text); ok {
				return a, nil
			}
			c.printf("%s\n", hint(q))
		case <-timeout:
			c.printf("\n(no answer in time)\n")
			return engine.Answer{Kind: engine.AnswerTimeout, By: "console"}, nil
		case <-ctx.Done():
			c.printf("\n(cancelled)\n")
			return engine.Answer{}, ctx.Err()
		}
	}
}

func (c *Console) printf(format string, args ...any) {
	if c.Out != nil {
		fmt.Fprintf(c.Out, format, args...)
	}
}

func (c *Console) printQuestion(q engine.Question) {
	text := q.Text
	if c.Words != nil {
		text = c.Words(q)
	}
	if text == "" {
		text = "Select an option:"
	}
	c.printf("[?] %s\n", text)
	if isYesNo(q) {
		return
	}
	for _, o := range q.Options {
		label := stripAccelerator(o.Label, o.Key)
		if o.Freeform {
			label += " (or type your own answer)"
		}
		if o.Key != "" {
			c.printf("  [%s] %s\n", o.Key, label)
		} else {
			c.printf("  - %s\n", label)
		}
	}
	if q.TimeoutSeconds > 0 {
		c.printf("  (answer within %s)\n", time.Duration(q.TimeoutSeconds*float64(time.Second)).Round(time.Millisecond))
	}
}

func isYesNo(q engine.Question) bool {
	return q.Type == engine.QuestionYesNo || q.Type == engine.QuestionConfirmation
}

func isFreeform(q engine.Question) bool {
	return q.Type == engine.QuestionFreeform || (!isYesNo(q) && len(q.Options) == 0)
}

func prompt(q engine.Question) string {
	switch {
	case isYesNo(q):
		return "[Y/N]: "
	case isFreeform(q):
		return "> "
	}
	return "Select: "
}

func hint(q engine.Question) string {
	switch {
	case isYesNo(q):
		return "Please answer y or n."
	case isFreeform(q):
		return "Please type an answer."
	}
	keys := make([]string, 0, len(q.Options))
	for _, o := range q.Options {
		if o.Key != "" {
			keys = append(keys, o.Key)
		}
	}
	return fmt.Sprintf("Please choose %s (or the option's number or label).", strings.Join(keys, ", "))
}

// interpret turns a typed line into an answer, or reports that it is none.
func interpret(q engine.Question, typed string) (engine.Answer, bool) {
	s := strings.TrimSpace(typed)
	if s == "" {
		return engine.Answer{}, false
	}
	answer := func(v string) (engine.Answer, bool) { return engine.Answer{Value: v, By: "console"}, true }
	switch {
	case isYesNo(q):
		switch strings.ToLower(s) {
		case "y", "yes":
			return answer("yes")
		case "n", "no":
			return answer("no")
		}
		return engine.Answer{}, false
	case isFreeform(q):
		return engine.Answer{Kind: engine.AnswerText, Text: s, By: "console"}, true
	}
	if i := matchOption(q.Options, s); i >= 0 {
		return answer(q.ChoiceValue(i))
	}
	for _, o := range q.Options {
		if o.Freeform {
			return engine.Answer{Kind: engine.AnswerText, Text: s, By: "console"}, true
		}
	}
	return engine.Answer{}, false
}

// matchOption finds the option s names, as the engine matches answers
// (engine.OptionIndex), or by its number in the list printed above.
func matchOption(options []engine.Option, s string) int {
	if i, ok := engine.OptionIndex(options, s); ok {
		return i
	}
	if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil && n >= 1 && n <= len(options) {
		return n - 1
	}
	return -1
}

// stripAccelerator removes the "[K] ", "K) " or "K - " prefix that spells
// the option's key, so the console does not print the key twice.
func stripAccelerator(label, key string) string {
	if key == "" {
		return label
	}
	for _, prefix := range []string{"[" + key + "]", key + ")", key + " -"} {
		if len(label) > len(prefix) && equalFold(label[:len(prefix)], prefix) {
			if rest := strings.TrimSpace(label[len(prefix):]); rest != "" {
				return rest
			}
		}
	}
	return label
}

func equalFold(a, b string) bool {
	return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}
