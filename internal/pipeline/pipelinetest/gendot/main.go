// Command gendot writes pipelinetest.Generated's pipeline of -nodes nodes to
// standard output, so whole-process timings of `nanohost pipeline validate`
// (and of other Attractor implementations' validate) run on the benchmarks'
// input:
//
//	go run ./internal/pipeline/pipelinetest/gendot -nodes 10000 > gen10k.dot
package main

import (
	"flag"
	"fmt"
	"os"

	"nanohost/internal/pipeline/pipelinetest"
)

func main() {
	nodes := flag.Int("nodes", 10000, "how many nodes (at least 3)")
	flag.Parse()
	if *nodes < 3 {
		fmt.Fprintln(os.Stderr, "gendot: -nodes must be at least 3")
		os.Exit(2)
	}
	if _, err := os.Stdout.WriteString(pipelinetest.Generated(*nodes)); err != nil {
		fmt.Fprintln(os.Stderr, "gendot:", err)
		os.Exit(1)
	}
}
