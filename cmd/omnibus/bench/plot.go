package bench

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// WritePlot draws the run into path (.png or .svg): throughput over time
// on top, the latency distribution (share of messages per latency
// bucket, log-scaled latency axis) below.
func (r *Result) WritePlot(path string) error {
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".png" && ext != ".svg" {
		return fmt.Errorf("%w: --plot wants a .png or .svg file, not %q", errUsage, path)
	}
	top, err := r.throughputPlot()
	if err != nil {
		return err
	}
	bottom, err := r.latencyPlot()
	if err != nil {
		return err
	}
	const w, h = 8 * vg.Inch, 8 * vg.Inch
	var c draw.Canvas
	var save func() error
	if ext == ".svg" {
		sc := vgsvg.New(w, h)
		c = draw.New(sc)
		save = func() error { return writeTo(path, sc) }
	} else {
		ic := vgimg.New(w, h)
		c = draw.New(ic)
		save = func() error { return writeTo(path, vgimg.PngCanvas{Canvas: ic}) }
	}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Centimeter / 2, PadTop: vg.Centimeter / 4, PadBottom: vg.Centimeter / 4}
	top.Draw(tiles.At(c, 0, 0))
	bottom.Draw(tiles.At(c, 0, 1))
	return save()
}

func (r *Result) throughputPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s, %d B: throughput", r.Label, r.Scenario, r.Size)
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "messages/s"
	p.Legend.Top = true
	var sent, recv plotter.XYs
	for _, pt := range r.Timeline {
		sent = append(sent, plotter.XY{X: pt.T, Y: float64(pt.Sent)})
		recv = append(recv, plotter.XY{X: pt.T, Y: float64(pt.Received)})
	}
	for _, s := range []struct {
		name string
		xy   plotter.XYs
		col  color.Color
	}{{"sent (acknowledged)", sent, color.RGBA{R: 31, G: 119, B: 180, A: 255}}, {"received", recv, color.RGBA{R: 214, G: 39, B: 40, A: 255}}} {
		if !hasY(s.xy) {
			continue
		}
		l, err := plotter.NewLine(s.xy)
		if err != nil {
			return nil, err
		}
		l.Color = s.col
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

func hasY(xy plotter.XYs) bool {
	for _, p := range xy {
		if p.Y != 0 {
			return true
		}
	}
	return false
}

func (r *Result) latencyPlot() (*plot.Plot, error) {
	p := plot.New()
	h, what := &r.e2eHist, "end-to-end"
	if h.Count() == 0 {
		h, what = &r.sendHist, "send→ack"
	}
	p.Title.Text = fmt.Sprintf("%s latency distribution (p50 %.2f ms, p99 %.2f ms)", what, ms(h.Quantile(0.5)), ms(h.Quantile(0.99)))
	p.X.Label.Text = "latency (ms, log scale)"
	p.Y.Label.Text = "% of messages"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	var xy plotter.XYs
	total := float64(h.Count())
	h.Buckets(func(low time.Duration, n uint64) {
		x := max(ms(low), 0.001) // log scale: no zero
		xy = append(xy, plotter.XY{X: x, Y: 100 * float64(n) / total})
	})
	if len(xy) == 0 {
		p.Title.Text = "no latency recorded"
		return p, nil
	}
	pts, err := plotter.NewScatter(xy)
	if err != nil {
		return nil, err
	}
	pts.GlyphStyle.Radius = vg.Points(1.5)
	pts.GlyphStyle.Shape = draw.CircleGlyph{}
	p.Add(pts, plotter.NewGrid())
	return p, nil
}

func writeTo(path string, w io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
