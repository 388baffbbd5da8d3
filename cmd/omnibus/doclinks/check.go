package doclinks

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// A Problem is a link that leads nowhere.
type Problem struct {
	File   string // slash-separated, relative to the root
	Line   int
	Target string
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Reason)
}

// skipDirs are directories Check does not enter: not the project's
// documents.
var skipDirs = map[string]bool{".git": true, "node_modules": true}

var urlScheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)

// A Report is what Check read and found.
type Report struct {
	Documents int       // Markdown files read
	Links     int       // links checked, external ones included
	Problems  []Problem // links that lead nowhere, in file and line order
}

// Check reads every *.md file under root and checks each of their links.
func Check(root string) (Report, error) {
	var docs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDirs[d.Name()] {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	sort.Strings(docs)
	report := Report{Documents: len(docs)}

	anchors := make(map[string]map[string]bool) // by document, read once
	anchorsOf := func(doc string) (map[string]bool, error) {
		if a, ok := anchors[doc]; ok {
			return a, nil
		}
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			return nil, err
		}
		anchors[doc] = Anchors(string(text))
		return anchors[doc], nil
	}

	for _, doc := range docs {
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(doc)))
		if err != nil {
			return Report{}, err
		}
		for _, l := range Links(string(text)) {
			report.Links++
			reason, err := checkLink(root, doc, l.Target, anchorsOf)
			if err != nil {
				return Report{}, err
			}
			if reason != "" {
				report.Problems = append(report.Problems, Problem{File: doc, Line: l.Line, Target: l.Target, Reason: reason})
			}
		}
	}
	return report, nil
}

// checkLink says what is wrong with target, a link in doc, or "".
func checkLink(root, doc, target string, anchorsOf func(string) (map[string]bool, error)) (string, error) {
	if target == "" {
		return "empty link", nil
	}
	if urlScheme.MatchString(target) {
		return "", nil // external: not fetched
	}
	rawPath, fragment, _ := strings.Cut(target, "#")
	p, err := url.PathUnescape(rawPath)
	if err != nil {
		return "the path is not valid URL escaping", nil
	}
	if fragment, err = url.PathUnescape(fragment); err != nil {
		return "the fragment is not valid URL escaping", nil
	}
	dest := doc
	if p != "" {
		if strings.HasPrefix(p, "/") {
			dest = path.Clean(strings.TrimPrefix(p, "/")) // GitHub: from the repository's root
		} else {
			dest = path.Join(path.Dir(doc), p)
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "leads outside the repository", nil
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
			return "no such file", nil
		}
	}
	if fragment == "" || !strings.HasSuffix(dest, ".md") {
		return "", nil
	}
	a, err := anchorsOf(dest)
	if err != nil {
		return "", err
	}
	if !a[fragment] {
		return fmt.Sprintf("%s has no heading with the anchor #%s", dest, fragment), nil
	}
	return "", nil
}
