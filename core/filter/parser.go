package filter

import (
	"strconv"
	"strings"
)

// MaxExpressionLength is the longest filter or action expression, in bytes,
// that [Compile] and [CompileAction] accept. Service Bus documents the same
// quota (1024 characters) for filter conditions and rule actions.
const MaxExpressionLength = 1024

// parser is a recursive-descent parser over a pre-lexed token slice.
type parser struct {
	src    string
	toks   []token
	i      int
	params map[string]any // values for @name parameters; may be nil
}

func newParser(src string, params map[string]any) (*parser, error) {
	if len(src) > MaxExpressionLength {
		return nil, newParseError(src, MaxExpressionLength, "expression is longer than %d bytes", MaxExpressionLength)
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	return &parser{src: src, toks: toks, params: params}, nil
}

func (p *parser) peek() token { return p.toks[p.i] }

// peekAt looks n tokens ahead, stopping at the final EOF token.
func (p *parser) peekAt(n int) token {
	if p.i+n >= len(p.toks) {
		return p.toks[len(p.toks)-1]
	}
	return p.toks[p.i+n]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEOF {
		p.i++
	}
	return t
}

func (p *parser) errorf(pos int, format string, args ...any) error {
	return newParseError(p.src, pos, format, args...)
}

// unexpected reports the current token as out of place.
func (p *parser) unexpected(want string) error {
	t := p.peek()
	return p.errorf(t.pos, "expected %s, found %s", want, t.describe())
}

func (p *parser) expect(k tokenKind, want string) (token, error) {
	if p.peek().kind != k {
		return token{}, p.unexpected(want)
	}
	return p.next(), nil
}

// expectEOF fails when tokens remain after a complete parse.
func (p *parser) expectEOF() error {
	if t := p.peek(); t.kind != tokEOF {
		return p.errorf(t.pos, "unexpected %s after end of expression", t.describe())
	}
	return nil
}

// isPredicate reports whether n yields a truth value by construction.
func isPredicate(n node) bool {
	switch n.(type) {
	case *cmpNode, *andNode, *orNode, *notNode, *likeNode, *inNode, *isNullNode, *existsNode:
		return true
	}
	return false
}

// checkLogical rejects operands of AND, OR, NOT (and a whole filter) that
// can never be boolean: arithmetic, newid() and non-boolean constants.
// Properties are checked when evaluated.
func (p *parser) checkLogical(n node, pos int) error {
	switch n := n.(type) {
	case *arithNode, *unaryNode, *newidNode:
		return p.errorf(pos, "expected a predicate, found an arithmetic expression")
	case *constNode:
		if n.v.k != kindBool && n.v.k != kindNull {
			return p.errorf(pos, "expected a predicate, found constant %s", formatConst(n.v))
		}
	}
	return nil
}

// checkOperand rejects predicates where a value is required, such as an
// operand of "+" or "=".
func (p *parser) checkOperand(n node, pos int) error {
	if isPredicate(n) {
		return p.errorf(pos, "expected a value, found a predicate")
	}
	return nil
}

func (p *parser) parseOr() (node, error) {
	start := p.peek().pos
	l, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tokOr {
		p.next()
		rstart := p.peek().pos
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		if err := p.checkLogical(l, start); err != nil {
			return nil, err
		}
		if err := p.checkLogical(r, rstart); err != nil {
			return nil, err
		}
		l = &orNode{l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseAnd() (node, error) {
	start := p.peek().pos
	l, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tokAnd {
		p.next()
		rstart := p.peek().pos
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		if err := p.checkLogical(l, start); err != nil {
			return nil, err
		}
		if err := p.checkLogical(r, rstart); err != nil {
			return nil, err
		}
		l = &andNode{l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseNot() (node, error) {
	if p.peek().kind != tokNot {
		return p.parsePredicate()
	}
	p.next()
	start := p.peek().pos
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	if err := p.checkLogical(x, start); err != nil {
		return nil, err
	}
	return &notNode{x: x}, nil
}

// parsePredicate parses EXISTS(...) or an expression optionally followed by
// a comparison, IS [NOT] NULL, [NOT] LIKE or [NOT] IN.
func (p *parser) parsePredicate() (node, error) {
	if p.peek().kind == tokExists {
		p.next()
		if _, err := p.expect(tokLParen, "'(' after EXISTS"); err != nil {
			return nil, err
		}
		prop, err := p.parseProperty()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tokRParen, "')'"); err != nil {
			return nil, err
		}
		return &existsNode{p: prop}, nil
	}
	start := p.peek().pos
	l, err := p.parseAdditive()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	switch t.kind {
	case tokEq, tokNe, tokLt, tokLe, tokGt, tokGe:
		p.next()
		r, err := p.parseOperand(l, start)
		if err != nil {
			return nil, err
		}
		return newCmpNode(t.pos, t.kind, l, r), nil
	case tokIs:
		p.next()
		not := p.peek().kind == tokNot
		if not {
			p.next()
		}
		if _, err := p.expect(tokNull, "NULL after IS"); err != nil {
			return nil, err
		}
		if err := p.checkOperand(l, start); err != nil {
			return nil, err
		}
		return &isNullNode{not: not, x: l}, nil
	case tokNot:
		p.next()
		switch p.peek().kind {
		case tokLike:
			return p.parseLike(l, start, true)
		case tokIn:
			return p.parseIn(l, start, true)
		}
		return nil, p.unexpected("LIKE or IN after NOT")
	case tokLike:
		return p.parseLike(l, start, false)
	case tokIn:
		return p.parseIn(l, start, false)
	}
	return l, nil
}

// parseOperand checks the already parsed left operand l of a binary
// operator and parses its right operand at the additive level.
func (p *parser) parseOperand(l node, lstart int) (node, error) {
	if err := p.checkOperand(l, lstart); err != nil {
		return nil, err
	}
	rstart := p.peek().pos
	r, err := p.parseAdditive()
	if err != nil {
		return nil, err
	}
	if err := p.checkOperand(r, rstart); err != nil {
		return nil, err
	}
	return r, nil
}

// parseLike parses LIKE pattern [ESCAPE escape]; the LIKE keyword is next.
// Constant patterns and escapes are validated here so that mistakes show
// up when the rule is created, not when a message arrives.
func (p *parser) parseLike(x node, start int, not bool) (node, error) {
	like := p.next()
	pstart := p.peek().pos
	pattern, err := p.parseOperand(x, start)
	if err != nil {
		return nil, err
	}
	if c, ok := pattern.(*constNode); ok && c.v.k != kindString && c.v.k != kindNull {
		return nil, p.errorf(pstart, "LIKE pattern must be a string, found %s", formatConst(c.v))
	}
	n := &likeNode{pos: like.pos, not: not, x: x, pattern: pattern}
	if p.peek().kind == tokEscape {
		p.next()
		estart := p.peek().pos
		if n.escape, err = p.parseOperand(x, start); err != nil {
			return nil, err
		}
		if c, ok := n.escape.(*constNode); ok && c.v.k != kindNull {
			if _, ok := escapeRune(c.v); !ok {
				return nil, p.errorf(estart, "ESCAPE must be a single character string, found %s", formatConst(c.v))
			}
		}
	}
	if err := checkConstLike(n); err != nil {
		return nil, p.errorf(pstart, "%s", err.Msg)
	}
	return n, nil
}

// parseIn parses IN (expr, ...); the IN keyword is next.
func (p *parser) parseIn(x node, start int, not bool) (node, error) {
	p.next()
	if err := p.checkOperand(x, start); err != nil {
		return nil, err
	}
	if _, err := p.expect(tokLParen, "'(' after IN"); err != nil {
		return nil, err
	}
	n := &inNode{not: not, x: x}
	for {
		estart := p.peek().pos
		e, err := p.parseAdditive()
		if err != nil {
			return nil, err
		}
		if err := p.checkOperand(e, estart); err != nil {
			return nil, err
		}
		n.list = append(n.list, e)
		if p.peek().kind != tokComma {
			break
		}
		p.next()
	}
	if _, err := p.expect(tokRParen, "',' or ')' in IN list"); err != nil {
		return nil, err
	}
	return n, nil
}

func (p *parser) parseAdditive() (node, error) {
	start := p.peek().pos
	l, err := p.parseMul()
	if err != nil {
		return nil, err
	}
	for k := p.peek().kind; k == tokPlus || k == tokMinus; k = p.peek().kind {
		t := p.next()
		if err := p.checkOperand(l, start); err != nil {
			return nil, err
		}
		rstart := p.peek().pos
		r, err := p.parseMul()
		if err != nil {
			return nil, err
		}
		if err := p.checkOperand(r, rstart); err != nil {
			return nil, err
		}
		l = &arithNode{pos: t.pos, op: t.kind, l: l, r: r}
	}
	return l, nil
}

func (p *parser) parseMul() (node, error) {
	start := p.peek().pos
	l, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for k := p.peek().kind; k == tokStar || k == tokSlash || k == tokPercent; k = p.peek().kind {
		t := p.next()
		if err := p.checkOperand(l, start); err != nil {
			return nil, err
		}
		rstart := p.peek().pos
		r, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		if err := p.checkOperand(r, rstart); err != nil {
			return nil, err
		}
		l = &arithNode{pos: t.pos, op: t.kind, l: l, r: r}
	}
	return l, nil
}

// parseUnary parses a signed operand. A sign directly before a numeric
// literal is folded into the constant, which is how -9223372036854775808
// is written.
func (p *parser) parseUnary() (node, error) {
	t := p.peek()
	if t.kind != tokPlus && t.kind != tokMinus {
		return p.parsePrimary()
	}
	p.next()
	if lit := p.peek(); lit.kind == tokInt || lit.kind == tokFloat {
		p.next()
		sign := ""
		if t.kind == tokMinus {
			sign = "-"
		}
		return p.number(lit, sign)
	}
	start := p.peek().pos
	x, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	if err := p.checkOperand(x, start); err != nil {
		return nil, err
	}
	return &unaryNode{pos: t.pos, op: t.kind, x: x}, nil
}

// number converts an integer or decimal literal, with an optional sign.
func (p *parser) number(lit token, sign string) (node, error) {
	if lit.kind == tokInt {
		i, err := strconv.ParseInt(sign+lit.text, 10, 64)
		if err != nil {
			return nil, p.errorf(lit.pos, "integer constant %s%s is out of range", sign, lit.text)
		}
		return &constNode{v: value{k: kindInt, i: i}}, nil
	}
	f, err := strconv.ParseFloat(sign+lit.text, 64)
	if err != nil {
		return nil, p.errorf(lit.pos, "numeric constant %s%s is out of range", sign, lit.text)
	}
	return &constNode{v: value{k: kindFloat, f: f}}, nil
}

func (p *parser) parsePrimary() (node, error) {
	t := p.peek()
	switch t.kind {
	case tokInt, tokFloat:
		p.next()
		return p.number(t, "")
	case tokString:
		p.next()
		return &constNode{v: value{k: kindString, s: t.text}}, nil
	case tokTrue, tokFalse:
		p.next()
		return &constNode{v: boolValue(t.kind == tokTrue)}, nil
	case tokNull:
		p.next()
		return &constNode{v: nullValue}, nil
	case tokParam:
		p.next()
		return p.param(t)
	case tokLParen:
		p.next()
		n, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tokRParen, "')'"); err != nil {
			return nil, err
		}
		return n, nil
	case tokIdent:
		if p.peekAt(1).kind == tokLParen {
			return p.parseCall()
		}
		return p.parseProperty()
	case tokQuotedIdent:
		return p.parseProperty()
	}
	return nil, p.unexpected("an expression")
}

// parseCall parses newid() or property(expr) / p(expr).
func (p *parser) parseCall() (node, error) {
	name := p.next()
	p.next() // '('
	switch {
	case strings.EqualFold(name.text, "newid"):
		if _, err := p.expect(tokRParen, "')' after newid("); err != nil {
			return nil, err
		}
		return &newidNode{}, nil
	case strings.EqualFold(name.text, "property"), strings.EqualFold(name.text, "p"):
		start := p.peek().pos
		arg, err := p.parseAdditive()
		if err != nil {
			return nil, err
		}
		if err := p.checkOperand(arg, start); err != nil {
			return nil, err
		}
		if c, ok := arg.(*constNode); ok && c.v.k != kindString {
			return nil, p.errorf(start, "property() needs a string name, found %s", formatConst(c.v))
		}
		if _, err := p.expect(tokRParen, "')'"); err != nil {
			return nil, err
		}
		return &propertyFuncNode{pos: name.pos, arg: arg}, nil
	}
	return nil, p.errorf(name.pos, "unknown function %q", name.text)
}

// parseProperty parses [sys. | user.] name, where name is a regular,
// [delimited] or "quoted" identifier. Unknown system properties are
// rejected here rather than at evaluation time.
func (p *parser) parseProperty() (*propNode, error) {
	t := p.peek()
	if t.kind != tokIdent && t.kind != tokQuotedIdent {
		return nil, p.unexpected("a property name")
	}
	p.next()
	scoped := t.kind == tokIdent && p.peek().kind == tokDot &&
		(strings.EqualFold(t.text, "sys") || strings.EqualFold(t.text, "user"))
	if !scoped {
		if t.text == "" {
			return nil, p.errorf(t.pos, "empty property name")
		}
		return &propNode{pos: t.pos, name: t.text}, nil
	}
	p.next() // '.'
	nt := p.peek()
	if nt.kind != tokIdent && nt.kind != tokQuotedIdent {
		return nil, p.unexpected("a property name after '" + t.text + ".'")
	}
	p.next()
	if nt.text == "" {
		return nil, p.errorf(nt.pos, "empty property name")
	}
	if strings.EqualFold(t.text, "user") {
		return &propNode{pos: t.pos, name: nt.text}, nil
	}
	sp, ok := lookupSysProp(nt.text)
	if !ok {
		return nil, p.errorf(nt.pos, "unknown system property %q", nt.text)
	}
	return &propNode{pos: t.pos, sys: true, name: sp.name}, nil
}

// param resolves @name against the parameters given to the compiler. The
// name matches exactly or, failing that, ignoring case.
func (p *parser) param(t token) (node, error) {
	x, ok := p.params[t.text]
	if !ok {
		for name, v := range p.params {
			if strings.EqualFold(name, t.text) {
				x, ok = v, true
				break
			}
		}
	}
	if !ok {
		return nil, p.errorf(t.pos, "parameter %s has no value", t.text)
	}
	v := fromAny(x)
	if v.k == kindOther {
		return nil, p.errorf(t.pos, "parameter %s has unsupported type %T", t.text, x)
	}
	return &paramNode{name: t.text, v: v}, nil
}
