package worker

import (
	"bytes"
	"testing"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestReplyKeep: a reply is kept for keepFor, replaced by a later one of
// the same call, dropped oldest first past keepBytes (the keep is then
// unsure for keepFor), and one too large is not kept (unsure too).
func TestReplyKeep(t *testing.T) {
	now := time.Unix(1000, 0)
	k := newReplyKeep()
	a := callKey{"e1", 1}
	k.put(a, "inbox.1", &proto.Reply{Result: []byte(`{"a":1}`)}, now)
	k.put(callKey{"e1", 0}, "inbox.0", &proto.Reply{}, now) // no id: not kept
	if to, r, ok := k.get(a, now.Add(keepFor-time.Millisecond)); !ok || to != "inbox.1" || string(r.Result) != `{"a":1}` {
		t.Fatalf("kept reply: %q %v %v", to, r, ok)
	}
	if _, _, ok := k.get(callKey{"e1", 0}, now); ok {
		t.Fatal("a call without an id was kept")
	}
	if k.unsure(now) {
		t.Fatal("unsure with nothing dropped early")
	}
	if _, _, ok := k.get(a, now.Add(keepFor)); ok {
		t.Fatal("reply kept past keepFor")
	}
	if k.unsure(now.Add(keepFor)) {
		t.Fatal("a reply leaving at keepFor made the keep unsure")
	}

	// Past keepBytes the oldest go, and the keep is unsure.
	now = now.Add(time.Hour)
	big := bytes.Repeat([]byte("x"), keepMaxOne-1024)
	n := keepBytes/len(big) + 2
	for i := range n {
		k.put(callKey{"e2", uint64(i + 1)}, "inbox", &proto.Reply{Result: big}, now)
	}
	if _, _, ok := k.get(callKey{"e2", 1}, now); ok {
		t.Fatal("the oldest reply stayed past keepBytes")
	}
	if _, _, ok := k.get(callKey{"e2", uint64(n)}, now); !ok {
		t.Fatal("the newest reply was dropped")
	}
	if !k.unsure(now) || k.unsure(now.Add(keepFor)) {
		t.Fatal("unsure should hold for keepFor after an early drop")
	}
	if k.bytes > keepBytes {
		t.Fatalf("%d bytes kept, bound %d", k.bytes, keepBytes)
	}

	// A reply too large to keep makes the keep unsure.
	k2 := newReplyKeep()
	k2.put(callKey{"e3", 1}, "inbox", &proto.Reply{Result: make([]byte, keepMaxOne)}, now)
	if _, _, ok := k2.get(callKey{"e3", 1}, now); ok || !k2.unsure(now) {
		t.Fatalf("oversize reply: kept %v, unsure %v", ok, k2.unsure(now))
	}
}
