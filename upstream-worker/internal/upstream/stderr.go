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
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
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
	}
	w.buf = w.buf[:0]
}
