package plotting

import (
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// BarSet is one bar per group, in one colour.
type BarSet struct {
	// Name is its legend entry.
	Name string
	// Values holds one value per group, in the groups' order.
	Values []float64
}

// Bars draws grouped bars: one group per label along x, one bar per set in
// each group, and writes the PNG to file.
func Bars(a Axes, labels []string, sets []BarSet, file string) error {
	p := plot.New()
	p.Title.Text = a.Title
	p.X.Label.Text = a.X
	p.Y.Label.Text = a.Y
	p.Add(plotter.NewGrid())
	p.Y.Min = a.YMin
	w := vg.Points(float64(40) / float64(max(1, len(sets))) * 2)
	for i, s := range sets {
		b, err := plotter.NewBarChart(plotter.Values(s.Values), w)
		if err != nil {
			return err
		}
		b.Color = plotutil.Color(i)
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(sets)-1)/2)
		p.Add(b)
		p.Legend.Add(s.Name, b)
	}
	p.NominalX(labels...)
	return Save(p, filepath.Clean(file))
}
