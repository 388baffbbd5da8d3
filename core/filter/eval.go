package filter

import (
	"crypto/rand"
	"strings"
)

// Evaluation walks the compiled tree. Every node returns a value by value
// and reads the message through the [Message] interface, so evaluating a
// filter allocates nothing unless it builds new strings (concatenation) or
// calls newid().

func (n *constNode) eval(Message) (value, error) { return n.v, nil }

func (n *propNode) eval(m Message) (value, error) { return readProp(m, n.sys, n.name), nil }

// readProp reads a property; a missing one is NULL.
func readProp(m Message, sys bool, name string) value {
	var (
		x  any
		ok bool
	)
	if sys {
		x, ok = m.System(name)
	} else {
		x, ok = m.Property(name)
	}
	if !ok {
		return nullValue
	}
	return fromAny(x)
}

func (*newidNode) eval(Message) (value, error) {
	var u [16]byte
	_, _ = rand.Read(u[:])  // crypto/rand.Read never returns an error
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return value{k: kindUUID, o: u}, nil
}

func (n *propertyFuncNode) eval(m Message) (value, error) {
	v, err := n.arg.eval(m)
	if err != nil || v.isNull() {
		return nullValue, err
	}
	if v.k != kindString {
		return nullValue, evalErrorf(n.pos, "property() needs a string name, found %s", kindName(v.k))
	}
	name, sys := v.s, false
	if len(name) > 4 && strings.EqualFold(name[:4], "sys.") {
		sp, ok := lookupSysProp(name[4:])
		if !ok {
			return nullValue, evalErrorf(n.pos, "unknown system property %q", name[4:])
		}
		name, sys = sp.name, true
	} else if len(name) > 5 && strings.EqualFold(name[:5], "user.") {
		name = name[5:]
	}
	return readProp(m, sys, name), nil
}

func (n *unaryNode) eval(m Message) (value, error) {
	x, err := n.x.eval(m)
	if err != nil {
		return nullValue, err
	}
	return unary(n.op, x, n.pos)
}

func (n *arithNode) eval(m Message) (value, error) {
	l, err := n.l.eval(m)
	if err != nil {
		return nullValue, err
	}
	r, err := n.r.eval(m)
	if err != nil {
		return nullValue, err
	}
	return arith(n.op, l, r, n.pos)
}

// eval compares two values. NULL on either side is unknown. Values of
// kinds that cannot be compared are unequal (so "=" is false and "<>" is
// true, as C# object equality would say), and unknown for <, <=, >, >=.
func (n *cmpNode) eval(m Message) (value, error) {
	l, err := n.l.eval(m)
	if err != nil {
		return nullValue, err
	}
	r, err := n.r.eval(m)
	if err != nil {
		return nullValue, err
	}
	if l.isNull() || r.isNull() {
		return nullValue, nil
	}
	ordered := n.op != tokEq && n.op != tokNe
	o := compareValues(l, r, ordered)
	switch o {
	case orderIncomparable:
		if ordered {
			return nullValue, nil
		}
		return boolValue(n.op == tokNe), nil
	case orderNaN:
		return boolValue(n.op == tokNe), nil
	}
	switch n.op {
	case tokEq:
		return boolValue(o == orderEqual), nil
	case tokNe:
		return boolValue(o != orderEqual), nil
	case tokLt:
		return boolValue(o == orderLess), nil
	case tokLe:
		return boolValue(o != orderGreater), nil
	case tokGt:
		return boolValue(o == orderGreater), nil
	default: // tokGe
		return boolValue(o != orderLess), nil
	}
}

// truth reads a predicate operand: a boolean, or NULL for unknown.
func truth(n node, m Message) (value, error) {
	v, err := n.eval(m)
	if err != nil {
		return nullValue, err
	}
	if v.k != kindBool && v.k != kindNull {
		return nullValue, &EvalError{Pos: nodePos(n), Msg: "expected a boolean, found " + kindName(v.k)}
	}
	return v, nil
}

// nodePos returns the source offset recorded for n, or 0.
func nodePos(n node) int {
	if p, ok := n.(*propNode); ok {
		return p.pos
	}
	if p, ok := n.(*propertyFuncNode); ok {
		return p.pos
	}
	return 0
}

// eval is AND with SQL three-valued logic, short-circuiting on FALSE.
func (n *andNode) eval(m Message) (value, error) {
	l, err := truth(n.l, m)
	if err != nil || (l.k == kindBool && !l.b) {
		return l, err
	}
	r, err := truth(n.r, m)
	if err != nil || (r.k == kindBool && !r.b) {
		return r, err
	}
	if l.isNull() || r.isNull() {
		return nullValue, nil
	}
	return trueValue, nil
}

// eval is OR with SQL three-valued logic, short-circuiting on TRUE.
func (n *orNode) eval(m Message) (value, error) {
	l, err := truth(n.l, m)
	if err != nil || (l.k == kindBool && l.b) {
		return l, err
	}
	r, err := truth(n.r, m)
	if err != nil || (r.k == kindBool && r.b) {
		return r, err
	}
	if l.isNull() || r.isNull() {
		return nullValue, nil
	}
	return falseValue, nil
}

func (n *notNode) eval(m Message) (value, error) {
	v, err := truth(n.x, m)
	if err != nil || v.isNull() {
		return v, err
	}
	return boolValue(!v.b), nil
}

// eval matches a LIKE. Unknown operands give unknown; so does a value that
// is not a string. A pattern or escape of the wrong type is an error.
func (n *likeNode) eval(m Message) (value, error) {
	x, err := n.x.eval(m)
	if err != nil {
		return nullValue, err
	}
	pat, err := n.pattern.eval(m)
	if err != nil {
		return nullValue, err
	}
	esc := noEscape
	if n.escape != nil {
		e, err := n.escape.eval(m)
		if err != nil {
			return nullValue, err
		}
		if e.isNull() {
			return nullValue, nil
		}
		var ok bool
		if esc, ok = escapeRune(e); !ok {
			return nullValue, evalErrorf(n.pos, "ESCAPE must be a single character string")
		}
	}
	if x.isNull() || pat.isNull() {
		return nullValue, nil
	}
	if pat.k != kindString {
		return nullValue, evalErrorf(n.pos, "LIKE pattern must be a string, found %s", kindName(pat.k))
	}
	if x.k != kindString {
		return nullValue, nil
	}
	if _, constant := n.pattern.(*constNode); !constant && !validLikePattern(pat.s, esc) {
		return nullValue, evalErrorf(n.pos, "LIKE pattern ends with the escape character")
	}
	return boolValue(likeMatch(x.s, pat.s, esc) != n.not), nil
}

// eval is IN: TRUE when the value equals a list element (by the rules of
// "="), unknown when the value itself is unknown, FALSE otherwise.
func (n *inNode) eval(m Message) (value, error) {
	x, err := n.x.eval(m)
	if err != nil || x.isNull() {
		return nullValue, err
	}
	for _, e := range n.list {
		v, err := e.eval(m)
		if err != nil {
			return nullValue, err
		}
		if !v.isNull() && compareValues(x, v, false) == orderEqual {
			return boolValue(!n.not), nil
		}
	}
	return boolValue(n.not), nil
}

// eval is IS [NOT] NULL; a missing property is NULL. Never unknown.
func (n *isNullNode) eval(m Message) (value, error) {
	x, err := n.x.eval(m)
	if err != nil {
		return nullValue, err
	}
	return boolValue(x.isNull() != n.not), nil
}

// eval is EXISTS: whether the property is present, even with a null value.
func (n *existsNode) eval(m Message) (value, error) {
	var ok bool
	if n.p.sys {
		_, ok = m.System(n.p.name)
	} else {
		_, ok = m.Property(n.p.name)
	}
	return boolValue(ok), nil
}
