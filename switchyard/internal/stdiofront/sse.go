package stdiofront

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"time"
)

// sseState is what outlives one SSE response: the last event id (sent as
// Last-Event-ID when reconnecting) and the server's reconnection time.
type sseState struct {
	lastID string
	retry  time.Duration // 0: the server named none
}

// readSSE reads the event stream r until it ends, calling fn with the data
// of each event of type message (lines of multi-line data joined by "\n",
// per the SSE spec). An event whose data would exceed max bytes fails the
// stream. It returns nil when r ends (a last event without its blank line
// is dropped, as the spec says), or fn's error, which stops reading.
func readSSE(r io.Reader, max int, st *sseState, fn func(data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), max+64)
	sc.Split(splitSSELines)
	var (
		typ     []byte
		data    []byte
		hasData bool
		idBuf   = st.lastID
	)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 { // dispatch
			st.lastID = idBuf
			if hasData && (len(typ) == 0 || string(typ) == "message") {
				if err := fn(data[:len(data)-1]); err != nil {
					return err
				}
			}
			typ, data, hasData = typ[:0], nil, false
			continue
		}
		if line[0] == ':' {
			continue // comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "event":
			typ = append(typ[:0], value...)
		case "data":
			if len(data)+len(value) >= max {
				return errEventTooLarge
			}
			data = append(append(data, value...), '\n')
			hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				idBuf = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 32); err == nil {
				st.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if sc.Err() == bufio.ErrTooLong {
		return errEventTooLarge
	}
	return sc.Err()
}

// splitSSELines splits at "\r\n", "\n" or "\r", the SSE line ends.
func splitSSELines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	return 0, nil, nil // a "\r" last: is "\n" next?
}
