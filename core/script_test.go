package core_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Golden scripts (STYLE §7.8): each file in testdata/ is a sequence of
// blocks
//
//	# optional comment lines
//	command arg key=value ...
//	----
//	expected output (no blank lines)
//
// separated by blank lines. The runner (script_cmds_test.go) executes each
// command against a broker on a fake clock and compares what it prints
// with the expected output. Run with -rewrite to regenerate the files.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of core/testdata scripts")

// scriptBlock is one command of a script and its expected output.
type scriptBlock struct {
	comments []string
	cmd      string
	line     int
	want     string
	got      string
}

func parseScript(path string) ([]*scriptBlock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []*scriptBlock
	var comments []string
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			continue
		case strings.HasPrefix(line, "#"):
			comments = append(comments, line)
			continue
		}
		b := &scriptBlock{comments: comments, cmd: line, line: n}
		comments = nil
		if !sc.Scan() || sc.Text() != "----" {
			return nil, fmt.Errorf("%s:%d: command %q not followed by ----", path, n, line)
		}
		n++
		var out []string
		for sc.Scan() {
			n++
			if sc.Text() == "" {
				break
			}
			out = append(out, sc.Text())
		}
		b.want = strings.Join(out, "\n")
		blocks = append(blocks, b)
	}
	return blocks, sc.Err()
}

func writeScript(path string, blocks []*scriptBlock) error {
	var sb strings.Builder
	for i, b := range blocks {
		if i > 0 {
			sb.WriteString("\n")
		}
		for _, c := range b.comments {
			sb.WriteString(c + "\n")
		}
		sb.WriteString(b.cmd + "\n----\n")
		if b.got != "" {
			sb.WriteString(b.got + "\n")
		}
	}
	return os.WriteFile(path, []byte(sb.String()), 0o644)
}

func TestScripts(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			blocks, err := parseScript(path)
			if err != nil {
				t.Fatal(err)
			}
			r := newScriptRunner(t)
			for _, b := range blocks {
				b.got = strings.TrimRight(r.run(b.cmd), "\n")
				if !*rewrite && b.got != b.want {
					t.Errorf("%s:%d: %s\n got:\n%s\nwant:\n%s", path, b.line, b.cmd, b.got, b.want)
				}
			}
			if *rewrite {
				if err := writeScript(path, blocks); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// splitArgs splits a command line on spaces, keeping double-quoted parts
// (which may hold spaces) together and dropping the quotes.
func splitArgs(line string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range line {
		switch {
		case r == '"':
			inQuote = !inQuote
			have = true
		case r == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}
