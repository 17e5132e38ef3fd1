package taskserver

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// forwardPatched sends the request to next, buffers the response, and
// rewrites the JSON-RPC result in it with patch. A response patch cannot
// handle (an error, an unexpected body) goes out unchanged.
func (s *Server) forwardPatched(w http.ResponseWriter, r *http.Request, body []byte, patch func(map[string]json.RawMessage) bool) {
	setBody(r, body)
	// The body is rewritten, so it must arrive uncompressed.
	r.Header.Del("Accept-Encoding")
	buf := &bufferWriter{header: make(http.Header)}
	s.next.ServeHTTP(buf, r)

	out := buf.body.Bytes()
	if p, ok := patchBody(buf.header.Get("Content-Type"), out, patch); ok {
		out = p
	}
	for k, v := range buf.header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	status := buf.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// bufferWriter is an http.ResponseWriter that keeps the whole response.
type bufferWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferWriter) Header() http.Header { return b.header }

func (b *bufferWriter) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// Flush is a no-op: the response is sent whole once next returns.
func (b *bufferWriter) Flush() {}

// patchBody applies patch to the result of the JSON-RPC response in body, an
// application/json message or an SSE stream. It reports whether it changed
// anything.
func patchBody(contentType string, body []byte, patch func(map[string]json.RawMessage) bool) ([]byte, bool) {
	if strings.HasPrefix(contentType, "text/event-stream") {
		return patchSSE(body, patch)
	}
	return patchMessage(body, patch)
}

// patchMessage patches one JSON-RPC response with a result.
func patchMessage(msg []byte, patch func(map[string]json.RawMessage) bool) ([]byte, bool) {
	var env map[string]json.RawMessage
	if json.Unmarshal(msg, &env) != nil {
		return nil, false
	}
	if _, isRequest := env["method"]; isRequest {
		return nil, false
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(env["result"], &result) != nil || result == nil {
		return nil, false
	}
	if !patch(result) {
		return nil, false
	}
	var err error
	if env["result"], err = json.Marshal(result); err != nil {
		return nil, false
	}
	out, err := json.Marshal(env)
	return out, err == nil
}

// patchSSE patches the event carrying the JSON-RPC response in an SSE
// stream; other events (notifications, server requests) are kept as they
// are.
func patchSSE(body []byte, patch func(map[string]json.RawMessage) bool) ([]byte, bool) {
	text := strings.ReplaceAll(string(body), "\r\n", "\n")
	events := strings.Split(text, "\n\n")
	changed := false
	for i, ev := range events {
		var other, data []string
		for _, line := range strings.Split(ev, "\n") {
			if v, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(v, " "))
			} else {
				other = append(other, line)
			}
		}
		if len(data) == 0 {
			continue
		}
		p, ok := patchMessage([]byte(strings.Join(data, "\n")), patch)
		if !ok {
			continue
		}
		events[i] = strings.Join(append(other, "data: "+string(p)), "\n")
		changed = true
	}
	if !changed {
		return nil, false
	}
	return []byte(strings.Join(events, "\n\n")), true
}

// patchCapabilities adds the tasks extension to result.capabilities.extensions
// of a server/discover or initialize result.
func patchCapabilities(result map[string]json.RawMessage) bool {
	caps := map[string]json.RawMessage{}
	if raw, ok := result["capabilities"]; ok && json.Unmarshal(raw, &caps) != nil {
		return false
	}
	if caps == nil {
		caps = map[string]json.RawMessage{}
	}
	ext := map[string]json.RawMessage{}
	if raw, ok := caps["extensions"]; ok && json.Unmarshal(raw, &ext) != nil {
		return false
	}
	if ext == nil {
		ext = map[string]json.RawMessage{}
	}
	if _, ok := ext[ExtensionID]; !ok {
		ext[ExtensionID] = json.RawMessage(`{}`)
	}
	var err error
	if caps["extensions"], err = json.Marshal(ext); err != nil {
		return false
	}
	result["capabilities"], err = json.Marshal(caps)
	return err == nil
}

// patchToolsList appends the fixture tools that next does not list itself to
// the last page of a tools/list result.
func (s *Server) patchToolsList(result map[string]json.RawMessage) bool {
	var cursor string
	if raw, ok := result["nextCursor"]; ok && json.Unmarshal(raw, &cursor) == nil && cursor != "" {
		return false
	}
	var tools []json.RawMessage
	if raw, ok := result["tools"]; ok && json.Unmarshal(raw, &tools) != nil {
		return false
	}
	have := make(map[string]bool, len(tools))
	for _, t := range tools {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &named) == nil {
			have[named.Name] = true
		}
	}
	for _, t := range s.tools {
		if !have[t.name] {
			tools = append(tools, t.def)
		}
	}
	var err error
	result["tools"], err = json.Marshal(tools)
	return err == nil
}

// decodeHeaderValue undoes the SEP-2243 "=?base64?...?=" encoding of a
// header value; a plain value comes back as it is. ok is false for invalid
// Base64.
func decodeHeaderValue(v string) (string, bool) {
	inner, found := strings.CutPrefix(v, "=?base64?")
	if !found {
		return v, true
	}
	inner, found = strings.CutSuffix(inner, "?=")
	if !found {
		return v, true
	}
	dec, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(dec), true
}
