package httpgw

import "strings"

// lenientJSON rewrites the non-JSON forms of a BrokerProperties object that
// clients are known to send into JSON (rest.md §2.2 "Client quirk"):
//
//   - the legacy Python SDK's str(dict): single-quoted strings and the
//     literals True, False and None;
//   - typographic double quotes (“ ”), as in the REST docs' own example,
//     interchangeable with '"' as string delimiters.
//
// It reports false when the text has an unterminated string. The result is
// not validated: the caller parses it as JSON.
func lenientJSON(s string) (string, bool) {
	var b strings.Builder
	b.Grow(len(s) + 8)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\'' || isDoubleQuote(c):
			end, ok := copyString(&b, rs, i)
			if !ok {
				return "", false
			}
			i = end
		case isIdentStart(c):
			j := i
			for j < len(rs) && isIdentStart(rs[j]) {
				j++
			}
			word := string(rs[i:j])
			switch word {
			case "True":
				word = "true"
			case "False":
				word = "false"
			case "None":
				word = "null"
			}
			b.WriteString(word)
			i = j - 1
		default:
			b.WriteRune(c)
		}
	}
	return b.String(), true
}

// copyString writes the string starting at rs[start] as a JSON string and
// returns the index of its closing delimiter.
func copyString(b *strings.Builder, rs []rune, start int) (int, bool) {
	single := rs[start] == '\''
	b.WriteByte('"')
	for i := start + 1; i < len(rs); i++ {
		c := rs[i]
		switch {
		case c == '\\' && i+1 < len(rs):
			next := rs[i+1]
			if next == '\'' {
				b.WriteRune('\'')
			} else {
				b.WriteRune('\\')
				b.WriteRune(next)
			}
			i++
		case single && c == '\'', !single && isDoubleQuote(c):
			b.WriteByte('"')
			return i, true
		case c == '"' || c == '“' || c == '”':
			b.WriteString(`\"`)
		default:
			b.WriteRune(c)
		}
	}
	return 0, false
}

func isDoubleQuote(c rune) bool { return c == '"' || c == '“' || c == '”' }

func isIdentStart(c rune) bool { return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
