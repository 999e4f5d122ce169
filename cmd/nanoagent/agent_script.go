package main

import "fmt"

// loadScriptAgent is wired to internal/pipeline/script once it lands.
func loadScriptAgent(path string) (agent, error) {
	return nil, fmt.Errorf("script agent not available yet (%s)", path)
}
