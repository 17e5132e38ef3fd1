package edge

import (
	"bytes"
	"net/http"
	"net/url"
)

// Legacy HTTP+SSE sessions (protocol 2024-11-05) are named by the
// sessionid query parameter of their POST endpoint, which the SDK's SSE
// handler announces in the stream's first event and checks against no
// caller. The edge binds each such session to the view and identity user
// of the GET that opened it, as sessionMatches does for streamable HTTP:
// a POST by anyone else reads as an unknown session.

// sseOwner is what a legacy session is bound to.
func sseOwner(v *view, id *identity) string { return v.key + "\x00" + id.user }

// serveSSEBound serves a legacy SSE request of id on v: a GET opens a
// session bound to the caller; a POST must come from its owner.
func (s *Service) serveSSEBound(w http.ResponseWriter, r *http.Request, v *view, id *identity) {
	if r.Method != http.MethodGet {
		if sid := r.URL.Query().Get("sessionid"); sid != "" {
			if owner, ok := s.sseOwners.Load(sid); !ok || owner != sseOwner(v, id) {
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
		}
		v.serveSSE(w, r)
		return
	}
	c := &sseCapture{ResponseWriter: w, owner: sseOwner(v, id), s: s}
	defer func() {
		if c.sid != "" {
			s.sseOwners.Delete(c.sid)
		}
	}()
	v.serveSSE(c, r)
}

// sseCapture passes a legacy SSE stream through, taking the session id
// out of its endpoint event (the first event) and recording the session's
// owner before the client can see the id.
type sseCapture struct {
	http.ResponseWriter
	s     *Service
	owner string
	sid   string
	buf   []byte // the stream until the endpoint event is complete
}

func (c *sseCapture) Write(b []byte) (int, error) {
	if c.sid == "" && len(c.buf) < 4096 {
		c.buf = append(c.buf, b...)
		if i := bytes.Index(c.buf, []byte("sessionid=")); i >= 0 {
			rest := c.buf[i+len("sessionid="):]
			if j := bytes.IndexAny(rest, "&\r\n"); j >= 0 {
				if sid, err := url.QueryUnescape(string(rest[:j])); err == nil && sid != "" {
					c.sid = sid
					c.s.sseOwners.Store(sid, c.owner)
				}
				c.buf = nil
			}
		}
	}
	return c.ResponseWriter.Write(b)
}

// Flush passes flushes on: the SDK flushes every event.
func (c *sseCapture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (c *sseCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }
