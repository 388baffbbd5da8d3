package filter

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokenKind classifies a token.
type tokenKind uint8

const (
	tokEOF         tokenKind = iota
	tokIdent                 // regular identifier; text is the identifier
	tokQuotedIdent           // [delimited] or "quoted" identifier; text is unescaped
	tokString                // 'string constant'; text is unescaped
	tokInt                   // integer constant; text is the digits
	tokFloat                 // decimal or approximate constant; text as written
	tokParam                 // @name; text includes the '@'
	tokLParen
	tokRParen
	tokComma
	tokDot
	tokSemicolon
	tokPlus
	tokMinus
	tokStar
	tokSlash
	tokPercent
	tokEq
	tokNe // <> or !=
	tokLt
	tokLe
	tokGt
	tokGe

	// Reserved keywords; a regular identifier cannot be one of these.
	tokAnd
	tokOr
	tokNot
	tokIs
	tokNull
	tokIn
	tokLike
	tokEscape
	tokExists
	tokTrue
	tokFalse
)

// keywords maps reserved words (upper case) to their token kinds.
var keywords = [...]struct {
	word string
	kind tokenKind
}{
	{"AND", tokAnd}, {"OR", tokOr}, {"NOT", tokNot}, {"IS", tokIs},
	{"NULL", tokNull}, {"IN", tokIn}, {"LIKE", tokLike}, {"ESCAPE", tokEscape},
	{"EXISTS", tokExists}, {"TRUE", tokTrue}, {"FALSE", tokFalse},
}

// keywordKind returns the keyword kind of a regular identifier, or tokIdent.
func keywordKind(word string) tokenKind {
	for _, k := range keywords {
		if strings.EqualFold(k.word, word) {
			return k.kind
		}
	}
	return tokIdent
}

// token is one lexical token. pos is its byte offset in the source.
type token struct {
	kind tokenKind
	pos  int
	text string
}

// describe renders a token for error messages.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of expression"
	case tokString:
		return "string constant"
	case tokQuotedIdent:
		return "identifier " + quoteIdent(t.text)
	}
	return "'" + t.text + "'"
}

// lex splits src into tokens, ending with a tokEOF token.
func lex(src string) ([]token, error) {
	var toks []token
	for i := 0; ; {
		for i < len(src) && isSpace(src[i]) {
			i++
		}
		if i >= len(src) {
			return append(toks, token{kind: tokEOF, pos: i}), nil
		}
		t, next, err := lexOne(src, i)
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
		i = next
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// lexOne scans the token starting at src[i], returning it and the offset
// just past it.
func lexOne(src string, i int) (token, int, error) {
	c := src[i]
	switch {
	case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
		return lexNumber(src, i)
	case c == '\'':
		text, next, ok := lexDelimited(src, i, '\'')
		if !ok {
			return token{}, 0, newParseError(src, i, "unterminated string constant")
		}
		return token{kind: tokString, pos: i, text: text}, next, nil
	case c == '"':
		text, next, ok := lexDelimited(src, i, '"')
		if !ok {
			return token{}, 0, newParseError(src, i, "unterminated quoted identifier")
		}
		return token{kind: tokQuotedIdent, pos: i, text: text}, next, nil
	case c == '[':
		text, next, ok := lexDelimited(src, i, ']')
		if !ok {
			return token{}, 0, newParseError(src, i, "unterminated delimited identifier")
		}
		return token{kind: tokQuotedIdent, pos: i, text: text}, next, nil
	}
	if r, size := utf8.DecodeRuneInString(src[i:]); unicode.IsLetter(r) {
		j := identEnd(src, i+size)
		word := src[i:j]
		return token{kind: keywordKind(word), pos: i, text: word}, j, nil
	}
	if c == '@' {
		j := identEnd(src, i+1)
		if j == i+1 {
			return token{}, 0, newParseError(src, i, "'@' must start a parameter name")
		}
		return token{kind: tokParam, pos: i, text: src[i:j]}, j, nil
	}
	two := ""
	if i+1 < len(src) {
		two = src[i : i+2]
	}
	switch two {
	case "<>", "!=":
		return token{kind: tokNe, pos: i, text: two}, i + 2, nil
	case "<=":
		return token{kind: tokLe, pos: i, text: two}, i + 2, nil
	case ">=":
		return token{kind: tokGe, pos: i, text: two}, i + 2, nil
	}
	var k tokenKind
	switch c {
	case '(':
		k = tokLParen
	case ')':
		k = tokRParen
	case ',':
		k = tokComma
	case '.':
		k = tokDot
	case ';':
		k = tokSemicolon
	case '+':
		k = tokPlus
	case '-':
		k = tokMinus
	case '*':
		k = tokStar
	case '/':
		k = tokSlash
	case '%':
		k = tokPercent
	case '=':
		k = tokEq
	case '<':
		k = tokLt
	case '>':
		k = tokGt
	default:
		r, _ := utf8.DecodeRuneInString(src[i:])
		return token{}, 0, newParseError(src, i, "unexpected character %q", r)
	}
	return token{kind: k, pos: i, text: src[i : i+1]}, i + 1, nil
}

// identEnd returns the offset just past the letters, digits and
// underscores starting at src[j].
func identEnd(src string, j int) int {
	for j < len(src) {
		r, size := utf8.DecodeRuneInString(src[j:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			break
		}
		j += size
	}
	return j
}

// lexNumber scans digits [. digits] [e [+-] digits], or the same starting
// with ".". A number may not run straight into a letter.
func lexNumber(src string, i int) (token, int, error) {
	j := i
	for j < len(src) && isDigit(src[j]) {
		j++
	}
	kind := tokInt
	if j < len(src) && src[j] == '.' {
		kind = tokFloat
		j++
		for j < len(src) && isDigit(src[j]) {
			j++
		}
	}
	if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
		kind = tokFloat
		j++
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		start := j
		for j < len(src) && isDigit(src[j]) {
			j++
		}
		if j == start {
			return token{}, 0, newParseError(src, j, "exponent has no digits")
		}
	}
	if j < len(src) {
		if r, _ := utf8.DecodeRuneInString(src[j:]); unicode.IsLetter(r) || r == '_' {
			return token{}, 0, newParseError(src, j, "invalid character %q in number", r)
		}
	}
	return token{kind: kind, pos: i, text: src[i:j]}, j, nil
}

// lexDelimited scans text enclosed by src[i] and closer, where a doubled
// closer stands for itself. ok=false when the closer never comes.
func lexDelimited(src string, i int, closer byte) (text string, next int, ok bool) {
	var b strings.Builder
	start := i + 1
	for j := start; j < len(src); j++ {
		if src[j] != closer {
			continue
		}
		if j+1 < len(src) && src[j+1] == closer {
			b.WriteString(src[start : j+1])
			j++
			start = j + 1
			continue
		}
		if b.Len() == 0 {
			return src[start:j], j + 1, true
		}
		b.WriteString(src[start:j])
		return b.String(), j + 1, true
	}
	return "", 0, false
}
