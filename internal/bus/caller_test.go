package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natstest"
)

// callerRig is a started Caller and a second connection that plays the
// responder (a router or worker).
type callerRig struct {
	c    *Caller
	peer *nats.Conn
}

func newCallerRig(t *testing.T, maxResult int, gone func(string) bool) *callerRig {
	t.Helper()
	s := natstest.Start(t)
	c := NewCaller(natstest.Connect(t, s), maxResult)
	c.Gone = gone
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// The peer publishes straight to the inbox: the server must have the
	// subscription first (a real responder only answers our own request).
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(proto.ErrUnavailable) })
	return &callerRig{c: c, peer: natstest.Connect(t, s)}
}

// note publishes a placement note for worker to reply.
func note(t *testing.T, nc *nats.Conn, reply, worker string) {
	t.Helper()
	m := &nats.Msg{Subject: reply, Header: nats.Header{}}
	m.Header.Set(proto.HdrPlaced, worker)
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}

// chunkMsg publishes one part of a chunked reply with header h.
func chunkMsg(t *testing.T, nc *nats.Conn, reply, h string, data []byte) {
	t.Helper()
	m := &nats.Msg{Subject: reply, Data: data, Header: nats.Header{}}
	m.Header.Set(proto.HdrChunk, h)
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func errCode(err error) int32 {
	var pe *proto.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return 0
}

func TestBusCallerReply(t *testing.T) {
	big := randomBytes(20 << 20) // 20 MiB: three chunks at the 8 MiB max payload
	tests := []struct {
		name       string
		maxResult  int
		respond    func(t *testing.T, nc *nats.Conn, reply string)
		want       []byte
		wantCode   int32 // 0: success
		wantWorker string
	}{
		{
			name: "plain reply",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				if err := nc.Publish(reply, []byte("hello")); err != nil {
					t.Fatal(err)
				}
			},
			want: []byte("hello"),
		},
		{
			name: "empty reply",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				if err := nc.Publish(reply, nil); err != nil {
					t.Fatal(err)
				}
			},
			want: []byte{},
		},
		{
			name: "placement note then reply",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				note(t, nc, reply, "w-1")
				if err := nc.Publish(reply, []byte("done")); err != nil {
					t.Fatal(err)
				}
			},
			want:       []byte("done"),
			wantWorker: "w-1",
		},
		{
			name: "small payload through Respond",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				if err := Respond(nc, reply, []byte("small")); err != nil {
					t.Fatal(err)
				}
			},
			want: []byte("small"),
		},
		{
			name: "chunked reply reassembles byte-exact",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				if len(big) <= int(nc.MaxPayload()) {
					t.Fatalf("payload %d does not exceed max payload %d", len(big), nc.MaxPayload())
				}
				if err := Respond(nc, reply, big); err != nil {
					t.Fatal(err)
				}
			},
			want: big,
		},
		{
			name: "placement note then chunked reply",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				note(t, nc, reply, "w-2")
				if err := Respond(nc, reply, big); err != nil {
					t.Fatal(err)
				}
			},
			want:       big,
			wantWorker: "w-2",
		},
		{
			name: "manual chunks",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				chunkMsg(t, nc, reply, "0/3", []byte("ab"))
				chunkMsg(t, nc, reply, "1/3", nil)
				chunkMsg(t, nc, reply, "2/3", []byte("c"))
			},
			want: []byte("abc"),
		},
		{
			name:      "chunks beyond maxResult",
			maxResult: 1000,
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				chunkMsg(t, nc, reply, "0/2", make([]byte, 600))
				chunkMsg(t, nc, reply, "1/2", make([]byte, 600))
			},
			wantCode: proto.CodePayloadTooLarge,
		},
		{
			name:      "Respond beyond maxResult",
			maxResult: 10 << 20,
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				if err := Respond(nc, reply, big); err != nil {
					t.Fatal(err)
				}
			},
			wantCode: proto.CodePayloadTooLarge,
		},
		{
			name: "chunk out of order",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				chunkMsg(t, nc, reply, "1/2", []byte("b"))
				chunkMsg(t, nc, reply, "0/2", []byte("a"))
			},
			wantCode: proto.CodeBadEnvelope,
		},
		{
			name: "chunk repeated",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				chunkMsg(t, nc, reply, "0/2", []byte("a"))
				chunkMsg(t, nc, reply, "0/2", []byte("a"))
			},
			wantCode: proto.CodeBadEnvelope,
		},
		{
			name: "error reply is returned as payload",
			respond: func(t *testing.T, nc *nats.Conn, reply string) {
				if err := RespondError(nc, reply, proto.ErrNoWorkers); err != nil {
					t.Fatal(err)
				}
			},
			want: func() []byte { b, _ := proto.Marshal(&proto.Reply{Error: proto.ErrNoWorkers}); return b }(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newCallerRig(t, tt.maxResult, nil)
			k := r.c.New()
			defer k.Close()
			tt.respond(t, r.peer, k.Reply())
			got, err := k.Wait(t.Context())
			if tt.wantCode != 0 {
				if code := errCode(err); code != tt.wantCode {
					t.Fatalf("Wait error = %v (code %d), want code %d", err, code, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if !bytes.Equal(got, tt.want) {
				t.Errorf("Wait = %d bytes, want %d bytes (equal prefix: %t)", len(got), len(tt.want),
					len(got) > 0 && len(tt.want) > 0 && got[0] == tt.want[0])
			}
			if w := k.Worker(); w != tt.wantWorker {
				t.Errorf("Worker() = %q, want %q", w, tt.wantWorker)
			}
		})
	}
}

func TestBusCallerMalformedChunkHeader(t *testing.T) {
	tests := []struct {
		header   string
		size     int
		wantCode int32 // 0: accepted, the call stays pending
	}{
		{header: "x", wantCode: proto.CodeBadEnvelope},
		{header: "/", wantCode: proto.CodeBadEnvelope},
		{header: "0/", wantCode: proto.CodeBadEnvelope},
		{header: "/1", wantCode: proto.CodeBadEnvelope},
		{header: "0/0", wantCode: proto.CodeBadEnvelope},
		{header: "-1/2", wantCode: proto.CodeBadEnvelope},
		{header: "2/2", wantCode: proto.CodeBadEnvelope},
		{header: "0/-3", wantCode: proto.CodeBadEnvelope},
		{header: "0/1/2", wantCode: proto.CodeBadEnvelope},
		{header: "99999999999999999999/1", wantCode: proto.CodeBadEnvelope},
		{header: "0/99999999999999999999", wantCode: proto.CodeBadEnvelope},
		{header: "0x0/2", wantCode: proto.CodeBadEnvelope},
		{header: "0/9223372036854775807", size: 2},
		{header: "0/3074457345618258603", size: 3},
		{header: "0/4611686018427387904", size: 4},
		{header: "0/1000000", size: 100},
	}
	r := newCallerRig(t, 1<<20, nil)
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			k := r.c.New()
			defer k.Close()
			chunkMsg(t, r.peer, k.Reply(), tt.header, make([]byte, tt.size))
			if tt.wantCode == 0 {
				// Still pending: prove the inbox survived by finishing the
				// call with a plain message (it is taken as a reply).
				if err := r.peer.Publish(k.Reply(), []byte("ok")); err != nil {
					t.Fatal(err)
				}
			}
			got, err := k.Wait(t.Context())
			if tt.wantCode != 0 {
				if code := errCode(err); code != tt.wantCode {
					t.Fatalf("Wait error = %v (code %d), want code %d", err, code, tt.wantCode)
				}
				return
			}
			if err != nil || string(got) != "ok" {
				t.Fatalf("Wait = %q, %v; want \"ok\"", got, err)
			}
		})
	}
	// The inbox still works after all of the above.
	k := r.c.New()
	defer k.Close()
	if err := r.peer.Publish(k.Reply(), []byte("alive")); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Wait(t.Context()); err != nil || string(got) != "alive" {
		t.Fatalf("after malformed chunks: Wait = %q, %v", got, err)
	}
}

func TestBusCallerContext(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(t *testing.T, r *callerRig) context.Context
		want error
	}{
		{
			name: "deadline",
			ctx: func(t *testing.T, _ *callerRig) context.Context {
				ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			want: proto.ErrTimeout,
		},
		{
			name: "canceled when the request arrives",
			ctx: func(t *testing.T, r *callerRig) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				t.Cleanup(cancel)
				sub, err := r.peer.Subscribe("svc.cancel", func(*nats.Msg) { cancel() })
				if err != nil {
					t.Fatal(err)
				}
				if err := sub.AutoUnsubscribe(1); err != nil {
					t.Fatal(err)
				}
				if err := r.peer.Flush(); err != nil {
					t.Fatal(err)
				}
				return ctx
			},
			want: ErrCanceled,
		},
		{
			name: "canceled before",
			ctx: func(t *testing.T, _ *callerRig) context.Context {
				ctx, cancel := context.WithCancel(t.Context())
				cancel()
				return ctx
			},
			want: ErrCanceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newCallerRig(t, 0, nil)
			// A responder that never answers, so only ctx can end the call.
			if _, err := r.peer.Subscribe("svc.*", func(*nats.Msg) {}); err != nil {
				t.Fatal(err)
			}
			if err := r.peer.Flush(); err != nil {
				t.Fatal(err)
			}
			subj := "svc.silent"
			if tt.want == ErrCanceled {
				subj = "svc.cancel"
			}
			_, err := r.c.Request(tt.ctx(t, r), subj, []byte("q"))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Request error = %v, want %v", err, tt.want)
			}
			if tt.want == ErrCanceled && errors.Is(err, proto.ErrTimeout) {
				t.Errorf("cancel reported as timeout: %v", err)
			}
		})
	}
}

func TestBusCallerNoResponders(t *testing.T) {
	r := newCallerRig(t, 0, nil)
	_, err := r.c.Request(t.Context(), "nobody.listens.here", []byte("q"))
	if code := errCode(err); code != proto.CodeUnavailable {
		t.Fatalf("Request error = %v (code %d), want code %d", err, code, proto.CodeUnavailable)
	}
}

func TestBusCallerRequestRoundTrip(t *testing.T) {
	r := newCallerRig(t, 0, nil)
	if _, err := r.peer.Subscribe("svc.echo", func(m *nats.Msg) {
		_ = RespondReply(r.peer, m.Reply, &proto.Reply{Result: m.Data, Worker: "w-9"})
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.peer.Flush(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   []byte
	}{
		{name: "small", in: []byte(`{"x":1}`)},
		{name: "large", in: randomBytes(1 << 20)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, err := r.c.Request(t.Context(), "svc.echo", tt.in)
			if err != nil {
				t.Fatal(err)
			}
			var rep proto.Reply
			if err := proto.Unmarshal(data, &rep); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(rep.Result, tt.in) || rep.Worker != "w-9" || rep.Error != nil {
				t.Errorf("reply: %d result bytes, worker %q, error %v", len(rep.Result), rep.Worker, rep.Error)
			}
		})
	}
}

func TestBusCallerFailWorker(t *testing.T) {
	r := newCallerRig(t, 0, nil)
	onA1, onA2, onB, unplaced := r.c.New(), r.c.New(), r.c.New(), r.c.New()
	for _, k := range []*Call{onA1, onA2, onB, unplaced} {
		defer k.Close()
	}
	note(t, r.peer, onA1.Reply(), "w-a")
	note(t, r.peer, onA2.Reply(), "w-a")
	note(t, r.peer, onB.Reply(), "w-b")
	waitFor(t, "placement notes", func() bool {
		return onA1.Worker() == "w-a" && onA2.Worker() == "w-a" && onB.Worker() == "w-b"
	})

	lost := proto.Errorf(proto.CodeWorkerLost, "w-a went away")
	r.c.FailWorker("w-a", lost)
	r.c.FailWorker("w-unknown", proto.ErrWorkerLost) // no calls: no effect

	// The survivors still get their replies.
	for _, k := range []*Call{onB, unplaced} {
		if err := r.peer.Publish(k.Reply(), []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		k       *Call
		wantErr error
	}{
		{name: "first call on the failed worker", k: onA1, wantErr: lost},
		{name: "second call on the failed worker", k: onA2, wantErr: lost},
		{name: "call on another worker", k: onB},
		{name: "call not placed yet", k: unplaced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.k.Wait(t.Context())
			if tt.wantErr != nil {
				if err != tt.wantErr { // the very error given to FailWorker
					t.Fatalf("Wait error = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != "ok" {
				t.Fatalf("Wait = %q, %v; want \"ok\"", got, err)
			}
		})
	}
}

func TestBusCallerGoneHook(t *testing.T) {
	r := newCallerRig(t, 0, func(w string) bool { return w == "w-dead" })
	tests := []struct {
		worker   string
		wantCode int32
	}{
		{worker: "w-dead", wantCode: proto.CodeWorkerLost},
		{worker: "w-live"},
	}
	for _, tt := range tests {
		t.Run(tt.worker, func(t *testing.T) {
			k := r.c.New()
			defer k.Close()
			note(t, r.peer, k.Reply(), tt.worker)
			if tt.wantCode == 0 {
				if err := r.peer.Publish(k.Reply(), []byte("ok")); err != nil {
					t.Fatal(err)
				}
			}
			got, err := k.Wait(t.Context())
			if code := errCode(err); code != tt.wantCode {
				t.Fatalf("Wait = %q, %v (code %d); want code %d", got, err, code, tt.wantCode)
			}
			if k.Worker() != tt.worker {
				t.Errorf("Worker() = %q, want %q", k.Worker(), tt.worker)
			}
		})
	}
}

func TestBusCallerStop(t *testing.T) {
	r := newCallerRig(t, 0, nil)
	calls := []*Call{r.c.New(), r.c.New()}
	note(t, r.peer, calls[1].Reply(), "w-1")
	waitFor(t, "placement note", func() bool { return calls[1].Worker() == "w-1" })
	stopErr := proto.Errorf(proto.CodeUnavailable, "shutting down")
	r.c.Stop(stopErr)
	for i, k := range calls {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			defer k.Close()
			if _, err := k.Wait(t.Context()); err != stopErr {
				t.Fatalf("Wait error = %v, want %v", err, stopErr)
			}
		})
	}
}

func TestBusCallerLateMessagesDropped(t *testing.T) {
	r := newCallerRig(t, 0, nil)
	k := r.c.New()
	if err := r.peer.Publish(k.Reply(), []byte("first")); err != nil {
		t.Fatal(err)
	}
	got, err := k.Wait(t.Context())
	if err != nil || string(got) != "first" {
		t.Fatalf("Wait = %q, %v", got, err)
	}
	k.Close()
	// Messages for a closed call, an unknown id and a non-numeric id are
	// dropped; the next call still works.
	for _, subj := range []string{k.Reply(), r.c.prefix + "999999", r.c.prefix + "x"} {
		if err := r.peer.Publish(subj, []byte("late")); err != nil {
			t.Fatal(err)
		}
	}
	k2 := r.c.New()
	defer k2.Close()
	if err := r.peer.Publish(k2.Reply(), []byte("second")); err != nil {
		t.Fatal(err)
	}
	if got, err := k2.Wait(t.Context()); err != nil || string(got) != "second" {
		t.Fatalf("second Wait = %q, %v", got, err)
	}
	if string(got) != "first" {
		t.Errorf("first reply changed to %q", got)
	}
}

func TestBusRespondChunking(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	sub, err := nc.SubscribeSync("chunks")
	if err != nil {
		t.Fatal(err)
	}
	limit := int(nc.MaxPayload()) - chunkHeadroom
	tests := []struct {
		name       string
		size       int
		wantChunks int // 0: one message without a chunk header
	}{
		{name: "empty", size: 0},
		{name: "at the limit", size: limit},
		{name: "one past the limit", size: limit + 1, wantChunks: 2},
		{name: "exactly two chunks", size: 2 * limit, wantChunks: 2},
		{name: "three chunks", size: 2*limit + 7, wantChunks: 3},
	}
	pool := randomBytes(2*limit + 7)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := pool[:tt.size]
			if err := Respond(nc, "chunks", payload); err != nil {
				t.Fatal(err)
			}
			msgs := max(tt.wantChunks, 1)
			var got []byte
			for i := range msgs {
				m, err := sub.NextMsg(10 * time.Second)
				if err != nil {
					t.Fatalf("message %d of %d: %v", i, msgs, err)
				}
				h := m.Header.Get(proto.HdrChunk)
				want := ""
				if tt.wantChunks > 0 {
					want = strconv.Itoa(i) + "/" + strconv.Itoa(tt.wantChunks)
				}
				if h != want {
					t.Errorf("message %d: %s = %q, want %q", i, proto.HdrChunk, h, want)
				}
				if len(m.Data) > limit {
					t.Errorf("message %d: %d bytes, over the %d limit", i, len(m.Data), limit)
				}
				got = append(got, m.Data...)
			}
			if !bytes.Equal(got, payload) {
				t.Errorf("reassembled %d bytes differ from the %d sent", len(got), len(payload))
			}
		})
	}
}

// TestBusCallerMessages: upstream messages published before the reply reach
// WaitWith's callback in order, all of them before it returns; Wait drops
// them; a message alone does not end the call.
func TestBusCallerMessages(t *testing.T) {
	r := newCallerRig(t, 0, nil)
	if _, err := r.peer.Subscribe("svc.chatty", func(m *nats.Msg) {
		for i := range 50 {
			msg := &nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrMessage: []string{"1"}},
				Data: []byte(fmt.Sprintf(`{"n":%d}`, i))}
			_ = r.peer.PublishMsg(msg)
		}
		_ = RespondReply(r.peer, m.Reply, &proto.Reply{Result: []byte(`{}`)})
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.peer.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, withCallback := range []bool{true, false} {
		k := r.c.New()
		if err := r.c.nc.PublishRequest("svc.chatty", k.Reply(), nil); err != nil {
			t.Fatal(err)
		}
		var got []string
		var onMsg func(*nats.Msg) bool
		if withCallback {
			onMsg = func(m *nats.Msg) bool { got = append(got, string(m.Data)); return false }
		}
		data, err := k.WaitWith(t.Context(), onMsg)
		k.Close()
		if err != nil {
			t.Fatal(err)
		}
		var rep proto.Reply
		if err := proto.Unmarshal(data, &rep); err != nil || string(rep.Result) != `{}` {
			t.Fatalf("reply %q %v", rep.Result, err)
		}
		want := 0
		if withCallback {
			want = 50
		}
		if len(got) != want {
			t.Fatalf("callback=%v: %d messages, want %d", withCallback, len(got), want)
		}
		for i, g := range got {
			if g != fmt.Sprintf(`{"n":%d}`, i) {
				t.Fatalf("message %d is %s: out of order", i, g)
			}
		}
	}
}

// TestBusCallerSuspend: a callback that suspends the call makes WaitWith
// return ErrSuspended with the call still registered; the next WaitWith
// gets the remaining messages in order and then the reply.
func TestBusCallerSuspend(t *testing.T) {
	r := newCallerRig(t, 0, nil)
	if _, err := r.peer.Subscribe("svc.asks", func(m *nats.Msg) {
		for i := range 4 {
			_ = r.peer.PublishMsg(&nats.Msg{Subject: m.Reply, Header: nats.Header{proto.HdrMessage: []string{"1"}},
				Data: []byte(fmt.Sprint(i))})
		}
		_ = RespondReply(r.peer, m.Reply, &proto.Reply{Result: []byte(`{}`)})
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.peer.Flush(); err != nil {
		t.Fatal(err)
	}
	k := r.c.New()
	defer k.Close()
	if err := r.c.nc.PublishRequest("svc.asks", k.Reply(), nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	suspendAt := "1"
	onMsg := func(m *nats.Msg) bool {
		got = append(got, string(m.Data))
		return string(m.Data) == suspendAt
	}
	if _, err := k.WaitWith(t.Context(), onMsg); err != ErrSuspended {
		t.Fatalf("first wait: %v, want ErrSuspended", err)
	}
	suspendAt = ""
	data, err := k.WaitWith(t.Context(), onMsg)
	if err != nil {
		t.Fatal(err)
	}
	var rep proto.Reply
	if err := proto.Unmarshal(data, &rep); err != nil || string(rep.Result) != "{}" {
		t.Fatalf("reply %q %v", rep.Result, err)
	}
	if strings.Join(got, ",") != "0,1,2,3" {
		t.Fatalf("messages %v, want 0,1,2,3 in order", got)
	}
}
