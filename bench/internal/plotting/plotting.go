// Package plotting draws the benchmark commands' line plots in the house
// style of holdfast-bench's: a grid, one colour per series (dashed for a
// second measure of the same series), the legend to the right of the plot
// area, 10 × 5.5 inch PNGs.
package plotting

import (
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Series is one line of a plot.
type Series struct {
	// Name is its legend entry.
	Name string
	// Color indexes plotutil's palette: series of one library share it.
	Color int
	// Dashed draws the line dashed (a library's second measure).
	Dashed bool
	// Points are the (x, y) values; points with y ≤ 0 are left out on a
	// log-scale y axis.
	Points plotter.XYs
}

// Axes describes a plot's axes.
type Axes struct {
	Title, X, Y  string
	LogX, LogY   bool
	XTicks       []plot.Tick // explicit x ticks; LogTicks when empty on a log axis
	YMin, YFloor float64     // YMin: the y axis starts here unless LogY; YFloor: log-scale floor
}

// Ref is a written plot: its file under img/ and its title.
type Ref struct{ File, Title string }

// New returns a plot with axes a: title, labels, grid, scales and ticks.
func New(a Axes) *plot.Plot {
	p := plot.New()
	p.Title.Text = a.Title
	p.X.Label.Text = a.X
	p.Y.Label.Text = a.Y
	p.Add(plotter.NewGrid())
	if a.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if len(a.XTicks) > 0 {
		p.X.Tick.Marker = plot.ConstantTicks(a.XTicks)
	}
	if a.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	} else {
		p.Y.Min = a.YMin
	}
	return p
}

// Style draws line, and scatter's circles unless it is nil, in colour i of
// plotutil's palette; dashed draws the line dashed.
func Style(line *plotter.Line, scatter *plotter.Scatter, i int, dashed bool) {
	line.Color = plotutil.Color(i)
	line.Width = vg.Points(1.6)
	if dashed {
		line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	if scatter != nil {
		scatter.Color = plotutil.Color(i)
		scatter.Shape = draw.CircleGlyph{}
	}
}

// Lines draws the series as lines with a circle at each point and writes
// the PNG to file. It reports false, writing nothing, when no series has a
// point.
func Lines(a Axes, series []Series, file string) (bool, error) {
	p := New(a)
	drawn := false
	for _, s := range series {
		pts := visible(s.Points, a)
		if len(pts) == 0 {
			continue
		}
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			return false, err
		}
		Style(line, scatter, s.Color, s.Dashed)
		p.Add(line, scatter)
		p.Legend.Add(s.Name, line)
		drawn = true
	}
	if !drawn {
		return false, nil
	}
	if a.LogY {
		// gonum widens an axis whose values are all equal by 1 either
		// way, to 0 for a value of 1: a log axis cannot start there.
		lo, hi := yRange(series, a)
		p.Y.Min, p.Y.Max = lo/1.5, hi*1.5
	}
	return true, Save(p, file)
}

// yRange returns the smallest and largest y that the series draw on axes a.
func yRange(series []Series, a Axes) (lo, hi float64) {
	first := true
	for _, s := range series {
		for _, pt := range visible(s.Points, a) {
			if first || pt.Y < lo {
				lo = pt.Y
			}
			if first || pt.Y > hi {
				hi = pt.Y
			}
			first = false
		}
	}
	return lo, hi
}

// visible returns the points a plot with axes a can draw: on a log axis,
// x > 0, and y raised to the floor (points with y ≤ 0 left out).
func visible(pts plotter.XYs, a Axes) plotter.XYs {
	var out plotter.XYs
	for _, pt := range pts {
		if a.LogX && pt.X <= 0 {
			continue
		}
		if a.LogY {
			if pt.Y <= 0 {
				continue
			}
			pt.Y = max(pt.Y, a.YFloor)
		}
		out = append(out, pt)
	}
	return out
}

// Save writes p as a PNG with its legend to the right of the plot area.
func Save(p *plot.Plot, file string) error {
	const w, h, legendW = 10 * vg.Inch, 5.5 * vg.Inch, 2.4 * vg.Inch
	img := vgimg.New(w, h)
	dc := draw.New(img)
	leg := p.Legend
	p.Legend = plot.NewLegend() // empty: not drawn inside the plot
	p.Draw(draw.Crop(dc, 0, -legendW, 0, 0))
	leg.Top, leg.Left = true, true
	leg.YOffs = -vg.Points(30)
	leg.Draw(draw.Crop(dc, w-legendW+vg.Points(8), 0, 0, 0))
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
