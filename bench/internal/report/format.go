package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration renders d with a unit that suits it: µs below 1 ms, ms with two
// decimals below 10 ms and one below 1 s, s above; "0" for zero and a
// leading "−" for a negative d.
func Duration(d time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case d < 0:
		return "−" + Duration(-d)
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + " µs"
	case d < 10*time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 2, 64) + " ms"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(float64(d)/1e9, 'f', 2, 64) + " s"
	}
}

// Ratio renders a ratio with two decimals, or two significant digits when
// it is below 0.1.
func Ratio(v float64) string {
	if v < 0.1 {
		return fmt.Sprintf("%.2g", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// DurationRatio renders a ÷ b as Ratio does, or "—" unless both are
// positive.
func DurationRatio(a, b time.Duration) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return Ratio(float64(a) / float64(b))
}

// Percent renders n ÷ d as a whole percentage, or "—" when d is 0.
func Percent(n, d int) string {
	if d == 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f %%", 100*float64(n)/float64(d))
}

// Spread renders a stats.SpreadRatio: two decimals, ∞, or — when there was
// none.
func Spread(v float64, ok bool) string {
	switch {
	case !ok:
		return "—"
	case math.IsInf(v, 1):
		return "∞"
	}
	return fmt.Sprintf("%.2f", v)
}

// Cell makes s safe in a markdown table cell ("|" becomes "/").
func Cell(s string) string { return strings.ReplaceAll(s, "|", "/") }
