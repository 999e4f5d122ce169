package main

// What the command line says when a command or flag is mistyped: an
// unknown subcommand or flag exits 2 with the near one (a typo in CI must
// not print help and pass), and a subcommand of a group typed without its
// group (`nanohost run`) points at the group's (`nanohost pipeline run`).

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"nanohost/internal/pipeline/lint/didyoumean"
)

// refuseUnknownSubcommands makes every command that only groups others
// (the root, pipeline, runs, config) refuse an argument that names none of
// them, instead of printing its help and exiting 0.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	if cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil {
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return c.Help()
			}
			return exitCode(2, unknownCommand(c, args[0]))
		}
	}
	for _, sub := range cmd.Commands() {
		refuseUnknownSubcommands(sub)
	}
}

// unknownCommand says which command was not found and the near ones.
func unknownCommand(parent *cobra.Command, name string) error {
	var near []string
	// A group's subcommand typed at this level: `nanohost run`.
	for _, group := range parent.Commands() {
		if !group.HasSubCommands() {
			continue
		}
		sub := commandNames(group)
		for _, s := range sub {
			if s == name {
				near = append(near, group.CommandPath()+" "+s)
			}
		}
	}
	if guess := didyoumean.Closest(name, commandNames(parent)); guess != "" {
		near = append(near, parent.CommandPath()+" "+guess)
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, parent.CommandPath())
	if len(near) > 0 {
		msg += " (did you mean `" + strings.Join(near, "` or `") + "`?)"
	}
	return fmt.Errorf("%s; `%s --help` lists its commands", msg, parent.CommandPath())
}

func commandNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
			names = append(names, c.Aliases...)
		}
	}
	return names
}

var unknownFlag = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^unknown (?:shorthand )?flag: '?-{1,2}([^' ]+)'?`)
})

// suggestFlag adds the near flag to an unknown flag's error, and exits 2.
func suggestFlag(cmd *cobra.Command, err error) error {
	m := unknownFlag().FindStringSubmatch(err.Error())
	if m == nil {
		return exitCode(2, fmt.Errorf("%w (see `%s --help`)", err, cmd.CommandPath()))
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if guess := didyoumean.Closest(strings.TrimLeft(m[1], "-"), names); guess != "" {
		return exitCode(2, fmt.Errorf("%w (did you mean --%s?)", err, guess))
	}
	return exitCode(2, fmt.Errorf("%w (see `%s --help`)", err, cmd.CommandPath()))
}
