// Package doclinks checks the links between the repository's Markdown
// documents, so that moving a section or renaming a heading cannot leave a
// reader on a dead link.
//
// [Check] walks every *.md file under a root (skipping .git and
// node_modules), reads each inline link, image and reference definition
// outside code, and reports a relative target that does not exist, one
// that leaves the root, and a #fragment that names no heading (or HTML
// id/name) of the Markdown file it points into. Heading anchors follow
// GitHub's rules: the heading's text lower-cased, every character but
// letters, digits, marks, '-', '_' and spaces dropped, spaces turned into
// '-', and a repeated anchor suffixed -1, -2, … in order. External links
// (any URL scheme: http, https, mailto) are not fetched.
//
// The package's test runs Check on the repository, so a broken link fails
// `make test`.
package doclinks
