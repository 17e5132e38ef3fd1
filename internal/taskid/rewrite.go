package taskid

import (
	"bytes"
	"encoding/json"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// Rewrite returns the JSON object raw with the string value of its
// top-level "taskId" member replaced by fn(value), the other members'
// bytes and order unchanged. raw is returned as is when it is not an
// object, has no string taskId, or fn returns ok false. Only results
// that mention "taskId" at all are scanned.
func Rewrite(raw []byte, fn func(string) (string, bool)) []byte {
	if !bytes.Contains(raw, []byte(`"taskId"`)) {
		return raw
	}
	var old []byte
	jsonscan.Members(raw, func(k, v []byte) {
		if jsonscan.KeyIs(k, "taskId") && len(v) > 0 && v[0] == '"' {
			old = v
		}
	})
	if old == nil {
		return raw
	}
	repl, ok := fn(jsonscan.Unquote(old))
	if !ok {
		return raw
	}
	var qb bytes.Buffer
	enc := json.NewEncoder(&qb)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(repl)
	q := bytes.TrimSuffix(qb.Bytes(), []byte("\n"))
	out := make([]byte, 0, len(raw)+len(q))
	out = append(out, '{')
	first := true
	jsonscan.Members(raw, func(k, v []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(out, k...), ':')
		if jsonscan.KeyIs(k, "taskId") && len(v) > 0 && v[0] == '"' {
			out = append(out, q...)
		} else {
			out = append(out, v...)
		}
	})
	return append(out, '}')
}

// Param returns the string value of the top-level "taskId" member of the
// params object raw; ok is false when there is none.
func Param(raw []byte) (string, bool) {
	var id string
	found := false
	jsonscan.Members(raw, func(k, v []byte) {
		if jsonscan.KeyIs(k, "taskId") && len(v) > 0 && v[0] == '"' {
			id, found = jsonscan.Unquote(v), true
		}
	})
	return id, found
}
