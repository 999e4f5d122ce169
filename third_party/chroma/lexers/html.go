package lexers

import (
	"github.com/alecthomas/chroma/v2"
)

// HTML lexer.
var HTML *chroma.RegexLexer // built by load (in package init upstream)
