package capture

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// keyOfID is the table key of an SDK request id: "n<int>" or "s<string>".
func keyOfID(id jsonrpc.ID) (string, bool) {
	switch v := id.Raw().(type) {
	case int64:
		return "n" + strconv.FormatInt(v, 10), true
	case string:
		return "s" + v, true
	}
	return "", false
}

// keyOfRaw is the table key of a raw JSON id, matching keyOfID (the SDK
// turns JSON numbers into int64 ids).
func keyOfRaw(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return "s" + s, true
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
		return "n" + strconv.FormatInt(n, 10), true
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return "", false
	}
	return "n" + strconv.FormatInt(int64(f), 10), true
}

// wireMsg is the part of a JSON-RPC message the capture needs. A response
// has no method; a server-to-client request has both a method and an id
// from a different id space, so it must never be taken for a response.
type wireMsg struct {
	ID     json.RawMessage `json:"id"`
	Method json.RawMessage `json:"method"`
	Result json.RawMessage `json:"result"`
}

// requestKey returns the table key of a JSON-RPC call body (a request with
// an id); ok is false for notifications, responses, batches and bad JSON.
func requestKey(body []byte) (string, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return "", false
	}
	var m wireMsg
	if json.Unmarshal(body, &m) != nil || m.Method == nil {
		return "", false
	}
	return keyOfRaw(m.ID)
}

// rewrite captures the result of data if it is a response to a recorded
// call. When the call's slot has a stub it returns a re-encoded response
// whose result is the stub and true; otherwise data and false.
func (t *Table) rewrite(data []byte) ([]byte, bool) {
	if t.empty() {
		return data, false
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return data, false
	}
	var m wireMsg
	if json.Unmarshal(trimmed, &m) != nil || m.Method != nil {
		return data, false
	}
	key, ok := keyOfRaw(m.ID)
	if !ok {
		return data, false
	}
	s := t.take(key)
	if s == nil || m.Result == nil {
		return data, false // not ours, or an error response: nothing to capture
	}
	s.fill(m.Result) // Unmarshal copied it into a fresh slice
	if s.stub == nil {
		return data, false
	}
	return stubResponse(m.ID, s.stub), true
}

// stubResponse encodes {"jsonrpc":"2.0","id":<id>,"result":<stub>}.
func stubResponse(id json.RawMessage, stub []byte) []byte {
	out := make([]byte, 0, len(id)+len(stub)+40)
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, id...)
	out = append(out, `,"result":`...)
	out = append(out, stub...)
	return append(out, '}')
}
