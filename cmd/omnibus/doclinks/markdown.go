package doclinks

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// A Link is one link target found in a Markdown document.
type Link struct {
	Line   int    // 1-based line of the document the link is on
	Target string // as written, without angle brackets or title
}

var (
	// inlineLink matches the "](target)" or "](target "title")" end of an
	// inline link or image; the text before it is not needed.
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|'[^']*'|\([^)]*\)))?\s*\)`)
	// refDefinition matches a reference definition: "[label]: target".
	refDefinition = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>\n]*>|\S+)`)
	atxHeading    = regexp.MustCompile(`^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	htmlAnchor    = regexp.MustCompile(`<[a-zA-Z][^>]*\s(?:id|name)\s*=\s*["']([^"']+)["']`)
	headingLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag       = regexp.MustCompile(`</?[a-zA-Z][^>]*>`)
)

// Links returns the link targets of a Markdown document: inline links and
// images, and reference definitions, outside fenced code blocks and code
// spans.
func Links(doc string) []Link {
	var links []Link
	lines := strings.Split(blankCodeSpans(blankFences(doc)), "\n")
	for i, line := range lines {
		if m := refDefinition.FindStringSubmatch(line); m != nil {
			links = append(links, Link{Line: i + 1, Target: strings.Trim(m[1], "<>")})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			links = append(links, Link{Line: i + 1, Target: strings.Trim(m[1], "<>")})
		}
	}
	return links
}

// Anchors returns the fragments a link may name in a Markdown document:
// the GitHub anchor of each heading, numbered as GitHub numbers repeated
// ones, and every HTML id or name attribute.
func Anchors(doc string) map[string]bool {
	anchors := make(map[string]bool)
	seen := make(map[string]int)
	text := blankFences(doc)
	for _, line := range strings.Split(text, "\n") {
		if m := atxHeading.FindStringSubmatch(line); m != nil {
			slug := Slug(m[2])
			if n := seen[slug]; n > 0 {
				anchors[slug+"-"+strconv.Itoa(n)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(blankCodeSpans(text), -1) {
		anchors[m[1]] = true
	}
	return anchors
}

// Slug is the anchor GitHub gives a heading whose Markdown text is
// heading: links reduced to their text, HTML tags dropped, lower-cased,
// every character but letters, digits, marks, '-', '_' and spaces
// dropped, and spaces turned into '-'.
func Slug(heading string) string {
	heading = headingLink.ReplaceAllString(heading, "$1")
	heading = htmlTag.ReplaceAllString(heading, "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// blankFences replaces every line inside a fenced code block (``` or ~~~),
// fences included, with an empty line, keeping line numbers.
func blankFences(doc string) string {
	lines := strings.Split(doc, "\n")
	var fence string // the opening fence while inside a block
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " \t")
		if fence == "" {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				lines[i] = ""
			}
			continue
		}
		if f := fenceOf(trimmed); f != "" && f[0] == fence[0] && len(f) >= len(fence) && strings.TrimSpace(trimmed[len(f):]) == "" {
			fence = ""
		}
		lines[i] = ""
	}
	return strings.Join(lines, "\n")
}

// fenceOf returns the run of three or more backticks or tildes line
// starts with, or "".
func fenceOf(line string) string {
	for _, c := range []byte{'`', '~'} {
		n := 0
		for n < len(line) && line[n] == c {
			n++
		}
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

// blankCodeSpans replaces the content of every code span with spaces,
// keeping newlines. A span is a run of backticks closed by a run of the
// same length within its paragraph; an unclosed run is literal text.
func blankCodeSpans(text string) string {
	b := []byte(text)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := runLen(b, i)
		end := closingRun(b, i+n, n)
		if end < 0 {
			i += n
			continue
		}
		for j := i; j < end+n; j++ {
			if b[j] != '\n' {
				b[j] = ' '
			}
		}
		i = end + n
	}
	return string(b)
}

func runLen(b []byte, i int) int {
	n := 0
	for i+n < len(b) && b[i+n] == '`' {
		n++
	}
	return n
}

// closingRun returns where a run of exactly n backticks starts at or after
// from, before the paragraph ends (a blank line), or -1.
func closingRun(b []byte, from, n int) int {
	for j := from; j < len(b); {
		switch {
		case b[j] == '\n' && isBlankLineAt(b, j+1):
			return -1
		case b[j] == '`':
			m := runLen(b, j)
			if m == n {
				return j
			}
			j += m
		default:
			j++
		}
	}
	return -1
}

func isBlankLineAt(b []byte, i int) bool {
	for ; i < len(b) && b[i] != '\n'; i++ {
		if b[i] != ' ' && b[i] != '\t' {
			return false
		}
	}
	return true
}
