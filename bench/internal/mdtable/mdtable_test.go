package mdtable_test

import (
	"testing"

	"github.com/switchyard-mcp/switchyard/bench/internal/mdtable"
)

func TestMDTableString(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table mdtable.Table
		want  string
	}{
		{
			name: "aligned",
			table: mdtable.Table{
				Header: []string{"side", "p50 µs", "req/s"},
				Right:  []bool{false, true, true},
				Rows:   [][]string{{"direct", "143", "6993"}, {"gateway", "1204", "830"}},
			},
			want: "" +
				"| side    | p50 µs | req/s |\n" +
				"| ------- | -----: | ----: |\n" +
				"| direct  |    143 |  6993 |\n" +
				"| gateway |   1204 |   830 |\n",
		},
		{
			name: "short row, pipe escaped, narrow column",
			table: mdtable.Table{
				Header: []string{"a", "b"},
				Rows:   [][]string{{"x|y"}, {"1", "2", "dropped"}},
			},
			want: "" +
				"| a    | b   |\n" +
				"| ---- | --- |\n" +
				`| x\|y |     |` + "\n" +
				"| 1    | 2   |\n",
		},
		{
			name:  "header only",
			table: mdtable.Table{Header: []string{"only"}},
			want:  "| only |\n| ---- |\n",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.table.String(); got != tc.want {
				t.Errorf("String() =\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestMDTableAddRow(t *testing.T) {
	var tb mdtable.Table
	tb.Header = []string{"k", "v"}
	tb.AddRow("a", "1")
	if want := "| k   | v   |\n| --- | --- |\n| a   | 1   |\n"; tb.String() != want {
		t.Errorf("String() =\n%s\nwant\n%s", tb.String(), want)
	}
}
