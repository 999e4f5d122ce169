package parser

import "sync"

// nanohost fork: the gocc generator decodes the action and goto tables
// (gzip + gob) in package init, which every command of a binary that links
// this package pays — `nanohost --help` included. They are decoded on the
// first NewParser instead; see nanohost's third_party/README.md.
var tablesOnce sync.Once

func loadTables() {
	tablesOnce.Do(func() {
		loadActionTable()
		loadGotoTable()
	})
}
