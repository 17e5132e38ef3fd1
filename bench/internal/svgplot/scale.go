package svgplot

import (
	"bytes"
	"encoding/xml"
	"math"
	"slices"
)

// scale maps data values on one axis to pixels: lo maps to p0, hi to p1.
type scale struct {
	lo, hi float64 // data range, in log10 units when log is set
	log    bool
	p0, p1 float64
	ticks  []float64 // data values
}

// newScale fits an axis to the data values vals and the pixel span
// [p0, p1].
func newScale(a Axis, vals []float64, p0, p1 float64) scale {
	s := scale{log: a.Log, p0: p0, p1: p1}
	vals = slices.DeleteFunc(slices.Clone(vals), func(v float64) bool { return !s.ok(v) })
	ticks := slices.DeleteFunc(slices.Clone(a.Ticks), func(v float64) bool { return !s.ok(v) })
	all := append(slices.Clone(vals), ticks...)
	switch {
	case len(all) == 0: // an empty chart: 0..1, or 1..10 on a log axis
		s.lo, s.hi = 0, 1
	case len(ticks) > 0:
		s.lo, s.hi = s.tr(slices.Min(all)), s.tr(slices.Max(all))
		s.pad()
		s.ticks = ticks
		return s
	case s.log:
		s.lo, s.hi = math.Floor(math.Log10(slices.Min(all))), math.Ceil(math.Log10(slices.Max(all)))
	default:
		s.lo, s.hi = min(0, slices.Min(all)), slices.Max(all)
	}
	if s.hi <= s.lo {
		s.hi = s.lo + 1
	}
	if s.log {
		s.ticks = logTicks(s.lo, s.hi)
	} else {
		s.ticks = s.linearTicks()
	}
	return s
}

// ok reports whether v can be placed on the axis.
func (s scale) ok(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0) && (!s.log || v > 0)
}

// tr transforms a data value into axis units.
func (s scale) tr(v float64) float64 {
	if s.log {
		return math.Log10(v)
	}
	return v
}

// at returns the pixel coordinate of data value v.
func (s scale) at(v float64) float64 {
	return s.p0 + (s.tr(v)-s.lo)/(s.hi-s.lo)*(s.p1-s.p0)
}

// pad widens the range by 8% on each side (explicit ticks sit at the data
// extremes, which would otherwise touch the frame).
func (s *scale) pad() {
	span := s.hi - s.lo
	if span == 0 {
		span = 1
	}
	s.lo -= span * 0.08
	s.hi += span * 0.08
}

// linearTicks rounds the range out to a 1-2-5 step and returns the ticks.
func (s *scale) linearTicks() []float64 {
	step := niceStep((s.hi - s.lo) / 5)
	s.lo = math.Floor(s.lo/step) * step
	s.hi = math.Ceil(s.hi/step) * step
	var t []float64
	for v := s.lo; v <= s.hi+step/2; v += step {
		t = append(t, math.Round(v/step)*step)
	}
	return t
}

// niceStep returns the smallest 1, 2 or 5 times a power of ten >= raw.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// logTicks returns the powers of ten from 10^lo to 10^hi, adding 2 and 5
// times each when the range spans three decades or fewer.
func logTicks(lo, hi float64) []float64 {
	var t []float64
	for e := lo; e <= hi; e++ {
		d := math.Pow(10, e)
		t = append(t, d)
		if hi-lo <= 3 && e < hi {
			t = append(t, 2*d, 5*d)
		}
	}
	return t
}

// esc returns s escaped for XML text and attribute values.
func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writing to a bytes.Buffer cannot fail
	return b.String()
}
