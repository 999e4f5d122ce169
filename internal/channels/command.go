package channels

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"nanohost/internal/pipeline/lint/didyoumean"
	"nanohost/internal/runlog"
	"nanohost/internal/runs"
)

// CommandKind names a /pipeline subcommand.
type CommandKind string

const (
	CmdHelp     CommandKind = "help"
	CmdRunDOT   CommandKind = "run_dot" // /pipeline <DOT>
	CmdRunNamed CommandKind = "run"     // /pipeline run <name> [goal…]
	CmdList     CommandKind = "list"
	CmdStatus   CommandKind = "status"
	CmdAnswer   CommandKind = "answer" // /pipeline answer <run> <key|label|text>
	CmdCancel   CommandKind = "cancel"
	CmdResume   CommandKind = "resume"
	CmdValidate CommandKind = "validate"
	CmdSchedule CommandKind = "schedule" // /schedule …: Schedule says what
)

// Command is a parsed /pipeline command. The host executes it.
type Command struct {
	Kind CommandKind
	// DOT is the pipeline source (CmdRunDOT, CmdValidate), cleaned of the
	// damage chat clients do to pasted code.
	DOT string
	// Name is the stored pipeline's name (CmdRunNamed).
	Name string
	// Goal overrides the pipeline's goal (CmdRunNamed), "" for none.
	Goal string
	// Inputs are the run's inputs (CmdRunNamed): the key=value words
	// right after the name.
	Inputs map[string]string
	// RunID is the run addressed as typed — its id, short id or a unique
	// prefix of either (CmdStatus: optional; CmdAnswer, CmdCancel,
	// CmdResume).
	RunID string
	// Answer is what CmdAnswer answers with: a choice's key or name, or
	// free text for a question that takes it.
	Answer string
	// Verbosity is the --verbosity flag, "" when not given.
	Verbosity runs.Verbosity
	// Schedule is a /schedule command (CmdSchedule).
	Schedule *ScheduleCommand
}

// StartsRun reports whether the command starts or restarts a run.
func (c Command) StartsRun() bool {
	return c.Kind == CmdRunDOT || c.Kind == CmdRunNamed || c.Kind == CmdResume
}

// Changes reports whether the command changes a run (and so needs the
// permission to start runs): start, resume or cancel.
func (c Command) Changes() bool {
	if c.Kind == CmdSchedule {
		return c.Schedule != nil && c.Schedule.Action != "list" && c.Schedule.Action != "help"
	}
	return c.StartsRun() || c.Kind == CmdCancel
}

// ParseAny parses a /pipeline or a /schedule command.
func ParseAny(text string) (Command, error) {
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "/schedule") && (len(t) == len("/schedule") || unicode.IsSpace(rune(t[len("/schedule")]))) {
		sc, err := ParseSchedule(t)
		if err != nil {
			return Command{}, err
		}
		return Command{Kind: CmdSchedule, Schedule: &sc}, nil
	}
	return ParseCommand(text)
}

var subcommands = []string{"run", "list", "status", "answer", "cancel", "resume", "validate", "help"}

// ParseCommand parses the text of a /pipeline command (with or without the
// leading "/pipeline"). It first undoes what Slack and friends do to pasted
// code: code fences, smart quotes, HTML entities and link markup.
func ParseCommand(text string) (Command, error) {
	text = CleanPasted(text)
	text = strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(text, "/pipeline"); ok && (rest == "" || unicode.IsSpace(rune(rest[0]))) {
		text = strings.TrimSpace(rest)
	}
	text, verbosity, err := extractVerbosity(text)
	if err != nil {
		return Command{}, err
	}
	cmd, err := parseSubcommand(strings.TrimSpace(text))
	if err != nil {
		return Command{}, err
	}
	cmd.Verbosity = verbosity
	return cmd, nil
}

func parseSubcommand(text string) (Command, error) {
	if text == "" {
		return Command{Kind: CmdHelp}, nil
	}
	if looksLikeDOT(text) {
		return Command{Kind: CmdRunDOT, DOT: text}, nil
	}
	word, rest := cutWord(text)
	switch sub := strings.ToLower(word); sub {
	case "help":
		return Command{Kind: CmdHelp}, nil
	case "list":
		if rest != "" {
			return Command{}, fmt.Errorf("list takes no arguments (got %q)", rest)
		}
		return Command{Kind: CmdList}, nil
	case "status":
		id, extra := cutWord(rest)
		if extra != "" {
			return Command{}, fmt.Errorf("status takes at most one run id (got %q): /pipeline status [run]", rest)
		}
		return Command{Kind: CmdStatus, RunID: id}, nil
	case "cancel", "resume":
		id, extra := cutWord(rest)
		if id == "" || extra != "" {
			return Command{}, fmt.Errorf("%s needs exactly one run id: /pipeline %s <run>", sub, sub)
		}
		return Command{Kind: CommandKind(sub), RunID: id}, nil
	case "answer":
		id, answer := cutWord(rest)
		if id == "" || answer == "" {
			return Command{}, errors.New("answer needs a run and an answer: /pipeline answer <run> <key|choice|text>")
		}
		return Command{Kind: CmdAnswer, RunID: id, Answer: unquote(answer)}, nil
	case "validate":
		if rest == "" {
			return Command{}, errors.New("validate needs a pipeline: /pipeline validate <DOT>")
		}
		return Command{Kind: CmdValidate, DOT: rest}, nil
	case "run":
		return parseRun(rest)
	}
	msg := fmt.Sprintf("unknown subcommand %q", word)
	if guess := didyoumean.Closest(word, subcommands); guess != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", guess)
	}
	return Command{}, fmt.Errorf("%s; a pipeline pasted inline must start with `digraph` — see /pipeline help", msg)
}

func parseRun(rest string) (Command, error) {
	if rest == "" {
		return Command{}, errors.New("run needs a pipeline name: /pipeline run <name> [goal…]")
	}
	if looksLikeDOT(rest) {
		return Command{Kind: CmdRunDOT, DOT: rest}, nil
	}
	name, rest := cutWord(rest)
	inputs, goal, err := ParseInputs(rest)
	if err != nil {
		return Command{}, err
	}
	return Command{Kind: CmdRunNamed, Name: name, Goal: unquote(goal), Inputs: inputs}, nil
}

// ParseInputs takes the leading key=value words of text as inputs (a value
// may be quoted: ref="release 2"), and returns the rest, from the first
// word that is not one. A key given twice keeps its last value.
func ParseInputs(text string) (inputs map[string]string, rest string, err error) {
	rest = strings.TrimSpace(text)
	for rest != "" {
		key, after, ok := strings.Cut(rest, "=")
		if !ok || key == "" || strings.IndexFunc(key, unicode.IsSpace) >= 0 || !runs.ValidInputKey(key) {
			break
		}
		value, remaining, err := cutValue(after)
		if err != nil {
			return nil, "", fmt.Errorf("input %s: %w", key, err)
		}
		if inputs == nil {
			inputs = map[string]string{}
		}
		inputs[key] = value
		rest = strings.TrimSpace(remaining)
	}
	return inputs, rest, nil
}

// cutValue splits off one value: a quoted string ("…" or '…') or the word
// up to the next space.
func cutValue(s string) (value, rest string, err error) {
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		end := strings.IndexByte(s[1:], s[0])
		if end < 0 {
			return "", "", fmt.Errorf("the quote %c is not closed", s[0])
		}
		return s[1 : end+1], s[end+2:], nil
	}
	if i := strings.IndexFunc(s, unicode.IsSpace); i >= 0 {
		return s[:i], s[i:], nil
	}
	return s, "", nil
}

// looksLikeDOT reports whether text starts a DOT graph.
func looksLikeDOT(text string) bool {
	word, _ := cutWord(text)
	word = strings.ToLower(word)
	if i := strings.IndexByte(word, '{'); i >= 0 {
		word = word[:i]
	}
	return word == "digraph" || word == "strict" || word == "graph"
}

// cutWord splits off the first whitespace-separated word.
func cutWord(s string) (word, rest string) {
	s = strings.TrimSpace(s)
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimSpace(s[i:])
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' && s[len(s)-1] == '"' || s[0] == '\'' && s[len(s)-1] == '\'') {
		return s[1 : len(s)-1]
	}
	return s
}

// extractVerbosity removes every --verbosity flag found outside double
// quotes (so a DOT label mentioning it is left alone) and returns the last
// value given.
func extractVerbosity(text string) (string, runs.Verbosity, error) {
	const flag = "--verbosity"
	var out strings.Builder
	var verbosity runs.Verbosity
	inQuote := false
	for i := 0; i < len(text); {
		c := text[i]
		if c == '"' && (i == 0 || text[i-1] != '\\') {
			inQuote = !inQuote
		}
		atWordStart := i == 0 || unicode.IsSpace(rune(text[i-1]))
		if !inQuote && atWordStart && strings.HasPrefix(text[i:], flag) {
			after := text[i+len(flag):]
			var value string
			switch {
			case strings.HasPrefix(after, "="):
				value, after = cutWordRaw(after[1:])
			case after == "" || unicode.IsSpace(rune(after[0])):
				value, after = cutWordRaw(strings.TrimLeftFunc(after, unicode.IsSpace))
			default:
				out.WriteByte(c)
				i++
				continue
			}
			if value == "" {
				return "", "", errors.New("--verbosity needs a value: minimal, standard or verbose")
			}
			v, err := runs.ParseVerbosity(value)
			if err != nil {
				return "", "", err
			}
			verbosity = v
			out.WriteByte(' ')
			i = len(text) - len(after)
			continue
		}
		out.WriteByte(c)
		i++
	}
	return out.String(), verbosity, nil
}

// cutWordRaw splits off the leading run of non-space bytes without trimming.
func cutWordRaw(s string) (word, rest string) {
	i := strings.IndexFunc(s, unicode.IsSpace)
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// MistypedCommand is what the host answers, itself, to a message that is a
// /word but not one of its commands — so it is never sent to the agent as
// chat: for /pipeline typed wrong ("/pipelin list") the command it probably
// meant; for a subcommand typed without /pipeline ("/status 3f9",
// "/cancel", "/runs") the /pipeline command; for /help the commands; for
// any other /word that it is not a command. "" for anything else (chat,
// /pipeline itself, the main group's /register, a path such as /tmp/x).
func MistypedCommand(text string) string {
	word, rest := cutWord(strings.TrimSpace(text))
	if !slashWord.MatchString(word) || strings.EqualFold(word, "/pipeline") || strings.EqualFold(word, "/register") {
		return ""
	}
	name := strings.ToLower(word[1:])
	if name == "help" {
		return runlog.CommandsHelp()
	}
	if sub, ok := bareSubcommands[name]; ok {
		return runlog.NotACommand(word, shortCommand("/pipeline "+sub+" "+rest, sub))
	}
	if didyoumean.Closest(word, []string{"/pipeline"}) == "" {
		return runlog.NotACommand(word, "")
	}
	fixed := strings.TrimSpace("/pipeline " + rest)
	if _, err := ParseCommand(fixed); err != nil {
		fixed = "/pipeline help"
	} else {
		sub, _ := cutWord(rest)
		fixed = shortCommand(fixed, sub)
	}
	return runlog.NotACommand(word, fixed)
}

// slashWord is a message's first word that looks like a command.
var slashWord = regexp.MustCompile(`^/[A-Za-z][A-Za-z0-9_-]*$`)

// bareSubcommands are /pipeline subcommands (and the words people try for
// them) typed without /pipeline: "/status" means /pipeline status.
var bareSubcommands = map[string]string{
	"run": "run", "list": "list", "runs": "list", "ls": "list", "status": "status", "answer": "answer",
	"cancel": "cancel", "stop": "cancel", "resume": "resume", "validate": "validate", "lint": "validate",
}

// shortCommand is cmd, shortened to "/pipeline sub …" when long (a pasted
// pipeline).
func shortCommand(cmd, sub string) string {
	cmd = strings.TrimSpace(cmd)
	if len(cmd) > 60 {
		return "/pipeline " + sub + " …"
	}
	return cmd
}
