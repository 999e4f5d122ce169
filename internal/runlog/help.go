package runlog

// The commands' usage, and what a message that looks like a command but is
// none is told (channels.MistypedCommand decides which).

// PipelineHelp is the /pipeline usage, shown by `/pipeline help` and after a
// command that does not parse.
const PipelineHelp = "Usage:\n" +
	"  /pipeline <DOT>                     run the pipeline pasted inline (code fences are fine; on the console\n" +
	"                                      paste it over as many lines as it takes: it runs at its closing } or ```)\n" +
	"  /pipeline run <name> [key=value…] [goal…]\n" +
	"                                      run a stored pipeline, with inputs (input.<key>) and optionally a new goal\n" +
	"  /pipeline list                      list the stored pipelines and the recent runs\n" +
	"  /pipeline status [run]              show a run's state and the question it waits on (or the recent runs)\n" +
	"  /pipeline answer <run> <choice>     answer a run's question: a choice's key or name, or your text\n" +
	"  /pipeline cancel <run>              cancel a run\n" +
	"  /pipeline resume <run>              resume an interrupted run from its checkpoint\n" +
	"  /pipeline validate <DOT>            check a pipeline without running it\n" +
	"  /pipeline help                      show this help\n" +
	"A run is named by its short id (the 3f9a1c in \"[Pipeline] Demo · 3f9a1c\") or the start of it.\n" +
	"Add --verbosity minimal|standard|verbose anywhere to choose how much is posted to the run's thread."

// ScheduleHelp is the /schedule usage.
const ScheduleHelp = "Usage:\n" +
	"  /schedule <when> <prompt…>                       ask the agent on a schedule (its answer is posted here)\n" +
	"  /schedule <when> pipeline <name> [key=value…]    run a stored pipeline on a schedule, with inputs\n" +
	"  /schedule list                                   list this chat's scheduled tasks\n" +
	"  /schedule pause|resume|cancel <id>               pause, resume or remove a task\n" +
	"<when> is a cron expression (0 9 * * 1-5, @daily), every 30m, or at 2026-12-01 09:00 — in the host's time zone."

// CommandsHelp answers /help: the host's commands.
func CommandsHelp() string {
	return "The host's commands are /pipeline … (and /register in the main group). " + PipelineHelp
}

// NotACommand answers a /word that is no command, with the command it
// probably meant ("" when none is near).
func NotACommand(word, meant string) string {
	if meant == "" {
		return word + " is not a command (/pipeline help lists the commands; a message for the agent does not start with /)"
	}
	return word + " is not a command — did you mean " + meant + "? (/pipeline help lists the commands)"
}
