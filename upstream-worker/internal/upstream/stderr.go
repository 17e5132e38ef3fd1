package upstream

import (
	"bytes"
	"log/slog"
	"sync"
)

// maxStderrLine bounds one logged stderr line of a stdio upstream.
const maxStderrLine = 4 << 10

// lineLog logs a stdio upstream's stderr at Debug, one record per line
// (lines cut at maxStderrLine). exec copies into it from one goroutine;
// the mutex only guards against misuse.
type lineLog struct {
	log  *slog.Logger
	mu   sync.Mutex
	buf  []byte
	tail []string // guarded by mu: the last stderrTail lines, for a crash's cause (limitHit)
}

// stderrTail is how many of a process's last stderr lines are kept.
const stderrTail = 8

// lastLines returns the kept last lines, and the line in progress.
func (w *lineLog) lastLines() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]string(nil), w.tail...)
	if len(w.buf) > 0 {
		out = append(out, string(w.buf))
	}
	return out
}

func (w *lineLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := maxStderrLine - len(w.buf)
			w.buf = append(w.buf, p[:min(room, len(p))]...)
			if len(w.buf) >= maxStderrLine {
				w.flush()
			}
			return n, nil
		}
		w.buf = append(w.buf, p[:min(i, maxStderrLine-len(w.buf))]...)
		w.flush()
		p = p[i+1:]
	}
	return n, nil
}

func (w *lineLog) flush() {
	if len(w.buf) > 0 {
		w.log.Debug("upstream stderr", "line", string(w.buf))
		if len(w.tail) == stderrTail {
			w.tail = append(w.tail[:0], w.tail[1:]...)
		}
		w.tail = append(w.tail, string(w.buf[:min(len(w.buf), 512)]))
	}
	w.buf = w.buf[:0]
}
