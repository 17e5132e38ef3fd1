package audit

import (
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
	"time"
)

// FuzzAuditDecode: Decode never panics, and what it decodes re-encodes
// to bytes that decode to the same event.
func FuzzAuditDecode(f *testing.F) {
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 8 {
		ev := genEvent(i, t0)
		if i%2 == 0 {
			ev.Arguments = json.RawMessage(`{"a":[1,"b",{"c":null}]}`)
			ev.Result = json.RawMessage(`{"content":[{"type":"text","text":"hi"}]}`)
		}
		data, err := AppendEncode(nil, &ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{0x80})
	f.Add([]byte{0xc0})
	f.Add([]byte{0xdf, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0x81, 0xa1, 'a', 0xc6, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev Event
		if err := Decode(data, &ev); err != nil {
			return
		}
		again, err := AppendEncode(nil, &ev)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", ev, err)
		}
		var ev2 Event
		if err := Decode(again, &ev2); err != nil {
			t.Fatalf("decode re-encoded: %v", err)
		}
		if !reflect.DeepEqual(ev, ev2) {
			t.Fatalf("decode-encode-decode differs:\n%+v\n%+v", ev, ev2)
		}
	})
}

// FuzzAuditRedact: redaction never panics, always yields valid JSON, and
// leaves no API key behind.
func FuzzAuditRedact(f *testing.F) {
	f.Add(`{"password":"x","a":[{"text":"` + testAPIKey + `"}]}`)
	f.Add(`"Bearer ` + testJWT + `"`)
	f.Add(`[[[[{"k":1.5e300}]]]]`)
	f.Add(`{"Authorization":{"nested":true},"syk_key":"v"}`)
	r, err := NewRedactor([]string{"arguments.password", "arguments.**.text", "arguments.a[*].b", "arguments.*"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := r.RedactArguments([]byte(in))
		if len(in) > 0 && !json.Valid(out) {
			t.Fatalf("redacted %q to invalid JSON %q", in, out)
		}
		var v any
		if json.Unmarshal(out, &v) == nil && apiKeyRE.MatchString(string(out)) {
			t.Fatalf("API key prefix left in %q", out)
		}
	})
}

var apiKeyRE = regexp.MustCompile(`syk_[A-Za-z0-9_-]+`)
