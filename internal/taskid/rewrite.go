package taskid

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
)

// ErrMalformed is returned by Rewrite for a taskId that is not a string.
var ErrMalformed = errors.New("taskid: taskId is not a string")

// Rewrite returns the JSON object raw with the value of every top-level
// "taskId" member replaced by fn(value) and, with nested set, also the
// "taskId" of a top-level "task" object (the 2025-11-25 CreateTaskResult
// shape); the other members' bytes and order are unchanged. raw is
// returned as is when it has no such member (one byte search decides for
// most results) or is not an object; a taskId that is not a string is
// ErrMalformed.
func Rewrite(raw []byte, fn func(string) string, nested bool) ([]byte, error) {
	if !bytes.Contains(raw, []byte(`"taskId"`)) {
		return raw, nil
	}
	out := make([]byte, 0, len(raw)+64)
	out = append(out, '{')
	first := true
	var err error
	ok := jsonscan.Members(raw, func(k, v []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(out, k...), ':')
		switch {
		case jsonscan.KeyIs(k, "taskId"):
			if len(v) == 0 || v[0] != '"' {
				err = ErrMalformed
				return
			}
			out = appendString(out, fn(jsonscan.Unquote(v)))
		case nested && jsonscan.KeyIs(k, "task") && len(v) > 0 && v[0] == '{':
			inner, ierr := Rewrite(v, fn, false)
			if ierr != nil {
				err = ierr
			}
			out = append(out, inner...)
		default:
			out = append(out, v...)
		}
	})
	if !ok {
		return raw, nil
	}
	if err != nil {
		return nil, err
	}
	return append(out, '}'), nil
}

// appendString appends s as a JSON string, without HTML escaping.
func appendString(dst []byte, s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(dst, bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
}

// Param returns the string value of the "taskId" member of the params
// object raw. ok is false when there is none, when it is not a string, or
// when params name the task twice: another member whose key equals
// "taskId" but for case, or a repeated one. Go's encoding/json (and other
// case-insensitive decoders upstream) would take such a member for the
// taskId, so a request carrying one could name a task the gateway never
// checked.
func Param(raw []byte) (string, bool) {
	var id string
	n, str := 0, false
	jsonscan.Members(raw, func(k, v []byte) {
		if key := jsonscan.Unquote(k); key == "taskId" || strings.EqualFold(key, "taskId") {
			n++
			if key == "taskId" && len(v) > 0 && v[0] == '"' {
				id, str = jsonscan.Unquote(v), true
			}
		}
	})
	return id, n == 1 && str
}
