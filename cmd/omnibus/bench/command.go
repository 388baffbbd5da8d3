package bench

import (
	"context"
	"fmt"
	"io"
)

// Main runs the benchmark c describes, prints the final table to out
// (and progress to progress), writes --json and --plot files, and
// returns an error when the run could not be done or found errors,
// loss or duplicates.
func Main(ctx context.Context, c Config, out, progress io.Writer) error {
	r, err := Run(ctx, c, progress)
	if err != nil {
		return err
	}
	if err := r.WriteTable(out); err != nil {
		return err
	}
	if c.JSONPath != "" {
		if err := r.WriteJSON(c.JSONPath); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if c.PlotPath != "" {
		if err := r.WritePlot(c.PlotPath); err != nil {
			return fmt.Errorf("--plot: %w", err)
		}
	}
	return r.Err()
}
