package edge

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
)

// The go-sdk decodes a JSON-RPC id into float64 and then int64, so an
// integer id beyond ±2^53 (or a fractional one) comes back changed in the
// SDK's response. JSON-RPC asks the server to echo the id exactly. Requests
// that go to the SDK with such an id get a string alias instead, and the
// alias is turned back into the client's id in everything the SDK writes
// for that request. The fast path writes ids itself and needs none of this.

// aliasIDs numbers id aliases, edge-wide.
var aliasIDs atomic.Uint64

// exactInSDK reports whether the SDK echoes id (a raw JSON id) unchanged:
// strings, and integers that float64 holds exactly. Ids that are not
// numbers at all (objects, arrays, booleans) are reported true too: they
// are the SDK's to refuse, and an alias would hide them.
func exactInSDK(id []byte) bool {
	if len(id) == 0 || id[0] != '-' && (id[0] < '0' || id[0] > '9') {
		return true
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil && n >= -(1<<53) && n <= 1<<53 && strconv.FormatInt(n, 10) == string(id)
}

// aliases remembers, per client session, the aliased ids of requests the
// SDK is serving, so a notifications/cancelled naming one is rewritten too.
type aliases struct {
	mu sync.Mutex
	m  map[string]string // guarded by mu: the raw id -> its alias
}

func (a *aliases) put(raw, alias string) {
	a.mu.Lock()
	if a.m == nil {
		a.m = map[string]string{}
	}
	a.m[raw] = alias
	a.mu.Unlock()
}

func (a *aliases) drop(raw string) {
	a.mu.Lock()
	delete(a.m, raw)
	a.mu.Unlock()
}

func (a *aliases) get(raw string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	alias, ok := a.m[raw]
	return alias, ok
}

// replaceValue returns body with the value v (a subslice of body) replaced
// by with.
func replaceValue(body, v []byte, with string) []byte {
	off := cap(body) - cap(v)
	out := make([]byte, 0, len(body)-len(v)+len(with))
	out = append(out, body[:off]...)
	out = append(out, with...)
	return append(out, body[off+len(v):]...)
}

// aliasForSDK prepares a request bound for the SDK: an id the SDK would
// change is replaced by an alias in r's body, and the returned writer
// turns the alias back into the id; a notifications/cancelled naming an
// aliased request is rewritten to name its alias. done must be called when
// the SDK has answered. For anything else w is returned unchanged.
func (s *Service) aliasForSDK(w http.ResponseWriter, r *http.Request, m *probeMsg) (http.ResponseWriter, func()) {
	if m == nil {
		return w, func() {}
	}
	cs := s.sessions.get(r.Header.Get("Mcp-Session-Id"))
	if m.Method == "notifications/cancelled" && cs != nil {
		if req := m.params().RequestID; len(req) > 0 && !exactInSDK(req) {
			if alias, ok := cs.aliased.get(string(req)); ok {
				setBody(r, replaceValue(readBody(r), req, alias))
			}
		}
		return w, func() {}
	}
	if m.Method == "" || exactInSDK(m.ID) {
		return w, func() {}
	}
	alias := `"sy-id-` + strconv.FormatUint(aliasIDs.Add(1), 10) + `"`
	setBody(r, replaceValue(readBody(r), m.ID, alias))
	raw := string(m.ID)
	if cs != nil {
		cs.aliased.put(raw, alias)
	}
	return &idWriter{ResponseWriter: w, alias: []byte(alias), id: m.ID}, func() {
		if cs != nil {
			cs.aliased.drop(raw)
		}
	}
}

func readBody(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body) // precheck read it into memory
	return b
}

func setBody(r *http.Request, b []byte) {
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.ContentLength = int64(len(b))
}

// idWriter turns an id alias back into the client's id in what the SDK
// writes. The SDK writes each message with one Write, so an alias is never
// split between two.
type idWriter struct {
	http.ResponseWriter
	alias, id []byte
}

func (w *idWriter) WriteHeader(status int) {
	w.Header().Del("Content-Length") // the body's length changes
	w.ResponseWriter.WriteHeader(status)
}

func (w *idWriter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, w.alias) {
		return w.ResponseWriter.Write(p)
	}
	if _, err := w.ResponseWriter.Write(bytes.ReplaceAll(p, w.alias, w.id)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *idWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *idWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
