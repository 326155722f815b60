package main

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/plotting"
	"github.com/holdfast-go/holdfast/bench/internal/stats"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// minPlotMS is the floor of log-scale plots (values below are drawn there).
const minPlotMS = 0.01

func writePlots(r *results, dir string) ([]plotting.Ref, error) {
	var refs []plotting.Ref
	for _, c := range []contendedCase{{4, 4, time.Millisecond}, {1, 32, time.Millisecond}, {4, 8, time.Millisecond}, {4, 4, 0}} {
		file := fmt.Sprintf("wait-cdf-%dx%d-%dms.png", c.Procs, c.Goroutines, c.CS.Milliseconds())
		title := fmt.Sprintf("Waiter wait distribution, %d × %d goroutines, %d ms critical section", c.Procs, c.Goroutines, c.CS.Milliseconds())
		ok, err := waitCDF(r, c, title, filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		if ok {
			refs = append(refs, plotting.Ref{File: file, Title: title})
		}
	}
	for _, m := range []struct {
		file, title string
		dist        func(*runStats) stats.Dist
	}{
		{"handoff", "Hand-off latency", func(rs *runStats) stats.Dist { return rs.Handoff }},
		{"release-to-waiter", "Release → waiter latency", func(rs *runStats) stats.Dist { return rs.ReleaseToWaiter }},
	} {
		for _, cs := range []time.Duration{time.Millisecond, 0} {
			file := fmt.Sprintf("%s-vs-goroutines-%dms.png", m.file, cs.Milliseconds())
			title := fmt.Sprintf("%s vs goroutines, %d ms critical section", m.title, cs.Milliseconds())
			ok, err := latencyPlot(r, cs, m.dist, title, filepath.Join(dir, file))
			if err != nil {
				return nil, err
			}
			if ok {
				refs = append(refs, plotting.Ref{File: file, Title: title})
			}
		}
	}
	return refs, nil
}

func waitCDF(r *results, c contendedCase, title, file string) (bool, error) {
	p := plotting.New(plotting.Axes{Title: title, X: "waiter wait (ms, log scale; ≤ 0.01 ms drawn at 0.01)",
		Y: "fraction of waiting Lock calls ≤ x", LogX: true})
	p.Y.Max = 1
	drawn := false
	for i, l := range r.Libs {
		rs := r.run(l.Name, c)
		if rs == nil || rs.Wait.N() == 0 {
			continue
		}
		n := rs.Wait.N()
		step := max(1, n/600)
		var pts plotter.XYs
		for j := 0; j < n; j += step {
			x := max(minPlotMS, ms(time.Duration(rs.Wait[j])))
			pts = append(pts, plotter.XY{X: x, Y: float64(j) / float64(n)}, plotter.XY{X: x, Y: float64(min(j+step, n)) / float64(n)})
		}
		pts = append(pts, plotter.XY{X: max(minPlotMS, ms(rs.Wait.Max())), Y: 1})
		line, err := plotter.NewLine(pts)
		if err != nil {
			return false, err
		}
		plotting.Style(line, nil, i, false)
		p.Add(line)
		p.Legend.Add(l.Name, line)
		drawn = true
	}
	if !drawn {
		return false, nil
	}
	return true, plotting.Save(p, file)
}

func latencyPlot(r *results, cs time.Duration, dist func(*runStats) stats.Dist, title, file string) (bool, error) {
	p := plotting.New(plotting.Axes{Title: title, X: "goroutines (log scale; 4×4 = 4 processes × 4 goroutines, the others in one process)",
		Y: "latency (ms, log scale; ≤ 0.01 ms drawn at 0.01)", LogX: true, LogY: true,
		XTicks: []plot.Tick{{Value: 2, Label: "1×2"}, {Value: 8, Label: "1×8"}, {Value: 16, Label: "4×4"}, {Value: 32, Label: "1×32"}}})
	drawn := false
	cases := []contendedCase{{1, 2, cs}, {1, 8, cs}, {4, 4, cs}, {1, 32, cs}}
	for i, l := range r.Libs {
		for _, q := range []float64{0.5, 0.99} {
			var pts plotter.XYs
			for _, c := range cases {
				rs := r.run(l.Name, c)
				if rs == nil || dist(rs).N() == 0 {
					continue
				}
				pts = append(pts, plotter.XY{X: float64(c.Total()), Y: max(minPlotMS, ms(dist(rs).P(q)))})
			}
			if len(pts) == 0 {
				continue
			}
			line, scatter, err := plotter.NewLinePoints(pts)
			if err != nil {
				return false, err
			}
			plotting.Style(line, scatter, i, q > 0.5)
			p.Add(line, scatter)
			p.Legend.Add(fmt.Sprintf("%s p%.0f", l.Name, q*100), line)
			drawn = true
		}
	}
	if !drawn {
		return false, nil
	}
	return true, plotting.Save(p, file)
}
