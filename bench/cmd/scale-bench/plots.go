package main

import (
	"path/filepath"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/bench/internal/plotting"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// plotSet collects the plots of a run, leaving out those with nothing to
// draw.
type plotSet struct {
	dir  string
	refs map[string]plotting.Ref
	err  error
}

// add draws the series into img/file.
func (s *plotSet) add(file string, a plotting.Axes, series []plotting.Series) {
	if s.err != nil {
		return
	}
	ok, err := plotting.Lines(a, series, filepath.Join(s.dir, file))
	if err != nil {
		s.err = err
	} else if ok {
		s.refs[file] = plotting.Ref{File: file, Title: a.Title}
	}
}

// ticks returns a tick at each value, labelled with it.
func ticks(vs ...int) []plot.Tick {
	out := make([]plot.Tick, len(vs))
	for i, v := range vs {
		out[i] = plot.Tick{Value: float64(v), Label: strconv.Itoa(v)}
	}
	return out
}

// curveSeries returns a series per library of the contended points ps, x
// from the point and y from the statistics (points with errors left out).
func (r *results) curveSeries(ps []*pointStats, x func(point) float64, y func(*pointStats) float64) []plotting.Series {
	var out []plotting.Series
	for i, l := range r.Libs {
		s := plotting.Series{Name: l.Name, Color: i}
		for _, p := range ps {
			if p.Lib == l.Name && p.Err == "" {
				s.Points = append(s.Points, plotter.XY{X: x(p.Point), Y: y(p)})
			}
		}
		out = append(out, s)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// writePlots draws every curve that was run.
func writePlots(r *results, dir string) (map[string]plotting.Ref, error) {
	s := &plotSet{dir: dir, refs: map[string]plotting.Ref{}}
	procs := func(p point) float64 { return float64(p.Procs) }
	procAxes := func(title, y string, logY bool) plotting.Axes {
		return plotting.Axes{Title: title, X: "worker processes × 4 goroutines, one lock, 1 ms hold (log scale)", Y: y,
			LogX: true, XTicks: ticks(1, 2, 4, 8, 16, 32), LogY: logY, YFloor: 0.01}
	}
	s.add("scale-procs-acq.png", procAxes("Acquisitions/s against processes on one lock", "acquisitions/s", false),
		r.curveSeries(r.Procs, procs, func(p *pointStats) float64 { return p.AcqPerSec }))
	s.add("scale-procs-rt.png", procAxes("Client round trips per acquisition against processes on one lock", "round trips / acquisition", false),
		r.curveSeries(r.Procs, procs, func(p *pointStats) float64 { return p.RTPerAcq }))
	s.add("scale-procs-wait.png", procAxes("Lock wait p99 against processes on one lock", "Lock call → return, p99 (ms, log scale)", true),
		r.curveSeries(r.Procs, procs, func(p *pointStats) float64 { return ms(p.Wait.P(0.99)) }))

	names := func(p point) float64 { return float64(p.Names) }
	nameAxes := func(title, y string, logY bool) plotting.Axes {
		return plotting.Axes{Title: title, X: "distinct lock names, 64 goroutines in one process, 1 ms hold (log scale)", Y: y,
			LogX: true, XTicks: ticks(1, 10, 100, 1000, 10000), LogY: logY, YFloor: 0.01}
	}
	s.add("scale-names-acq.png", nameAxes("Acquisitions/s against the number of names", "acquisitions/s", false),
		r.curveSeries(r.Names, names, func(p *pointStats) float64 { return p.AcqPerSec }))
	s.add("scale-names-rt.png", nameAxes("Client round trips per acquisition against the number of names", "round trips / acquisition", false),
		r.curveSeries(r.Names, names, func(p *pointStats) float64 { return p.RTPerAcq }))

	holdAxes := func(title, y string) plotting.Axes {
		return plotting.Axes{Title: title, X: "holds of one client (log scale)", Y: y, LogX: true, LogY: true,
			XTicks: ticks(1, 10, 100, 1000, 10000, 100000), YFloor: 0.001}
	}
	s.add("scale-renewals-rt.png", holdAxes("Renewal round trips per round against holds", "client round trips / round (log scale)"),
		r.renewSeries(func(rs *renewStats) float64 { return rs.RoundTrips }, nil))
	s.add("scale-renewals-time.png", holdAxes("Renewal time per round against holds (solid: server script time, dashed: client CPU)", "ms / round (log scale)"),
		r.renewSeries(func(rs *renewStats) float64 { return ms(rs.ScriptTime) }, func(rs *renewStats) float64 { return ms(rs.ClientCPU) }))
	if s.err != nil {
		return nil, s.err
	}
	if err := r.memoryPlot(s); err != nil {
		return nil, err
	}
	return s.refs, nil
}

// renewSeries returns a series per library of the renewal curve with y,
// and, unless dashed is nil, a dashed one with dashed (the names then say
// which is which: server, client).
func (r *results) renewSeries(y, dashed func(*renewStats) float64) []plotting.Series {
	type measure struct {
		f      func(*renewStats) float64
		suffix string
		dashed bool
	}
	ms := []measure{{y, "", false}}
	if dashed != nil {
		ms = []measure{{y, " server", false}, {dashed, " client", true}}
	}
	var out []plotting.Series
	for i, l := range r.Libs {
		for _, m := range ms {
			s := plotting.Series{Name: l.Name + m.suffix, Color: i, Dashed: m.dashed}
			for _, rs := range r.Renewals {
				if rs.Lib == l.Name && rs.Err == "" {
					s.Points = append(s.Points, plotter.XY{X: float64(rs.Holds), Y: m.f(rs)})
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// memoryPlot draws the bytes (heap and stack) per hold and per waiting
// Lock call of each library.
func (r *results) memoryPlot(s *plotSet) error {
	if len(r.MemHolds) == 0 {
		return nil
	}
	var labels []string
	hold, wait := plotting.BarSet{Name: "per hold"}, plotting.BarSet{Name: "per waiting Lock call"}
	for i, h := range r.MemHolds {
		labels = append(labels, h.Lib)
		hold.Values = append(hold.Values, max(0, h.Heap+h.Stack))
		v := 0.0
		if i < len(r.MemWait) {
			v = max(0, r.MemWait[i].Heap+r.MemWait[i].Stack)
		}
		wait.Values = append(wait.Values, v)
	}
	const file = "scale-memory.png"
	a := plotting.Axes{Title: "Client memory per hold and per waiting Lock call (live heap + goroutine stacks)", Y: "bytes"}
	if err := plotting.Bars(a, labels, []plotting.BarSet{hold, wait}, filepath.Join(s.dir, file)); err != nil {
		return err
	}
	s.refs[file] = plotting.Ref{File: file, Title: a.Title}
	return nil
}
