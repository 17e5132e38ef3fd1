// Package svgplot writes simple line charts as hand-written, standalone SVG:
// a few series of (x, y) points over linear or log10 axes, with grid,
// ticks, axis labels and a legend. It has no dependencies beyond the
// standard library, so plots render in any browser and diff as text.
//
// Each series is written as <g class="series" data-name="NAME"> holding one
// <polyline> and one <circle> per point, so tools (and tests) can find the
// series in the document.
package svgplot

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// Point is one data point.
type Point struct{ X, Y float64 }

// Series is one named line.
type Series struct {
	// Name labels the line in the legend and in its data-name attribute.
	Name string
	// Points are drawn in ascending X order; on a log axis, points with a
	// non-positive coordinate are skipped.
	Points []Point
	// Color is any SVG colour; empty picks one from a fixed palette by the
	// series' index.
	Color string
	// Dashed draws the line dashed.
	Dashed bool
}

// Axis describes one axis.
type Axis struct {
	// Label is written along the axis.
	Label string
	// Log selects a log10 scale.
	Log bool
	// Ticks are explicit tick positions (for example the measured
	// connection counts); nil picks them automatically.
	Ticks []float64
	// Format renders tick labels; nil uses the shortest decimal form.
	Format func(float64) string
}

// Chart is a line chart.
type Chart struct {
	// Title is drawn above the plot and stored in the document's <title>.
	Title  string
	X, Y   Axis
	Series []Series
	// Width and Height are the picture's size in pixels; zero means 760
	// by 440.
	Width, Height int
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

const (
	marginLeft   = 78
	marginRight  = 190
	marginTop    = 40
	marginBottom = 56
)

// WriteSVG writes the chart as a standalone SVG document to w.
func (c *Chart) WriteSVG(w io.Writer) error {
	width, height := cmp.Or(c.Width, 760), cmp.Or(c.Height, 440)
	ew := &errWriter{w: bufio.NewWriter(w)}
	xs := newScale(c.X, c.values(true), marginLeft, float64(width-marginRight))
	ys := newScale(c.Y, c.values(false), float64(height-marginBottom), marginTop)

	ew.printf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	ew.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	ew.printf("<title>%s</title>\n", esc(c.Title))
	ew.printf(`<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", width, height)
	ew.printf(`<text class="title" x="%d" y="24" text-anchor="middle" font-size="15">%s</text>`+"\n",
		(marginLeft+width-marginRight)/2, esc(c.Title))
	c.writeAxes(ew, xs, ys)
	for i, s := range c.Series {
		writeSeries(ew, s, seriesColor(s, i), xs, ys)
	}
	c.writeLegend(ew, width)
	ew.printf("</svg>\n")
	return ew.flush()
}

// values returns every finite X (or Y) coordinate of the chart's points.
func (c *Chart) values(x bool) []float64 {
	var v []float64
	for _, s := range c.Series {
		for _, p := range s.Points {
			f := p.Y
			if x {
				f = p.X
			}
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				v = append(v, f)
			}
		}
	}
	return v
}

func (c *Chart) writeAxes(ew *errWriter, xs, ys scale) {
	ew.printf(`<g class="grid" stroke="#e6e6e6" stroke-width="1">` + "\n")
	for _, t := range xs.ticks {
		ew.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", xs.at(t), ys.p0, xs.at(t), ys.p1)
	}
	for _, t := range ys.ticks {
		ew.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", xs.p0, ys.at(t), xs.p1, ys.at(t))
	}
	ew.printf("</g>\n")
	ew.printf(`<g class="axes" stroke="#333" stroke-width="1">`+"\n"+
		`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n"+
		`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n</g>\n",
		xs.p0, ys.p0, xs.p1, ys.p0, xs.p0, ys.p0, xs.p0, ys.p1)
	ew.printf(`<g class="ticks" fill="#333">` + "\n")
	for _, t := range xs.ticks {
		ew.printf(`<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", xs.at(t), ys.p0+16, esc(label(c.X, t)))
	}
	for _, t := range ys.ticks {
		ew.printf(`<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", xs.p0-6, ys.at(t)+4, esc(label(c.Y, t)))
	}
	ew.printf("</g>\n")
	ew.printf(`<text class="xlabel" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
		(xs.p0+xs.p1)/2, ys.p0+40, esc(c.X.Label))
	ew.printf(`<text class="ylabel" x="%.1f" y="%.1f" text-anchor="middle" transform="rotate(-90 %.1f %.1f)">%s</text>`+"\n",
		xs.p0-58, (ys.p0+ys.p1)/2, xs.p0-58, (ys.p0+ys.p1)/2, esc(c.Y.Label))
}

func writeSeries(ew *errWriter, s Series, color string, xs, ys scale) {
	pts := slices.Clone(s.Points)
	pts = slices.DeleteFunc(pts, func(p Point) bool { return !xs.ok(p.X) || !ys.ok(p.Y) })
	slices.SortStableFunc(pts, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
	ew.printf(`<g class="series" data-name="%s" stroke="%s" fill="%s">`+"\n", esc(s.Name), esc(color), esc(color))
	dash := ""
	if s.Dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	ew.printf(`<polyline fill="none" stroke-width="2"%s points="`, dash)
	for i, p := range pts {
		if i > 0 {
			ew.printf(" ")
		}
		ew.printf("%.1f,%.1f", xs.at(p.X), ys.at(p.Y))
	}
	ew.printf(`"/>` + "\n")
	for _, p := range pts {
		ew.printf(`<circle cx="%.1f" cy="%.1f" r="3"><title>%s: %s, %s</title></circle>`+"\n",
			xs.at(p.X), ys.at(p.Y), esc(s.Name), num(p.X), num(p.Y))
	}
	ew.printf("</g>\n")
}

func (c *Chart) writeLegend(ew *errWriter, width int) {
	x := float64(width - marginRight + 16)
	ew.printf(`<g class="legend">` + "\n")
	for i, s := range c.Series {
		y := float64(marginTop + 8 + 20*i)
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		ew.printf(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n",
			x, y, x+28, y, esc(seriesColor(s, i)), dash)
		ew.printf(`<text x="%.1f" y="%.1f">%s</text>`+"\n", x+34, y+4, esc(s.Name))
	}
	ew.printf("</g>\n")
}

func seriesColor(s Series, i int) string {
	if s.Color != "" {
		return s.Color
	}
	return palette[i%len(palette)]
}

func label(a Axis, v float64) string {
	if a.Format != nil {
		return a.Format(v)
	}
	return num(v)
}

func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// errWriter keeps the first write error so that the writing code can stay
// linear.
type errWriter struct {
	w   *bufio.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (e *errWriter) flush() error {
	if e.err != nil {
		return e.err
	}
	return e.w.Flush()
}
