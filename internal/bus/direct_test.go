package bus

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// TestBusCallerGrant: the body of a placement note is the call's grant,
// kept after the reply; a note without a body leaves none.
func TestBusCallerGrant(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"note with a grant", []byte("grant-bytes")},
		{"note without", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newCallerRig(t, 0, nil)
			k := g.c.New()
			defer k.Close()
			m := &nats.Msg{Subject: k.Reply(), Data: c.body, Header: nats.Header{proto.HdrPlaced: []string{"w-1"}}}
			if err := g.peer.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			if err := g.peer.Publish(k.Reply(), []byte("done")); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			out, err := k.Wait(ctx)
			if err != nil || string(out) != "done" {
				t.Fatalf("Wait = %q, %v", out, err)
			}
			if got := k.Grant(); !bytes.Equal(got, c.body) || (c.body == nil) != (got == nil) {
				t.Fatalf("Grant() = %q, want %q", got, c.body)
			}
			if k.Worker() != "w-1" {
				t.Fatalf("Worker() = %q", k.Worker())
			}
		})
	}
}

// TestBusCallerDirectNoResponders: a call sent straight to a worker whose
// subject has no subscriber fails as not delivered (safe to place again);
// the same status for a call sent through a router is "unavailable".
func TestBusCallerDirectNoResponders(t *testing.T) {
	for _, c := range []struct {
		name   string
		direct bool
		code   int32
	}{
		{"direct", true, proto.CodeNotDelivered},
		{"through a router", false, proto.CodeUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newCallerRig(t, 0, nil)
			k := g.c.New()
			defer k.Close()
			if c.direct {
				k.PlaceDirect("w-gone")
			}
			// Published on the caller's own connection: NATS answers
			// no-responders to the connection that sent the request.
			if err := g.c.nc.PublishMsg(&nats.Msg{Subject: "switchyard.v1.worker.w-gone.tools_call", Reply: k.Reply()}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			_, err := k.Wait(ctx)
			if errCode(err) != c.code {
				t.Fatalf("Wait error %v, want code %d", err, c.code)
			}
		})
	}
}
