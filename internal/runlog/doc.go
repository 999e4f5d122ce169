// Package runlog is how a run is told to people: which events show at a
// verbosity, one line per event (the live log), the thread's own rules on
// top of it, the status card folded from the events, gate prompts and
// their resolutions, durations and costs. It is pure presentation — no I/O,
// no state beyond what it is given — shared by the CLI, the chat threads
// (Slack and the console) and the dashboard, so a run reads the same
// everywhere. The engine emits data; this package words it.
package runlog
