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

func (n *paramNode) eval(Message) (value, error) { return n.v, nil }

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

// test compares two values. NULL on either side is unknown. Values of
// kinds that cannot be compared are unequal (so "=" is false and "<>" is
// true, as C# object equality would say), and unknown for <, <=, >, >=.
func (n *cmpNode) test(m Message) (tri, error) {
	var l, r value
	var err error
	if n.lp != nil {
		l = readProp(m, n.lp.sys, n.lp.name)
	} else if l, err = n.l.eval(m); err != nil {
		return triUnknown, err
	}
	if n.rc != nil {
		r = n.rc.v
	} else if r, err = n.r.eval(m); err != nil {
		return triUnknown, err
	}
	if l.isNull() || r.isNull() {
		return triUnknown, nil
	}
	ordered := n.op != tokEq && n.op != tokNe
	o := compareValues(l, r, ordered)
	switch o {
	case orderIncomparable:
		if ordered {
			return triUnknown, nil
		}
		return triOf(n.op == tokNe), nil
	case orderNaN:
		return triOf(n.op == tokNe), nil
	}
	switch n.op {
	case tokEq:
		return triOf(o == orderEqual), nil
	case tokNe:
		return triOf(o != orderEqual), nil
	case tokLt:
		return triOf(o == orderLess), nil
	case tokLe:
		return triOf(o != orderGreater), nil
	case tokGt:
		return triOf(o == orderGreater), nil
	default: // tokGe
		return triOf(o != orderLess), nil
	}
}

// tri is a three-valued truth value.
type tri int8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

// value converts a truth value to a boolean or NULL value.
func (t tri) value() value {
	switch t {
	case triTrue:
		return trueValue
	case triFalse:
		return falseValue
	}
	return nullValue
}

// valueTest is test for nodes that compute values: a boolean or NULL, or
// an error for anything else.
func valueTest(v value, err error, pos int) (tri, error) {
	switch {
	case err != nil:
		return triUnknown, err
	case v.k == kindBool:
		return triOf(v.b), nil
	case v.k == kindNull:
		return triUnknown, nil
	}
	return triUnknown, &EvalError{Pos: pos, Msg: "expected a boolean, found " + kindName(v.k)}
}

func (n *constNode) test(m Message) (tri, error) { return valueTest(n.v, nil, 0) }
func (n *paramNode) test(m Message) (tri, error) { return valueTest(n.v, nil, 0) }
func (n *propNode) test(m Message) (tri, error) {
	return valueTest(readProp(m, n.sys, n.name), nil, n.pos)
}
func (n *newidNode) test(m Message) (tri, error) {
	v, err := n.eval(m)
	return valueTest(v, err, 0)
}
func (n *propertyFuncNode) test(m Message) (tri, error) {
	v, err := n.eval(m)
	return valueTest(v, err, n.pos)
}
func (n *unaryNode) test(m Message) (tri, error) {
	v, err := n.eval(m)
	return valueTest(v, err, n.pos)
}
func (n *arithNode) test(m Message) (tri, error) {
	v, err := n.eval(m)
	return valueTest(v, err, n.pos)
}

// Predicates implement test natively; eval wraps it.

func (n *cmpNode) eval(m Message) (value, error)    { t, err := n.test(m); return t.value(), err }
func (n *andNode) eval(m Message) (value, error)    { t, err := n.test(m); return t.value(), err }
func (n *orNode) eval(m Message) (value, error)     { t, err := n.test(m); return t.value(), err }
func (n *notNode) eval(m Message) (value, error)    { t, err := n.test(m); return t.value(), err }
func (n *likeNode) eval(m Message) (value, error)   { t, err := n.test(m); return t.value(), err }
func (n *inNode) eval(m Message) (value, error)     { t, err := n.test(m); return t.value(), err }
func (n *isNullNode) eval(m Message) (value, error) { t, err := n.test(m); return t.value(), err }
func (n *existsNode) eval(m Message) (value, error) { t, err := n.test(m); return t.value(), err }

// test is AND with SQL three-valued logic, short-circuiting on FALSE.
func (n *andNode) test(m Message) (tri, error) {
	l, err := n.l.test(m)
	if err != nil || l == triFalse {
		return l, err
	}
	r, err := n.r.test(m)
	if err != nil || r == triFalse {
		return r, err
	}
	if l == triUnknown || r == triUnknown {
		return triUnknown, nil
	}
	return triTrue, nil
}

// test is OR with SQL three-valued logic, short-circuiting on TRUE.
func (n *orNode) test(m Message) (tri, error) {
	l, err := n.l.test(m)
	if err != nil || l == triTrue {
		return l, err
	}
	r, err := n.r.test(m)
	if err != nil || r == triTrue {
		return r, err
	}
	if l == triUnknown || r == triUnknown {
		return triUnknown, nil
	}
	return triFalse, nil
}

func (n *notNode) test(m Message) (tri, error) {
	t, err := n.x.test(m)
	if err != nil || t == triUnknown {
		return t, err
	}
	return triOf(t == triFalse), nil
}

// test matches a LIKE. Unknown operands give unknown; so does a value that
// is not a string. A pattern or escape of the wrong type is an error.
func (n *likeNode) test(m Message) (tri, error) {
	x, err := n.x.eval(m)
	if err != nil {
		return triUnknown, err
	}
	pat, err := n.pattern.eval(m)
	if err != nil {
		return triUnknown, err
	}
	esc := noEscape
	if n.escape != nil {
		e, err := n.escape.eval(m)
		if err != nil {
			return triUnknown, err
		}
		if e.isNull() {
			return triUnknown, nil
		}
		var ok bool
		if esc, ok = escapeRune(e); !ok {
			return triUnknown, evalErrorf(n.pos, "ESCAPE must be a single character string")
		}
	}
	if x.isNull() || pat.isNull() {
		return triUnknown, nil
	}
	if pat.k != kindString {
		return triUnknown, evalErrorf(n.pos, "LIKE pattern must be a string, found %s", kindName(pat.k))
	}
	if x.k != kindString {
		return triUnknown, nil
	}
	if n.plan.shape != likeGeneral {
		return triOf(n.plan.match(x.s) != n.not), nil
	}
	if _, constant := n.pattern.(*constNode); !constant && !validLikePattern(pat.s, esc) {
		return triUnknown, evalErrorf(n.pos, "LIKE pattern ends with the escape character")
	}
	return triOf(likeMatch(x.s, pat.s, esc) != n.not), nil
}

// test is IN: TRUE when the value equals a list element (by the rules of
// "="), unknown when the value itself is unknown, FALSE otherwise.
func (n *inNode) test(m Message) (tri, error) {
	x, err := n.x.eval(m)
	if err != nil || x.isNull() {
		return triUnknown, err
	}
	for _, e := range n.list {
		v, err := e.eval(m)
		if err != nil {
			return triUnknown, err
		}
		if !v.isNull() && compareValues(x, v, false) == orderEqual {
			return triOf(!n.not), nil
		}
	}
	return triOf(n.not), nil
}

// test is IS [NOT] NULL; a missing property is NULL. Never unknown.
func (n *isNullNode) test(m Message) (tri, error) {
	x, err := n.x.eval(m)
	if err != nil {
		return triUnknown, err
	}
	return triOf(x.isNull() != n.not), nil
}

// test is EXISTS: whether the property is present, even with a null value.
func (n *existsNode) test(m Message) (tri, error) {
	var ok bool
	if n.p.sys {
		_, ok = m.System(n.p.name)
	} else {
		_, ok = m.Property(n.p.name)
	}
	return triOf(ok), nil
}
