package svgplot_test

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-mcp/switchyard/bench/internal/svgplot"
)

type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Title   string   `xml:"title"`
	Groups  []group  `xml:"g"`
}

type group struct {
	Class     string     `xml:"class,attr"`
	Name      string     `xml:"data-name,attr"`
	Polylines []polyline `xml:"polyline"`
	Circles   []struct{} `xml:"circle"`
	Texts     []string   `xml:"text"`
}

type polyline struct {
	Points string `xml:"points,attr"`
}

// render writes c and checks the output is well-formed XML.
func render(t *testing.T, c *svgplot.Chart) (svgDoc, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.WriteSVG(&buf); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	dec := xml.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.Strict = true
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, buf.String())
		}
	}
	var doc svgDoc
	if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("decode svg: %v", err)
	}
	return doc, buf.String()
}

func series(doc svgDoc) map[string]group {
	m := map[string]group{}
	for _, g := range doc.Groups {
		if g.Class == "series" {
			m[g.Name] = g
		}
	}
	return m
}

func TestSVGPlotSeries(t *testing.T) {
	conns := []float64{8, 64, 256}
	c := &svgplot.Chart{
		Title: `p50 & p99 <tools/call>`,
		X:     svgplot.Axis{Label: "connections", Log: true, Ticks: conns},
		Y:     svgplot.Axis{Label: "latency", Log: true, Format: func(v float64) string { return "~" + strings.Repeat("x", int(v)%3) }},
		Series: []svgplot.Series{
			{Name: "direct p50", Points: []svgplot.Point{{8, 150}, {64, 900}, {256, 3500}}},
			{Name: "gateway p99", Dashed: true, Points: []svgplot.Point{{256, 9000}, {8, 400}, {64, 2100}}},
			{Name: `odd "name" <&>`, Points: []svgplot.Point{{8, 0}, {64, -1}, {256, 10}}}, // non-positive skipped on log y
		},
	}
	doc, raw := render(t, c)
	if doc.Title != c.Title {
		t.Errorf("title = %q, want %q", doc.Title, c.Title)
	}
	got := series(doc)
	for _, tc := range []struct {
		name   string
		points int
	}{
		{"direct p50", 3},
		{"gateway p99", 3},
		{`odd "name" <&>`, 1},
	} {
		g, ok := got[tc.name]
		if !ok {
			t.Errorf("series %q missing; have %v", tc.name, got)
			continue
		}
		if len(g.Polylines) != 1 {
			t.Errorf("series %q: %d polylines, want 1", tc.name, len(g.Polylines))
		}
		if len(g.Circles) != tc.points {
			t.Errorf("series %q: %d points, want %d", tc.name, len(g.Circles), tc.points)
		}
		if n := len(strings.Fields(g.Polylines[0].Points)); n != tc.points {
			t.Errorf("series %q: polyline has %d vertices, want %d", tc.name, n, tc.points)
		}
	}
	if len(got) != 3 {
		t.Errorf("got %d series, want 3", len(got))
	}
	if !strings.Contains(raw, `stroke-dasharray`) {
		t.Error("dashed series has no stroke-dasharray")
	}
	for _, g := range doc.Groups {
		if g.Class == "ticks" {
			for _, want := range []string{"8", "64", "256"} {
				if !slices.Contains(g.Texts, want) {
					t.Errorf("x tick %q missing from %v", want, g.Texts)
				}
			}
		}
	}
}

func TestSVGPlotLinearAndEmpty(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chart svgplot.Chart
		want  []string
	}{
		{"empty", svgplot.Chart{Title: "nothing"}, nil},
		{"empty log", svgplot.Chart{X: svgplot.Axis{Log: true}, Y: svgplot.Axis{Log: true}}, nil},
		{"linear", svgplot.Chart{Series: []svgplot.Series{{Name: "rps", Points: []svgplot.Point{{1, 10}, {2, 37}}}}}, []string{"rps"}},
		{"single point", svgplot.Chart{Series: []svgplot.Series{{Name: "one", Points: []svgplot.Point{{5, 5}}}}}, []string{"one"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, _ := render(t, &tc.chart)
			var names []string
			for n := range series(doc) {
				names = append(names, n)
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Errorf("series = %v, want %v", names, tc.want)
			}
		})
	}
}
