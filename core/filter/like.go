package filter

import (
	"strings"
	"unicode/utf8"
)

// LIKE patterns use '%' for any run of characters (including none) and '_'
// for exactly one character. Characters are Unicode code points and
// comparison is ordinal (case-sensitive). An escape character makes the
// character after it literal; a pattern that ends in the escape character
// is invalid.

// escapeRune returns the escape character held by v, which must be a string
// of exactly one character.
func escapeRune(v value) (rune, bool) {
	if v.k != kindString {
		return 0, false
	}
	r, size := utf8.DecodeRuneInString(v.s)
	if size == 0 || size != len(v.s) {
		return 0, false
	}
	return r, true
}

// noEscape stands for "no ESCAPE clause"; it is not a valid rune, so it
// never equals a pattern character.
const noEscape rune = -1

// validLikePattern reports whether every escape character in pat is
// followed by another character.
func validLikePattern(pat string, esc rune) bool {
	if esc == noEscape {
		return true
	}
	for i := 0; i < len(pat); {
		r, size := utf8.DecodeRuneInString(pat[i:])
		i += size
		if r == esc {
			if i >= len(pat) {
				return false
			}
			_, size = utf8.DecodeRuneInString(pat[i:])
			i += size
		}
	}
	return true
}

// checkConstLike validates a LIKE whose pattern and escape are constants,
// and records a plan for it when one applies.
func checkConstLike(n *likeNode) *EvalError {
	pc, ok := n.pattern.(*constNode)
	if !ok || pc.v.k != kindString {
		return nil
	}
	esc := noEscape
	if n.escape != nil {
		ec, ok := n.escape.(*constNode)
		if !ok {
			return nil
		}
		if esc, ok = escapeRune(ec.v); !ok {
			return nil
		}
	}
	if !validLikePattern(pc.v.s, esc) {
		return &EvalError{Pos: n.pos, Msg: "LIKE pattern ends with the escape character"}
	}
	n.plan = planLike(pc.v.s, esc)
	return nil
}

// likeMatch reports whether s matches pat. It runs in O(len(s)*len(pat))
// time in the worst case and does not allocate: it remembers only the most
// recent '%' and retries from there, which is enough because a later '%'
// can absorb anything an earlier one could. pat must be valid for esc.
func likeMatch(s, pat string, esc rune) bool {
	si, pi := 0, 0
	starPi, starSi := -1, 0
	for si < len(s) {
		if pi < len(pat) {
			pr, psz := utf8.DecodeRuneInString(pat[pi:])
			switch {
			case pr == esc:
				lit, lsz := utf8.DecodeRuneInString(pat[pi+psz:])
				if sr, ssz := utf8.DecodeRuneInString(s[si:]); sr == lit {
					si += ssz
					pi += psz + lsz
					continue
				}
			case pr == '%':
				pi += psz
				starPi, starSi = pi, si
				continue
			case pr == '_':
				_, ssz := utf8.DecodeRuneInString(s[si:])
				si += ssz
				pi += psz
				continue
			default:
				if sr, ssz := utf8.DecodeRuneInString(s[si:]); sr == pr {
					si += ssz
					pi += psz
					continue
				}
			}
		}
		if starPi < 0 {
			return false
		}
		_, ssz := utf8.DecodeRuneInString(s[starSi:])
		starSi += ssz
		si, pi = starSi, starPi
	}
	for pi < len(pat) {
		pr, psz := utf8.DecodeRuneInString(pat[pi:])
		if pr != '%' || pr == esc {
			return false
		}
		pi += psz
	}
	return true
}

// likeShape classifies constant patterns that reduce to a string test.
type likeShape uint8

const (
	likeGeneral  likeShape = iota // run likeMatch
	likeExact                     // "abc"
	likePrefix                    // "abc%"
	likeSuffix                    // "%abc"
	likeContains                  // "%abc%"
	likeAny                       // "%"
)

// likePlan is a constant pattern compiled for the common shapes; lit is the
// literal text with escapes removed.
type likePlan struct {
	shape likeShape
	lit   string
}

// planLike classifies a valid constant pattern. Patterns with '_', with
// '%' between literal characters, or with U+FFFD (where byte and rune
// comparison could differ on invalid UTF-8 input) stay general.
func planLike(pat string, esc rune) likePlan {
	general := likePlan{shape: likeGeneral}
	if !utf8.ValidString(pat) {
		return general
	}
	var lit []byte
	lead, trail := false, false
	for i := 0; i < len(pat); {
		r, size := utf8.DecodeRuneInString(pat[i:])
		i += size
		switch {
		case r == esc:
			r, size = utf8.DecodeRuneInString(pat[i:])
			i += size
		case r == '_':
			return general
		case r == '%':
			if len(lit) == 0 {
				lead = true
			} else {
				trail = true
			}
			continue
		}
		if trail || r == utf8.RuneError {
			return general
		}
		lit = utf8.AppendRune(lit, r)
	}
	switch {
	case len(lit) == 0 && lead:
		return likePlan{shape: likeAny}
	case lead && trail:
		return likePlan{shape: likeContains, lit: string(lit)}
	case lead:
		return likePlan{shape: likeSuffix, lit: string(lit)}
	case trail:
		return likePlan{shape: likePrefix, lit: string(lit)}
	}
	return likePlan{shape: likeExact, lit: string(lit)}
}

// match applies a non-general plan.
func (p likePlan) match(s string) bool {
	switch p.shape {
	case likeExact:
		return s == p.lit
	case likePrefix:
		return strings.HasPrefix(s, p.lit)
	case likeSuffix:
		return strings.HasSuffix(s, p.lit)
	case likeContains:
		return strings.Contains(s, p.lit)
	}
	return true // likeAny
}
