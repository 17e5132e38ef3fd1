package capture

import (
	"bufio"
	"bytes"
	"io"
)

// sseFilter passes a text/event-stream body through, event by event. Events
// are separated by blank lines; an event's `data:` lines are joined with
// "\n" (one leading space after the colon is dropped, as the SSE spec says).
// When the data of a "message" event (no `event:` field, or
// `event: message`) is the response to a recorded call, its result is
// captured and, if the slot has a stub, the event is re-emitted with its
// other lines (id:, event:, retry:, comments) unchanged and in order,
// followed by one data line carrying the stub response. Every other event
// passes through byte for byte.
//
// An event that starts while no call is pending cannot be a captured
// response (a call is recorded before it is sent), so it is streamed
// through as it arrives, without buffering. Any other event is buffered up
// to max bytes ([ErrTooLarge] beyond).
//
// Reads are not concurrent (like any body); Close may be called
// concurrently with Read to unblock it.
type sseFilter struct {
	body io.ReadCloser
	r    *bufio.Reader
	tab  *Table
	max  int

	out []byte // bytes ready for Read
	off int
	err error // sticky: returned once out is drained

	midLine     bool   // the previous chunk did not end its line
	line        []byte // the line being assembled (buffered events)
	inEvent     bool
	passthrough bool         // the current event streams through
	raw         bytes.Buffer // every line of the event, as read
	other       bytes.Buffer // its non-data lines, as read
	data        bytes.Buffer // its joined data values
	hasData     bool
	name        []byte // its event: field
}

func newSSEFilter(body io.ReadCloser, tab *Table, max int) *sseFilter {
	// Lines longer than the buffer are taken in pieces (ReadSlice's
	// ErrBufferFull), so the buffer only sets the read size: a small one
	// keeps the per-response allocation (and its clearing) cheap.
	return &sseFilter{body: body, r: bufio.NewReaderSize(body, sseReadBuffer), tab: tab, max: max}
}

// sseReadBuffer is the read size of one SSE response body.
const sseReadBuffer = 8 << 10

func (f *sseFilter) Close() error { return f.body.Close() }

func (f *sseFilter) Read(p []byte) (int, error) {
	for f.off == len(f.out) {
		if f.err != nil {
			return 0, f.err
		}
		f.out, f.off = f.out[:0], 0
		f.fill()
	}
	n := copy(p, f.out[f.off:])
	f.off += n
	return n, nil
}

// fill reads until there is output or the body ends.
func (f *sseFilter) fill() {
	for len(f.out) == 0 && f.err == nil {
		chunk, err := f.r.ReadSlice('\n')
		complete := err != bufio.ErrBufferFull
		if !complete {
			err = nil
		}
		f.take(chunk, complete)
		if err != nil { // a last line without "\n" was completed by take
			f.endEvent()
			if f.err == nil {
				f.err = err
			}
		}
	}
}

// take handles one piece of a line; complete says whether it ends it.
func (f *sseFilter) take(chunk []byte, complete bool) {
	if len(chunk) == 0 {
		return
	}
	blank := complete && !f.midLine && len(bytes.TrimRight(chunk, "\r\n")) == 0
	if !f.inEvent && !blank {
		f.inEvent, f.passthrough = true, f.tab.empty()
	}
	if !f.inEvent || f.passthrough {
		f.out = append(f.out, chunk...)
		f.midLine = !complete
		if blank {
			f.endEvent()
		}
		return
	}
	f.line = append(f.line, chunk...)
	if len(f.line)+f.raw.Len() > f.max {
		f.err = ErrTooLarge
		return
	}
	f.midLine = !complete
	if complete {
		f.addLine(f.line)
		f.line = f.line[:0]
	}
}

// addLine adds one complete line of a buffered event.
func (f *sseFilter) addLine(line []byte) {
	f.raw.Write(line)
	content := bytes.TrimRight(line, "\r\n")
	if len(content) == 0 { // the blank line that ends the event
		f.other.Write(line)
		f.endEvent()
		return
	}
	field, value, _ := bytes.Cut(content, []byte{':'})
	value = bytes.TrimPrefix(value, []byte{' '})
	switch {
	case bytes.Equal(field, []byte("data")):
		if f.hasData {
			f.data.WriteByte('\n')
		}
		f.data.Write(value)
		f.hasData = true
	case bytes.Equal(field, []byte("event")):
		f.name = append(f.name[:0], value...)
		f.other.Write(line)
	default:
		f.other.Write(line)
	}
}

// endEvent emits a buffered event (rewritten if it is a captured response)
// and resets the event state.
func (f *sseFilter) endEvent() {
	if f.inEvent && !f.passthrough {
		f.out = append(f.out, f.emit()...)
	}
	f.inEvent, f.passthrough, f.hasData, f.midLine = false, false, false, false
	f.raw.Reset()
	f.other.Reset()
	f.data.Reset()
	f.name = f.name[:0]
	f.line = f.line[:0]
}

func (f *sseFilter) emit() []byte {
	isMessage := len(f.name) == 0 || bytes.Equal(f.name, []byte("message"))
	if !f.hasData || !isMessage {
		return f.raw.Bytes()
	}
	out, changed := f.tab.rewrite(f.data.Bytes())
	if !changed {
		return f.raw.Bytes()
	}
	// The other lines in order, then one data line, then the blank line
	// that ended the event (the last line of "other", if it came).
	other := f.other.Bytes()
	term := trailingBlank(other)
	ev := make([]byte, 0, len(other)+len(out)+8)
	ev = append(ev, other[:len(other)-len(term)]...)
	ev = append(ev, "data: "...)
	ev = append(ev, out...)
	ev = append(ev, '\n')
	return append(ev, term...)
}

// trailingBlank returns b's last line ("\n" or "\r\n") if it is blank.
func trailingBlank(b []byte) []byte {
	if !bytes.HasSuffix(b, []byte("\n")) {
		return nil
	}
	n := 1
	if bytes.HasSuffix(b, []byte("\r\n")) {
		n = 2
	}
	rest := b[:len(b)-n]
	if len(rest) == 0 || rest[len(rest)-1] == '\n' {
		return b[len(b)-n:]
	}
	return nil
}
