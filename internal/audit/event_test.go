package audit

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

func TestAuditEventRoundTrip(t *testing.T) {
	ev := genEvent(4, time.Now().UTC())
	ev.Arguments = json.RawMessage(`{"q":"x"}`)
	ev.Result = json.RawMessage(`{"content":[]}`)
	data, err := AppendEncode(nil, &ev)
	if err != nil {
		t.Fatal(err)
	}
	var got Event
	if err := Decode(data, &got); err != nil {
		t.Fatal(err)
	}
	ev.Time = ev.Time.Round(0)
	if !reflect.DeepEqual(ev, got) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, ev)
	}
	if err := Decode([]byte{0xc1}, &got); err == nil {
		t.Fatal("0xc1 decoded")
	}
}

func TestAuditSubject(t *testing.T) {
	ev := Event{Tenant: "acme", Upstream: "files", Outcome: "-32602", Name: "read_file"}
	if got, want := Subject(&ev), "switchyard.v1.audit.acme.files.-32602."+NameBucket("read_file"); got != want {
		t.Errorf("Subject = %q, want %q", got, want)
	}
	// Any value makes a valid subject of the same shape.
	for _, s := range []string{"", "a.b", "*", ">", "a b", "%", "é", "$SYS", "x\x00y"} {
		ev := Event{Tenant: s, Upstream: s, Outcome: s, Name: s}
		subj := Subject(&ev)
		toks := strings.Split(subj, ".")
		if len(toks) != 7 {
			t.Errorf("value %q: subject %q has %d tokens", s, subj, len(toks))
		}
		for _, tok := range toks {
			if !proto.ValidToken(tok) {
				t.Errorf("value %q: invalid token %q", s, tok)
			}
		}
		if f := FilterSubject(s, s, s, s); s != "" && f != subj { // "" filters nothing
			t.Errorf("value %q: filter %q does not name subject %q", s, f, subj)
		}
	}
	// Escaping is injective on the values that could collide.
	seen := map[string]string{}
	for _, s := range []string{"", "%", "%25", "a.b", "a%2Eb", "a_b", "a-b"} {
		e := EscapeToken(s)
		if prev, ok := seen[e]; ok {
			t.Errorf("%q and %q both escape to %q", prev, s, e)
		}
		seen[e] = s
	}
	if NameBucket("") != "_" || len(NameBucket("x")) != 3 {
		t.Error("NameBucket shape")
	}
}

func TestAuditCodecMatchesReflection(t *testing.T) {
	long := strings.Repeat("x", 70000)
	var evs []Event
	for i := range 50 {
		evs = append(evs, genEvent(i, time.Now()), benchEvent(i, time.Now()))
	}
	evs = append(evs,
		Event{},
		Event{Time: time.Unix(0, 1), ErrorCode: -1, Duration: -33, UpstreamDuration: -200, RequestBytes: -40000, ResponseBytes: -3_000_000_000},
		Event{Time: time.Unix(0, 127), ErrorCode: 128, Duration: 255, UpstreamDuration: 256, RequestBytes: 70000, ResponseBytes: 5_000_000_000},
		Event{Tenant: strings.Repeat("t", 31), Principal: strings.Repeat("p", 32), Name: strings.Repeat("n", 300), TraceID: long,
			Arguments: json.RawMessage(`"` + strings.Repeat("a", 300) + `"`), Result: json.RawMessage(`"` + long + `"`)},
		Event{Arguments: json.RawMessage(`1`), Result: json.RawMessage(`[]`), Session: true},
	)
	for i, ev := range evs {
		got, _ := AppendEncode(nil, &ev)
		w := wireEvent{
			Tenant: ev.Tenant, Principal: ev.Principal, Method: ev.Method, Upstream: ev.Upstream, Name: ev.Name,
			Outcome: ev.Outcome, ErrorCode: ev.ErrorCode, Duration: int64(ev.Duration), UpstreamDur: int64(ev.UpstreamDuration),
			RequestBytes: ev.RequestBytes, ResponseBytes: ev.ResponseBytes, TraceID: ev.TraceID, EdgeID: ev.EdgeID,
			Session: ev.Session, Arguments: ev.Arguments, Result: ev.Result,
		}
		if !ev.Time.IsZero() {
			w.Time = ev.Time.UnixNano()
		}
		want, err := proto.AppendMarshal(nil, &w)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("event %d: hand-written encoding differs from reflection:\n got %x\nwant %x", i, got[:min(len(got), 200)], want[:min(len(want), 200)])
		}
	}
}
