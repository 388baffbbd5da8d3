package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the outcome of a run.
type Report struct {
	Endpoint string        `json:"endpoint"`
	Started  time.Time     `json:"started"`
	Elapsed  time.Duration `json:"elapsed_ns"`
	Results  []Result      `json:"results"`
}

// Format is an output format of [Report.Write].
type Format string

// Output formats.
const (
	FormatText     Format = "text"
	FormatMarkdown Format = "markdown"
	FormatJSON     Format = "json"
)

// Write renders the report.
func (r *Report) Write(w io.Writer, f Format) error {
	switch f {
	case FormatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		p, fl, s := r.Counts()
		return enc.Encode(struct {
			*Report
			Passed  int `json:"passed"`
			Failed  int `json:"failed"`
			Skipped int `json:"skipped"`
		}{r, p, fl, s})
	case FormatMarkdown:
		return r.writeMarkdown(w)
	case FormatText, "":
		return r.writeText(w)
	}
	return fmt.Errorf("conformance: unknown format %q (text, markdown, json)", f)
}

func (r *Report) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tSEED\tPROTOCOL\tRESULT\tTIME\tDETAIL")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", res.Name, res.Seed, res.Protocol, res.Status,
			res.Duration.Round(time.Millisecond), oneLine(res.Detail, 160))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", r.Summary())
	return err
}

func (r *Report) writeMarkdown(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | seed | protocol | result | time | detail |\n|---|---|---|---|---|---|\n")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", mdCell(res.Name), mdCell(res.Seed), res.Protocol, res.Status,
			res.Duration.Round(10*time.Millisecond), mdCell(oneLine(res.Detail, 300)))
	}
	fmt.Fprintf(&b, "\n%s\n", r.Summary())
	_, err := io.WriteString(w, b.String())
	return err
}

// mdCell escapes the pipes of a markdown table cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > max {
		s = s[:max-1] + "…"
	}
	return s
}
