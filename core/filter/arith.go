package filter

import (
	"math"
	"time"
)

// Arithmetic follows C# binding rules where Service Bus documents them:
// long op long stays long (wrapping on overflow, truncating division),
// anything with a double becomes double, "+" with a string operand
// concatenates, and datetime/timespan support the obvious sums and
// differences. NULL (unknown) in, NULL out.

// arith applies a binary arithmetic operator.
func arith(op tokenKind, a, b value, pos int) (value, error) {
	if a.isNull() || b.isNull() {
		return nullValue, nil
	}
	if a.isNumeric() && b.isNumeric() {
		if a.k == kindInt && b.k == kindInt {
			return arithInt(op, a.i, b.i, pos)
		}
		return arithFloat(op, a.float(), b.float()), nil
	}
	if op == tokPlus && (a.k == kindString || b.k == kindString) {
		x, okx := formatForConcat(a)
		y, oky := formatForConcat(b)
		if okx && oky {
			return value{k: kindString, s: x + y}, nil
		}
	}
	if v, ok := arithTime(op, a, b); ok {
		return v, nil
	}
	return nullValue, evalErrorf(pos, "operator '%s' cannot be applied to %s and %s", opText(op), kindName(a.k), kindName(b.k))
}

func arithInt(op tokenKind, x, y int64, pos int) (value, error) {
	var r int64
	switch op {
	case tokPlus:
		r = x + y
	case tokMinus:
		r = x - y
	case tokStar:
		r = x * y
	case tokSlash, tokPercent:
		if y == 0 {
			return nullValue, evalErrorf(pos, "integer division by zero")
		}
		if op == tokSlash {
			r = x / y
		} else {
			r = x % y
		}
	}
	return value{k: kindInt, i: r}, nil
}

func arithFloat(op tokenKind, x, y float64) value {
	var r float64
	switch op {
	case tokPlus:
		r = x + y
	case tokMinus:
		r = x - y
	case tokStar:
		r = x * y
	case tokSlash:
		r = x / y
	case tokPercent:
		r = math.Mod(x, y)
	}
	return value{k: kindFloat, f: r}
}

// arithTime handles datetime ± timespan, datetime - datetime and
// timespan ± timespan.
func arithTime(op tokenKind, a, b value) (value, bool) {
	switch {
	case a.k == kindDuration && b.k == kindDuration && op == tokPlus:
		return value{k: kindDuration, i: a.i + b.i}, true
	case a.k == kindDuration && b.k == kindDuration && op == tokMinus:
		return value{k: kindDuration, i: a.i - b.i}, true
	case a.k == kindTime && b.k == kindDuration && op == tokPlus:
		return value{k: kindTime, o: a.o.(time.Time).Add(time.Duration(b.i))}, true
	case a.k == kindDuration && b.k == kindTime && op == tokPlus:
		return value{k: kindTime, o: b.o.(time.Time).Add(time.Duration(a.i))}, true
	case a.k == kindTime && b.k == kindDuration && op == tokMinus:
		return value{k: kindTime, o: a.o.(time.Time).Add(-time.Duration(b.i))}, true
	case a.k == kindTime && b.k == kindTime && op == tokMinus:
		return value{k: kindDuration, i: int64(a.o.(time.Time).Sub(b.o.(time.Time)))}, true
	}
	return value{}, false
}

// unary applies unary plus or minus.
func unary(op tokenKind, x value, pos int) (value, error) {
	switch x.k {
	case kindNull:
		return nullValue, nil
	case kindInt:
		if op == tokMinus {
			return value{k: kindInt, i: -x.i}, nil
		}
		return value{k: kindInt, i: x.i}, nil
	case kindUint, kindFloat:
		if op == tokMinus {
			return value{k: kindFloat, f: -x.float()}, nil
		}
		return value{k: x.k, i: x.i, f: x.f}, nil
	case kindDuration:
		if op == tokMinus {
			return value{k: kindDuration, i: -x.i}, nil
		}
		return value{k: kindDuration, i: x.i}, nil
	}
	return nullValue, evalErrorf(pos, "unary '%s' cannot be applied to %s", opText(op), kindName(x.k))
}
