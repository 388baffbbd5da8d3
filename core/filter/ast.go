package filter

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// node is one compiled expression. Trees are immutable after compilation,
// so a compiled filter may be evaluated from many goroutines at once.
type node interface {
	// eval computes the node's value for m. Predicates return a boolean or
	// null (unknown); errors are *EvalError.
	eval(m Message) (value, error)
	// test evaluates the node as a predicate. It is eval without building a
	// value, for the logical operators that only need a truth value; a
	// value that is not boolean is an *EvalError.
	test(m Message) (tri, error)
	// prec is the binding strength used to decide where String needs
	// parentheses; higher binds tighter.
	prec() int
	// format writes the canonical source form.
	format(b *strings.Builder)
}

// Binding strengths, loosest first.
const (
	precOr = iota + 1
	precAnd
	precNot
	precCmp // = <> < <= > >= LIKE IN IS
	precAdd // + -
	precMul // * / %
	precUnary
	precPrimary
)

// writeChild formats n, in parentheses when it binds looser than min.
func writeChild(b *strings.Builder, n node, min int) {
	if n.prec() < min {
		b.WriteByte('(')
		n.format(b)
		b.WriteByte(')')
		return
	}
	n.format(b)
}

// constNode is a literal: number, string, TRUE/FALSE or NULL.
type constNode struct{ v value }

// paramNode is an @name parameter, bound to a value at compile time.
type paramNode struct {
	name string
	v    value
}

// propNode reads a system (sys.) or application (user.) property.
type propNode struct {
	pos  int
	sys  bool
	name string // canonical for system properties, exact for user ones
}

// newidNode is newid(): a fresh random UUID.
type newidNode struct{}

// propertyFuncNode is property(expr): a property named at run time.
type propertyFuncNode struct {
	pos int
	arg node
}

// unaryNode is +x or -x.
type unaryNode struct {
	pos int
	op  tokenKind // tokPlus or tokMinus
	x   node
}

// arithNode is l op r for + - * / %.
type arithNode struct {
	pos  int
	op   tokenKind
	l, r node
}

// cmpNode is l op r for = <> < <= > >=.
type cmpNode struct {
	pos  int
	op   tokenKind
	l, r node
	// Shortcuts for the common "property op constant" shape, set by
	// newCmpNode: lp is l when it is a property, rc is r when constant.
	lp *propNode
	rc *constNode
}

func newCmpNode(pos int, op tokenKind, l, r node) *cmpNode {
	n := &cmpNode{pos: pos, op: op, l: l, r: r}
	n.lp, _ = l.(*propNode)
	n.rc, _ = r.(*constNode)
	return n
}

// andNode, orNode and notNode are the three-valued logical operators.
type andNode struct{ l, r node }
type orNode struct{ l, r node }
type notNode struct{ x node }

// likeNode is x [NOT] LIKE pattern [ESCAPE escape].
type likeNode struct {
	pos     int
	not     bool
	x       node
	pattern node
	escape  node     // nil when there is no ESCAPE clause
	plan    likePlan // for constant patterns; likeGeneral otherwise
}

// inNode is x [NOT] IN (list...).
type inNode struct {
	not  bool
	x    node
	list []node
}

// isNullNode is x IS [NOT] NULL.
type isNullNode struct {
	not bool
	x   node
}

// existsNode is EXISTS(property).
type existsNode struct{ p *propNode }

func (*constNode) prec() int                   { return precPrimary }
func (n *constNode) format(b *strings.Builder) { b.WriteString(formatConst(n.v)) }

func (*paramNode) prec() int                   { return precPrimary }
func (n *paramNode) format(b *strings.Builder) { b.WriteString(n.name) }

func (*propNode) prec() int { return precPrimary }
func (n *propNode) format(b *strings.Builder) {
	if n.sys {
		b.WriteString("sys.")
		b.WriteString(n.name)
		return
	}
	b.WriteString(quoteIdent(n.name))
}

func (*newidNode) prec() int                 { return precPrimary }
func (*newidNode) format(b *strings.Builder) { b.WriteString("newid()") }

func (*propertyFuncNode) prec() int { return precPrimary }
func (n *propertyFuncNode) format(b *strings.Builder) {
	b.WriteString("property(")
	n.arg.format(b)
	b.WriteByte(')')
}

func (*unaryNode) prec() int { return precUnary }
func (n *unaryNode) format(b *strings.Builder) {
	b.WriteString(opText(n.op))
	// Parenthesize nested signs so that "- -x" never prints as "--x", and
	// numbers, which the parser would fold into a signed constant.
	if _, ok := n.x.(*unaryNode); ok || isNumberConst(n.x) {
		b.WriteByte('(')
		n.x.format(b)
		b.WriteByte(')')
		return
	}
	writeChild(b, n.x, precUnary)
}

// isNumberConst reports whether n is a numeric constant.
func isNumberConst(n node) bool {
	c, ok := n.(*constNode)
	return ok && (c.v.k == kindInt || c.v.k == kindFloat)
}

func (n *arithNode) prec() int {
	if n.op == tokPlus || n.op == tokMinus {
		return precAdd
	}
	return precMul
}
func (n *arithNode) format(b *strings.Builder) {
	p := n.prec()
	writeChild(b, n.l, p)
	b.WriteByte(' ')
	b.WriteString(opText(n.op))
	b.WriteByte(' ')
	writeChild(b, n.r, p+1) // left-associative: a right operand at the same level needs parentheses
}

func (*cmpNode) prec() int { return precCmp }
func (n *cmpNode) format(b *strings.Builder) {
	writeChild(b, n.l, precAdd)
	b.WriteByte(' ')
	b.WriteString(opText(n.op))
	b.WriteByte(' ')
	writeChild(b, n.r, precAdd)
}

func (*andNode) prec() int { return precAnd }
func (n *andNode) format(b *strings.Builder) {
	writeChild(b, n.l, precAnd)
	b.WriteString(" AND ")
	writeChild(b, n.r, precAnd+1)
}

func (*orNode) prec() int { return precOr }
func (n *orNode) format(b *strings.Builder) {
	writeChild(b, n.l, precOr)
	b.WriteString(" OR ")
	writeChild(b, n.r, precOr+1)
}

func (*notNode) prec() int { return precNot }
func (n *notNode) format(b *strings.Builder) {
	b.WriteString("NOT ")
	writeChild(b, n.x, precNot)
}

func (*likeNode) prec() int { return precCmp }
func (n *likeNode) format(b *strings.Builder) {
	writeChild(b, n.x, precAdd)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" LIKE ")
	writeChild(b, n.pattern, precAdd)
	if n.escape != nil {
		b.WriteString(" ESCAPE ")
		writeChild(b, n.escape, precAdd)
	}
}

func (*inNode) prec() int { return precCmp }
func (n *inNode) format(b *strings.Builder) {
	writeChild(b, n.x, precAdd)
	if n.not {
		b.WriteString(" NOT")
	}
	b.WriteString(" IN (")
	for i, e := range n.list {
		if i > 0 {
			b.WriteString(", ")
		}
		writeChild(b, e, precAdd)
	}
	b.WriteByte(')')
}

func (*isNullNode) prec() int { return precCmp }
func (n *isNullNode) format(b *strings.Builder) {
	writeChild(b, n.x, precAdd)
	if n.not {
		b.WriteString(" IS NOT NULL")
		return
	}
	b.WriteString(" IS NULL")
}

func (*existsNode) prec() int { return precPrimary }
func (n *existsNode) format(b *strings.Builder) {
	b.WriteString("EXISTS(")
	n.p.format(b)
	b.WriteByte(')')
}

// opText is the canonical spelling of an operator token.
func opText(op tokenKind) string {
	switch op {
	case tokPlus:
		return "+"
	case tokMinus:
		return "-"
	case tokStar:
		return "*"
	case tokSlash:
		return "/"
	case tokPercent:
		return "%"
	case tokEq:
		return "="
	case tokNe:
		return "<>"
	case tokLt:
		return "<"
	case tokLe:
		return "<="
	case tokGt:
		return ">"
	case tokGe:
		return ">="
	}
	return "?"
}

// formatConst renders a constant so that it lexes back to the same value
// and kind: floats always carry a '.' or an exponent.
func formatConst(v value) string {
	switch v.k {
	case kindNull:
		return "NULL"
	case kindBool:
		if v.b {
			return "TRUE"
		}
		return "FALSE"
	case kindInt:
		return strconv.FormatInt(v.i, 10)
	case kindFloat:
		s := strconv.FormatFloat(v.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".e") {
			s += ".0"
		}
		return s
	case kindString:
		return "'" + strings.ReplaceAll(v.s, "'", "''") + "'"
	}
	return "NULL"
}

// quoteIdent renders a user property name: bare when it is a regular
// identifier that is not a keyword, otherwise in [brackets].
func quoteIdent(name string) string {
	if isRegularIdent(name) && keywordKind(name) == tokIdent {
		return name
	}
	return "[" + strings.ReplaceAll(name, "]", "]]") + "]"
}

// isRegularIdent reports whether s matches [[:IsLetter:]][_[:IsLetter:][:IsDigit:]]*.
func isRegularIdent(s string) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			return false
		}
		if i == 0 && !unicode.IsLetter(r) {
			return false
		}
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			return false
		}
	}
	return s != ""
}
