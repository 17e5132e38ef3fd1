// Package mdtable renders GitHub-flavoured Markdown tables with padded,
// aligned columns, so that the files the bench driver writes read well both
// rendered and as plain text.
package mdtable

import (
	"strings"
	"unicode/utf8"
)

// Table is a Markdown table. Rows shorter than Header are padded with
// empty cells; longer rows are truncated to the header's width.
type Table struct {
	// Header holds the column titles.
	Header []string
	// Right marks the columns to right-align (numbers); a missing entry
	// means left-aligned.
	Right []bool
	// Rows holds the cells, row by row.
	Rows [][]string
}

// AddRow appends one row of cells.
func (t *Table) AddRow(cells ...string) { t.Rows = append(t.Rows, cells) }

// String renders the table, one line per row, each ending in a newline.
// A "|" inside a cell is escaped as "\|".
func (t *Table) String() string {
	rows := make([][]string, 0, len(t.Rows)+1)
	rows = append(rows, t.cells(t.Header))
	for _, r := range t.Rows {
		rows = append(rows, t.cells(r))
	}
	widths := make([]int, len(t.Header))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], utf8.RuneCountInString(c), 3)
		}
	}
	var b strings.Builder
	t.line(&b, rows[0], widths)
	t.rule(&b, widths)
	for _, r := range rows[1:] {
		t.line(&b, r, widths)
	}
	return b.String()
}

// cells returns r escaped and fitted to the header's width.
func (t *Table) cells(r []string) []string {
	out := make([]string, len(t.Header))
	for i := range out {
		if i < len(r) {
			out[i] = strings.ReplaceAll(r[i], "|", `\|`)
		}
	}
	return out
}

func (t *Table) right(i int) bool { return i < len(t.Right) && t.Right[i] }

func (t *Table) line(b *strings.Builder, r []string, widths []int) {
	b.WriteString("|")
	for i, c := range r {
		pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
		b.WriteString(" ")
		if t.right(i) {
			b.WriteString(pad + c)
		} else {
			b.WriteString(c + pad)
		}
		b.WriteString(" |")
	}
	b.WriteString("\n")
}

func (t *Table) rule(b *strings.Builder, widths []int) {
	b.WriteString("|")
	for i, w := range widths {
		if t.right(i) {
			b.WriteString(" " + strings.Repeat("-", w-1) + ": |")
		} else {
			b.WriteString(" " + strings.Repeat("-", w) + " |")
		}
	}
	b.WriteString("\n")
}
