package lexers

import (
	"embed"
	"io/fs"
	"sync"

	"github.com/alecthomas/chroma/v2"
)

//go:embed embedded
var embedded embed.FS

// GlobalLexerRegistry is the global LexerRegistry of Lexers.
//
// This fork builds it on first use (see load): upstream builds every lexer
// in package init, which costs every program linking chroma 10–60 ms and
// 2.7 MB at start, highlighting or not. Read it through the package's
// functions, which load it first; so are this package's exported lexer
// variables (Go, HTML, …) nil until one of them has been called.
var GlobalLexerRegistry = chroma.NewLexerRegistry()

var loadOnce sync.Once

// loaded returns the registry, built.
func loaded() *chroma.LexerRegistry {
	loadOnce.Do(load)
	return GlobalLexerRegistry
}

// load registers the embedded XML lexers, then the ones written in Go, in the
// order package init did upstream, then runs what upstream's init funcs did.
func load() {
	paths, err := fs.Glob(embedded, "embedded/*.xml")
	if err != nil {
		panic(err)
	}
	for _, path := range paths {
		GlobalLexerRegistry.Register(chroma.MustNewXMLLexer(embedded, path))
	}
	HTML = chroma.MustNewXMLLexer(embedded, "embedded/html.xml")
	for _, load := range []func(){
		loadCaddyfile, loadCl, loadEmacs, loadErb, loadGemtext, loadGenshi, loadGo, loadHaxe,
		loadHttp, loadMarkdown, loadMarkless, loadPhp, loadRaku, loadRst, loadSvelte,
		loadTyposcript, loadYamlJinja,
		// upstream's init funcs, which run after every variable is set
		loadDns, loadMysql, loadZed,
	} {
		load()
	}
}

// register adds a lexer while load runs.
func register(lexer chroma.Lexer) chroma.Lexer {
	return GlobalLexerRegistry.Register(lexer)
}

// Names of all lexers, optionally including aliases.
func Names(withAliases bool) []string {
	return loaded().Names(withAliases)
}

// Aliases of all the lexers, and skip those lexers who do not have any aliases,
// or show their name instead
func Aliases(skipWithoutAliases bool) []string {
	return loaded().Aliases(skipWithoutAliases)
}

// Get a Lexer by name, alias or file extension.
//
// Note that this if there isn't an exact match on name or alias, this will
// call Match(), so it is not efficient.
func Get(name string) chroma.Lexer {
	return loaded().Get(name)
}

// MatchMimeType attempts to find a lexer for the given MIME type.
func MatchMimeType(mimeType string) chroma.Lexer {
	return loaded().MatchMimeType(mimeType)
}

// Match returns the first lexer matching filename.
//
// Note that this iterates over all file patterns in all lexers, so it's not
// particularly efficient.
func Match(filename string) chroma.Lexer {
	return loaded().Match(filename)
}

// Register a Lexer with the global registry.
func Register(lexer chroma.Lexer) chroma.Lexer {
	return loaded().Register(lexer)
}

// Analyse text content and return the "best" lexer..
func Analyse(text string) chroma.Lexer {
	return loaded().Analyse(text)
}

// PlaintextRules is used for the fallback lexer as well as the explicit
// plaintext lexer.
func PlaintextRules() chroma.Rules {
	return chroma.Rules{
		"root": []chroma.Rule{
			{`.+`, chroma.Text, nil},
			{`\n`, chroma.Text, nil},
		},
	}
}

// Fallback lexer if no other is found.
var Fallback chroma.Lexer = chroma.MustNewLexer(&chroma.Config{
	Name:      "fallback",
	Filenames: []string{"*"},
	Priority:  -1,
}, PlaintextRules)
