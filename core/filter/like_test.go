package filter

import "testing"

func TestLikeMatch(t *testing.T) {
	tests := []struct {
		s, pat string
		esc    rune
		want   bool
	}{
		{"", "", noEscape, true},
		{"", "%", noEscape, true},
		{"", "%%", noEscape, true},
		{"", "_", noEscape, false},
		{"a", "", noEscape, false},
		{"abc", "abc", noEscape, true},
		{"abc", "ABC", noEscape, false}, // ordinal, case-sensitive
		{"abc", "a%", noEscape, true},
		{"abc", "%c", noEscape, true},
		{"abc", "%b%", noEscape, true},
		{"abc", "%d%", noEscape, false},
		{"abc", "a_c", noEscape, true},
		{"abc", "a__", noEscape, true},
		{"abc", "a___", noEscape, false},
		{"abc", "___", noEscape, true},
		{"abc", "_%_", noEscape, true},
		{"ab", "_%_%_", noEscape, false},
		{"aaa", "%a%a%a%", noEscape, true},
		{"aa", "%a%a%a%", noEscape, false},
		{"mississippi", "m%iss%ppi", noEscape, true},
		{"mississippi", "m%iss%ppx", noEscape, false},
		{"abcabd", "%abd", noEscape, true},
		{"ab", "a%%%b", noEscape, true},
		// multi-byte: '_' is one character, not one byte
		{"größe", "gr__e", noEscape, true},
		{"größe", "gr_e", noEscape, false},
		{"日本語", "_本_", noEscape, true},
		{"日本語", "%語", noEscape, true},
		// escapes
		{"100%", "100!%", '!', true},
		{"1000", "100!%", '!', false},
		{"a_b", "a!_b", '!', true},
		{"axb", "a!_b", '!', false},
		{"a!b", "a!!b", '!', true},
		{"abc", "!a!b!c", '!', true}, // escaping an ordinary character keeps it literal
		{"x%", "%!%", '!', true},
		{"x%y", "%!%", '!', false},
		{"ABC%", `ABC\%`, '\\', true},
		{"ABCD", `ABC\%`, '\\', false},
		{"%", "%%", '%', true}, // '%' as the escape character makes "%%" a literal '%'
		{"x", "%%", '%', false},
	}
	for _, tt := range tests {
		if tt.esc != noEscape && !validLikePattern(tt.pat, tt.esc) {
			continue // covered by TestValidLikePattern
		}
		if got := likeMatch(tt.s, tt.pat, tt.esc); got != tt.want {
			t.Errorf("likeMatch(%q, %q, %q) = %v, want %v", tt.s, tt.pat, tt.esc, got, tt.want)
		}
	}
}

func TestValidLikePattern(t *testing.T) {
	tests := []struct {
		pat  string
		esc  rune
		want bool
	}{
		{"abc", noEscape, true},
		{`abc\`, noEscape, true},
		{`abc\`, '\\', false},
		{`abc\\`, '\\', true},
		{`\%\_`, '\\', true},
		{"a%", '%', false},
		{"日!", '!', false},
		{"!日", '!', true},
	}
	for _, tt := range tests {
		if got := validLikePattern(tt.pat, tt.esc); got != tt.want {
			t.Errorf("validLikePattern(%q, %q) = %v, want %v", tt.pat, tt.esc, got, tt.want)
		}
	}
}

// TestLikeAgainstReference cross-checks likeMatch with a naive recursive
// matcher over every short string and pattern on a small alphabet.
func TestLikeAgainstReference(t *testing.T) {
	var ref func(s, p []rune) bool
	ref = func(s, p []rune) bool {
		if len(p) == 0 {
			return len(s) == 0
		}
		switch p[0] {
		case '%':
			for i := 0; i <= len(s); i++ {
				if ref(s[i:], p[1:]) {
					return true
				}
			}
			return false
		case '_':
			return len(s) > 0 && ref(s[1:], p[1:])
		}
		return len(s) > 0 && s[0] == p[0] && ref(s[1:], p[1:])
	}
	strs := allStrings("ab", 4)
	pats := allStrings("ab%_", 4)
	for _, s := range strs {
		for _, p := range pats {
			want := ref([]rune(s), []rune(p))
			if got := likeMatch(s, p, noEscape); got != want {
				t.Fatalf("likeMatch(%q, %q) = %v, reference says %v", s, p, got, want)
			}
		}
	}
}

// allStrings returns every string over alphabet of length 0..n.
func allStrings(alphabet string, n int) []string {
	out := []string{""}
	prev := []string{""}
	for range n {
		var next []string
		for _, s := range prev {
			for _, c := range alphabet {
				next = append(next, s+string(c))
			}
		}
		out = append(out, next...)
		prev = next
	}
	return out
}

// TestLikePlanAgreesWithMatcher checks that every pattern the planner
// simplifies gives the same answers as the general matcher.
func TestLikePlanAgreesWithMatcher(t *testing.T) {
	strs := append(allStrings("a!%é", 3), "\xff", "a\xffa", "\uFFFD")
	pats := allStrings("a!%_é", 4)
	planned := 0
	for _, esc := range []rune{noEscape, '!'} {
		for _, p := range pats {
			if !validLikePattern(p, esc) {
				continue
			}
			plan := planLike(p, esc)
			if plan.shape == likeGeneral {
				continue
			}
			planned++
			for _, s := range strs {
				if got, want := plan.match(s), likeMatch(s, p, esc); got != want {
					t.Fatalf("pattern %q escape %q on %q: plan %+v says %v, matcher %v", p, esc, s, plan, got, want)
				}
			}
		}
	}
	if planned < 100 {
		t.Errorf("only %d patterns were planned; the planner is not being exercised", planned)
	}
}

func TestPlanLikeShapes(t *testing.T) {
	tests := []struct {
		pat   string
		esc   rune
		shape likeShape
		lit   string
	}{
		{"abc", noEscape, likeExact, "abc"},
		{"abc%", noEscape, likePrefix, "abc"},
		{"%abc", noEscape, likeSuffix, "abc"},
		{"%%abc%%", noEscape, likeContains, "abc"},
		{"%", noEscape, likeAny, ""},
		{"", noEscape, likeExact, ""},
		{"a%c", noEscape, likeGeneral, ""},
		{"a_", noEscape, likeGeneral, ""},
		{"100!%%", '!', likePrefix, "100%"},
		{"!_x", '!', likeExact, "_x"},
	}
	for _, tt := range tests {
		got := planLike(tt.pat, tt.esc)
		if got.shape != tt.shape || (tt.shape != likeGeneral && got.lit != tt.lit) {
			t.Errorf("planLike(%q, %q) = %+v, want shape %d lit %q", tt.pat, tt.esc, got, tt.shape, tt.lit)
		}
	}
}
