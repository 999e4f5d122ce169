package channels

import (
	"context"
	"fmt"
	"strings"

	"nanohost/internal/pipeline"
	"nanohost/internal/runlog"
)

// maxDiagnosticLines bounds a diagnostics reply: a chat message is not the
// place for a hundred lint findings, and the first few are what to fix first.
const maxDiagnosticLines = 20

// FormatDiagnostics renders diagnostics one per line with their line
// numbers (pipeline.Diagnostic.String), errors first, at most
// maxDiagnosticLines of them. file names the source (e.g. "pipeline.dot");
// "" keeps each diagnostic's own.
func FormatDiagnostics(file string, ds []pipeline.Diagnostic) string {
	if len(ds) == 0 {
		return runlog.Done("The pipeline is valid.")
	}
	ordered := make([]pipeline.Diagnostic, 0, len(ds))
	for _, sev := range []pipeline.Severity{pipeline.SeverityError, pipeline.SeverityWarning, pipeline.SeverityInfo} {
		for _, d := range ds {
			if d.Severity == sev {
				ordered = append(ordered, d)
			}
		}
	}
	errs := 0
	for _, d := range ds {
		if d.Severity == pipeline.SeverityError {
			errs++
		}
	}
	var b strings.Builder
	if errs > 0 {
		b.WriteString(runlog.Refused(fmt.Sprintf("The pipeline has %d error(s) and %d other finding(s):\n", errs, len(ds)-errs)))
	} else {
		b.WriteString(runlog.Done(fmt.Sprintf("The pipeline is valid, with %d finding(s):\n", len(ds))))
	}
	for i, d := range ordered {
		if i == maxDiagnosticLines {
			fmt.Fprintf(&b, "… and %d more (run `nanohost pipeline validate` for all of them)\n", len(ordered)-i)
			break
		}
		if file != "" {
			d.File = file
		}
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}

// ReplyDiagnostics tells user (only) what is wrong with the pipeline they
// sent, with line numbers.
func ReplyDiagnostics(ctx context.Context, ch Channel, chat, user, file string, ds []pipeline.Diagnostic) error {
	if err := ch.Ephemeral(ctx, chat, "", user, FormatDiagnostics(file, ds)); err != nil {
		return fmt.Errorf("reply diagnostics to %s in %s: %w", user, chat, err)
	}
	return nil
}

// ReplyCommandError tells user why their command did not parse, with the usage.
func ReplyCommandError(ctx context.Context, ch Channel, chat, user string, err error) error {
	text := runlog.Refused(fmt.Sprintf("%v\n\n%s", err, runlog.PipelineHelp))
	if perr := ch.Ephemeral(ctx, chat, "", user, text); perr != nil {
		return fmt.Errorf("reply command error to %s in %s: %w", user, chat, perr)
	}
	return nil
}
