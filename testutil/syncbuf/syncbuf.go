// Package syncbuf is a bytes.Buffer that goroutines may write while a test
// reads it: a log sink for services under test.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent use. The zero value is empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns a copy of everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
