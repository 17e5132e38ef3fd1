package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestBuffer: concurrent writes all land, whole, while String reads (run
// with -race).
func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("ab\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := b.String(); strings.Count(got, "ab\n") != 800 || len(got) != 2400 {
		t.Fatalf("%d bytes, %d lines", len(got), strings.Count(got, "ab\n"))
	}
}
