//go:build !lean

package main

// `nanohost pipeline render`: a pipeline drawn as DOT, Mermaid or SVG (laid
// out by go-graphviz). Not in the lean front binary (lean.go), which hands it
// to nanohost-full.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"nanohost/internal/pipeline/render"
)

func init() {
	pipelineCmd.AddCommand(newPipelineRenderCmd())
}

// ---- render ----

var renderFormats = []string{"dot", "mermaid", "svg"}

func newPipelineRenderCmd() *cobra.Command {
	var format, outPath string
	cmd := &cobra.Command{
		Use:   "render FILE",
		Short: "Draw a DOT pipeline as canonical DOT, a Mermaid flowchart or SVG",
		Long: `Render an Attractor DOT pipeline after defaults and transforms (so the
resolved llm_model and expanded prompts show in DOT output). The pipeline
only has to parse, not validate, so a broken graph can still be looked at.

--format is dot (default), mermaid or svg; without it the extension of -o
decides (.svg, .mmd/.mermaid, .dot/.gv). Output goes to standard output, or
to the file named by -o. FILE "-" reads standard input. SVG is laid out by
Graphviz's dot, compiled into nanohost (no system Graphviz needed), for
pipelines of up to 1,000 nodes and 3,000 edges.

Exit status: 0 rendered; 2 syntax error, unknown format or a graph too big
for SVG; 1 the file could not be read or the output not written.`,
		Example: `  nanohost pipeline render feature.dot -o feature.svg
  nanohost pipeline render feature.dot --format mermaid >> README.md
  nanohost pipeline render feature.dot --format dot    # canonical, resolved DOT`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			chosen, err := renderFormat(format, outPath)
			if err != nil {
				return exitCode(exitInvalid, err)
			}
			g, err := parsePipelineArg(cmd, args[0])
			if err != nil {
				return err
			}
			var out []byte
			switch chosen {
			case "dot":
				out = []byte(render.DOT(g))
			case "mermaid":
				out = []byte(render.Mermaid(g))
			case "svg":
				if out, err = render.SVG(g, render.Look{}); err != nil {
					return exitCode(exitInvalid, fmt.Errorf("draw %s as SVG: %w", args[0], err))
				}
			}
			if outPath == "" {
				_, err = cmd.OutOrStdout().Write(out)
			} else {
				err = os.WriteFile(outPath, out, 0o644)
			}
			if err != nil {
				return exitCode(exitIO, fmt.Errorf("write %s output: %w", chosen, err))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "output format: dot, mermaid or svg (default: from -o's extension, else dot)")
	cmd.Flags().StringVarP(&outPath, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

// renderFormat picks the format: the flag, else the output file's extension, else dot.
func renderFormat(flag, outPath string) (string, error) {
	if flag != "" {
		f := strings.ToLower(flag)
		if !slices.Contains(renderFormats, f) {
			return "", fmt.Errorf("unknown --format %q: use dot, mermaid or svg", flag)
		}
		return f, nil
	}
	switch strings.ToLower(filepath.Ext(outPath)) {
	case ".svg":
		return "svg", nil
	case ".mmd", ".mermaid":
		return "mermaid", nil
	}
	return "dot", nil
}
