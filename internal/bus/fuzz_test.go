package bus

import (
	"strconv"
	"testing"
)

var chunkSeeds = []string{
	"0/1", "1/2", "2/3", "0/3", "7/8",
	"", "/", "0/", "/1", "0/0", "1/1", "-1/2", "2/2", "0/-1", "0/1/2",
	"+1/2", " 1/2", "1 /2", "0x1/2", "a/b",
	"0/9223372036854775807", "9223372036854775806/9223372036854775807",
	"9223372036854775808/1", "0/99999999999999999999",
}

func FuzzParseChunk(f *testing.F) {
	for _, s := range chunkSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		idx, n, ok := parseChunk(h)
		if !ok {
			if idx != 0 || n != 0 {
				t.Fatalf("parseChunk(%q) rejected but returned %d/%d", h, idx, n)
			}
			return
		}
		if idx < 0 || idx >= n {
			t.Fatalf("parseChunk(%q) = %d/%d: want 0 <= idx < n", h, idx, n)
		}
		// What the sender would write for these values parses back the same.
		canon := strconv.Itoa(idx) + "/" + strconv.Itoa(n)
		if i2, n2, ok2 := parseChunk(canon); !ok2 || i2 != idx || n2 != n {
			t.Fatalf("parseChunk(%q) = %d/%d, but its canonical form %q gives %d/%d ok=%t", h, idx, n, canon, i2, n2, ok2)
		}
	})
}

// FuzzCallChunk feeds two chunk messages with arbitrary headers and sizes
// to a call: it must never panic, never hold more than maxResult bytes and
// never complete with more.
func FuzzCallChunk(f *testing.F) {
	for _, h := range chunkSeeds {
		f.Add(h, uint16(3), "1/2", uint16(5))
	}
	f.Add("0/2", uint16(600), "1/2", uint16(600))
	f.Add("0/3074457345618258603", uint16(3), "1/3074457345618258603", uint16(3))
	f.Fuzz(func(t *testing.T, h1 string, n1 uint16, h2 string, n2 uint16) {
		const maxResult = 1 << 10
		c := &Caller{maxResult: maxResult, pending: map[uint64]*Call{}}
		k := &Call{c: c, done: make(chan struct{})}
		k.chunk(h1, make([]byte, n1))
		k.chunk(h2, make([]byte, n2))
		k.mu.Lock()
		defer k.mu.Unlock()
		if len(k.data) > maxResult || cap(k.data) > maxResult {
			t.Fatalf("call holds len %d cap %d, over maxResult %d", len(k.data), cap(k.data), maxResult)
		}
	})
}
