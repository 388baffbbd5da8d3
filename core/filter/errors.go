package filter

import "fmt"

// ParseError reports an expression that [Compile] or [CompileAction] rejects.
type ParseError struct {
	Pos    int    // byte offset into the expression where the problem was found
	Line   int    // 1-based line of Pos
	Column int    // 1-based column of Pos, counted in runes
	Msg    string // what is wrong, in lower case
}

// Error implements error as "filter: line:column: message".
func (e *ParseError) Error() string {
	return fmt.Sprintf("filter: %d:%d: %s", e.Line, e.Column, e.Msg)
}

// newParseError builds a ParseError at byte offset pos of src.
func newParseError(src string, pos int, format string, args ...any) *ParseError {
	if pos > len(src) {
		pos = len(src)
	}
	line, col := 1, 1
	for _, r := range src[:pos] {
		if r == '\n' {
			line++
			col = 1
			continue
		}
		col++
	}
	return &ParseError{Pos: pos, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

// EvalError reports an expression that compiled but cannot be evaluated
// against a particular message, such as arithmetic on a boolean or an
// integer division by zero. Service Bus calls this a filter evaluation
// exception; the broker may dead-letter the message in response.
type EvalError struct {
	Pos int    // byte offset of the failing sub-expression in the source
	Msg string // what is wrong, in lower case
}

// Error implements error.
func (e *EvalError) Error() string {
	return fmt.Sprintf("filter: evaluation error at offset %d: %s", e.Pos, e.Msg)
}

func evalErrorf(pos int, format string, args ...any) *EvalError {
	return &EvalError{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}
