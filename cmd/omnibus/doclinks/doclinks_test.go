package doclinks

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestRepositoryLinks checks every link of every Markdown document of the
// repository: a moved section or a renamed heading fails it.
func TestRepositoryLinks(t *testing.T) {
	root := repositoryRoot(t)
	report, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range report.Problems {
		t.Errorf("%s", p)
	}
	// A check that read nothing would pass: the README alone links to
	// every reference document.
	if report.Documents < 10 || report.Links < 50 {
		t.Fatalf("read %d documents with %d links under %s; expected the repository's (at least 10 and 50)", report.Documents, report.Links, root)
	}
	t.Logf("%d documents, %d links, %d broken", report.Documents, report.Links, len(report.Problems))
}

// repositoryRoot is the nearest directory above the test's that holds
// go.mod.
func repositoryRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// TestCheckReportsEachBrokenLink runs Check on a small tree holding one
// link of every kind, good and broken, and expects exactly the broken ones.
func TestCheckReportsEachBrokenLink(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", strings.Join([]string{
		"# Top",
		"[good: same file](#limits) [good: numbered](#limits-1) [good: code and punctuation](#tls-amqps-and-https)",
		"[good: other file](pkg/README.md#running-it) ![good: image](pkg/shot.png) [good: directory](pkg)",
		"[good: external](https://example.com/missing#nowhere) <https://example.com> [good: mail](mailto:a@b.c)",
		"[good: escaped](pkg/README.md#%C3%A9t%C3%A9) [good: title](pkg/README.md \"a title\") [good: rooted](/pkg/README.md)",
		"[bad: no file](missing.md) [bad: no anchor](#nowhere) [bad: other anchor](pkg/README.md#limits)",
		"[bad: outside](../outside.md) [bad: numbered too far](#limits-2)",
		"`[ignored: code span](missing.md)` ``[ignored: ` inside](missing.md)``",
		"[ref]: pkg/README.md#nowhere",
		"",
		"```",
		"[ignored: fenced](missing.md)",
		"```",
		"## Limits",
		"## Limits",
		"### TLS: `AMQPS` and **HTTPS**",
		"~~~sh",
		"# not a heading",
		"~~~",
		"[bad: fenced heading](#not-a-heading)",
	}, "\n"))
	write("pkg/README.md", "# pkg\n\n## Running it\n\n## Été\n\nBack to [top](../README.md#top), [broken](../README.md#running-it).\n")
	write("pkg/shot.png", "")
	write("node_modules/dep/README.md", "[not ours](missing.md)\n")

	report, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range report.Problems {
		got = append(got, p.File+":"+strconv.Itoa(p.Line)+" "+p.Target)
	}
	want := []string{
		"README.md:6 missing.md",
		"README.md:6 #nowhere",
		"README.md:6 pkg/README.md#limits",
		"README.md:7 ../outside.md",
		"README.md:7 #limits-2",
		"README.md:9 pkg/README.md#nowhere",
		"README.md:20 #not-a-heading",
		"pkg/README.md:7 ../README.md#running-it",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if report.Documents != 2 {
		t.Errorf("read %d documents, want 2 (node_modules skipped)", report.Documents)
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Limits":                        "limits",
		"TLS: AMQPS and HTTPS":          "tls-amqps-and-https",
		"What `--prove-failure` proves": "what---prove-failure-proves",
		"`omnibus cluster status`":      "omnibus-cluster-status",
		"Seed 003 — message expiry (time to live) and temporary entities (AutoDeleteOnIdle)": "seed-003--message-expiry-time-to-live-and-temporary-entities-autodeleteonidle",
		"DESIGN.md, Peer transport":              "designmd-peer-transport",
		"Step 2 (on paper): several Raft groups": "step-2-on-paper-several-raft-groups",
		"See [the docs](http://x.y/z) now":       "see-the-docs-now",
		"snake_case and Été":                     "snake_case-and-été",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}
