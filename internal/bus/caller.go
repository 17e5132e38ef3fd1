package bus

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/hop"
	"github.com/switchyard-mcp/switchyard/proto"
)

// Caller is a multiplexed reply inbox: one subscription on <inbox>.* serves
// every call a role makes. Besides the final reply it understands the
// router's placement note ([proto.HdrPlaced]), chunked replies
// ([proto.HdrChunk]) and upstream messages ([proto.HdrMessage]), which
// nats.go's Request cannot (its shared inbox keeps only the first message).
//
// A Caller is safe for concurrent use. Start it once before use.
type Caller struct {
	nc        *nats.Conn
	prefix    string
	maxResult int
	// Gone, if set, is asked when a placement note arrives; a call placed
	// on a worker that is already gone fails at once with ErrWorkerLost.
	Gone func(worker string) bool
	// RouterMissing, if set, is told of a router a call was sent to by
	// name that had no subscription (it is gone, or reconnecting: see
	// Routers.Suspect). That call fails with ErrRouterLost.
	RouterMissing func(router string)

	seq atomic.Uint64
	sub *nats.Subscription

	mu      sync.Mutex
	pending map[uint64]*Call // guarded by mu
}

// NewCaller returns a Caller on nc; maxResult bounds a reassembled reply in
// bytes (0: 64 MiB).
func NewCaller(nc *nats.Conn, maxResult int) *Caller {
	if maxResult <= 0 {
		maxResult = 64 << 20
	}
	c := &Caller{nc: nc, prefix: nc.NewInbox() + ".", maxResult: maxResult, pending: map[uint64]*Call{}}
	// Call ids start at a random point: a worker keys calls by (edge,
	// id), and an edge serving another edge's session sends its calls
	// under that edge's name (proto.SessionRecord.Origin), so two edges'
	// ids must not meet.
	var b [8]byte
	_, _ = rand.Read(b[:])
	c.seq.Store(binary.LittleEndian.Uint64(b[:]) >> 2)
	return c
}

// Start subscribes the inbox.
func (c *Caller) Start() error {
	sub, err := c.nc.Subscribe(c.prefix+"*", Guard(c.prefix+"*", c.onMsg))
	if err != nil {
		return err
	}
	_ = sub.SetPendingLimits(-1, 512<<20)
	c.sub = sub
	return nil
}

// CatchUp waits until every message the inbox had received when it was
// called has been handled (or until within passes; false then). What a
// responder published before something this connection received since is
// then either handled or was never sent here: NATS keeps one publisher's
// messages in order to one subscriber's connection.
func (c *Caller) CatchUp(within time.Duration) bool {
	if c.sub == nil {
		return true
	}
	d, err := c.sub.Delivered() // first: see upstream-worker's backlog
	if err != nil {
		return false
	}
	n, _, err := c.sub.Pending()
	if err != nil {
		return false
	}
	want := d + int64(n)
	deadline := time.Now().Add(within)
	for {
		d, err := c.sub.Delivered()
		if err != nil {
			return false
		}
		if d >= want {
			// The last message counted delivered may still be in onMsg.
			time.Sleep(5 * time.Millisecond)
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// Stop unsubscribes and fails every pending call with err.
func (c *Caller) Stop(err *proto.Error) {
	if c.sub != nil {
		_ = c.sub.Unsubscribe()
	}
	c.mu.Lock()
	calls := make([]*Call, 0, len(c.pending))
	for _, k := range c.pending {
		calls = append(calls, k)
	}
	c.mu.Unlock()
	for _, k := range calls {
		k.finish(nil, err)
	}
}

// Call is one pending request. Create it with [Caller.New], publish with
// its [Call.Reply] subject, [Call.Wait], then [Call.Close].
type Call struct {
	ID uint64
	// From is the Request.Edge the call was sent with, which its Cancel
	// must carry (workers key calls by it and ID); the caller sets it.
	From  string
	c     *Caller
	reply string
	done  chan struct{}
	once  sync.Once
	born  time.Time // when New made it

	mu     sync.Mutex
	worker string      // guarded by mu: from the placement note, or PlaceDirect
	direct bool        // guarded by mu: sent to worker by the caller itself
	router string      // guarded by mu: sent to this router by name (SendToRouter)
	what   string      // guarded by mu: what the call asks, for a no-responder error
	grant  []byte      // guarded by mu: the placement note's body (a proto.RouteGrant)
	hdr    nats.Header // guarded by mu: headers of a traced reply
	data   []byte
	err    *proto.Error
	parts  int           // chunks received
	msgs   []*nats.Msg   // guarded by mu: upstream messages not yet taken
	signal chan struct{} // cap 1: a message was queued
}

// New registers a pending call.
func (c *Caller) New() *Call {
	id := c.seq.Add(1)
	k := &Call{ID: id, c: c, reply: c.prefix + strconv.FormatUint(id, 10), done: make(chan struct{}), signal: make(chan struct{}, 1), born: time.Now()}
	c.mu.Lock()
	c.pending[id] = k
	c.mu.Unlock()
	return k
}

// Age is how long ago the call was made.
func (k *Call) Age() time.Duration { return time.Since(k.born) }

// Born is when the call was made.
func (k *Call) Born() time.Time { return k.born }

// Reply is the subject responders publish to.
func (k *Call) Reply() string { return k.reply }

// Worker is the worker the call was placed on, once the note has arrived.
func (k *Call) Worker() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.worker
}

// PlaceDirect records that the caller sends the call to worker itself,
// not through a router: NATS's no-responders status on the reply subject
// then means the worker is gone and the call did not run
// (proto.CodeNotDelivered), and the call fails with the worker's
// departure as a routed one does. Call it before publishing.
func (k *Call) PlaceDirect(worker string) {
	k.mu.Lock()
	k.worker, k.direct = worker, true
	k.mu.Unlock()
}

// SendToRouter records that the call goes to router by name: NATS's
// no-responders status on the reply then means that router is gone and
// the call did not run (proto.CodeNotDelivered), as does
// [Caller.FailRouter] before the router's placement note arrives. Call it
// before publishing.
func (k *Call) SendToRouter(router string) {
	k.mu.Lock()
	k.router = router
	k.mu.Unlock()
}

// Router returns the router the call was sent to by name ("" if none).
func (k *Call) Router() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.router
}

// Describe names what a call sent on the routers' queue subject asks
// ("tools/call \"x__y\""): NATS's no-responders status then fails it
// naming the router as the missing role.
func (k *Call) Describe(what string) {
	k.mu.Lock()
	k.what = what
	k.mu.Unlock()
}

// Grant returns the body of the call's placement note (a router's
// proto.RouteGrant; nil without one). Call it after Wait returned.
func (k *Call) Grant() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.grant
}

// Header returns the headers of a traced reply (nil otherwise). Call it
// after Wait returned.
func (k *Call) Header() nats.Header {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.hdr
}

// Close unregisters the call; later messages for it are dropped.
func (k *Call) Close() {
	k.c.mu.Lock()
	delete(k.c.pending, k.ID)
	k.c.mu.Unlock()
}

// ErrCanceled is returned by Wait when ctx ends for a reason other than its deadline.
var ErrCanceled = errors.New("bus: call canceled")

// Wait blocks until the reply is complete, the call fails, or ctx ends. It
// returns the raw reply payload, a *proto.Error (ErrWorkerLost,
// ErrPayloadTooLarge, ErrTimeout) or [ErrCanceled]. Upstream messages
// ([proto.HdrMessage]) are dropped; use [Call.WaitWith] to receive them.
func (k *Call) Wait(ctx context.Context) ([]byte, error) { return k.WaitWith(ctx, nil) }

// WaitWith is Wait that hands each upstream message ([proto.HdrMessage]) of
// the call to onMsg, in arrival order, on the calling goroutine; every
// message that arrived before the reply is handed over before WaitWith
// returns. onMsg should not block for long: the reply waits behind it.
//
// When onMsg returns true the call is suspended: WaitWith returns
// [ErrSuspended] at once and the call stays registered (do not Close it);
// the messages after that one stay queued for the next WaitWith.
func (k *Call) WaitWith(ctx context.Context, onMsg func(*nats.Msg) (suspend bool)) ([]byte, error) {
	for {
		select {
		case <-k.signal:
			if k.deliver(onMsg) {
				return nil, ErrSuspended
			}
			continue
		case <-k.done:
			if k.deliver(onMsg) {
				return nil, ErrSuspended
			}
		case <-ctx.Done():
			k.finish(nil, nil)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, proto.ErrTimeout
			}
			return nil, ErrCanceled
		}
		break
	}
	if k.err != nil {
		return nil, k.err
	}
	return k.data, nil
}

// ErrSuspended is returned by WaitWith when its onMsg suspended the call.
var ErrSuspended = errors.New("bus: call suspended")

// deliver hands the queued messages to onMsg (nil: drops them) and reports
// whether onMsg suspended the call; the messages after that one are kept.
func (k *Call) deliver(onMsg func(*nats.Msg) bool) bool {
	k.mu.Lock()
	msgs := k.msgs
	k.msgs = nil
	k.mu.Unlock()
	if onMsg == nil {
		return false
	}
	for i, m := range msgs {
		if onMsg(m) {
			k.mu.Lock()
			k.msgs = append(msgs[i+1:len(msgs):len(msgs)], k.msgs...)
			k.mu.Unlock()
			if len(msgs) > i+1 {
				select {
				case k.signal <- struct{}{}:
				default:
				}
			}
			return true
		}
	}
	return false
}

// queue keeps an upstream message for WaitWith.
func (k *Call) queue(m *nats.Msg) {
	k.mu.Lock()
	k.msgs = append(k.msgs, m)
	k.mu.Unlock()
	select {
	case k.signal <- struct{}{}:
	default:
	}
}

func (k *Call) finish(data []byte, err *proto.Error) {
	k.once.Do(func() {
		k.mu.Lock()
		k.data, k.err = data, err
		k.mu.Unlock()
		close(k.done)
	})
}

// Request publishes data to subject and waits for the reply.
func (c *Caller) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	k := c.New()
	defer k.Close()
	if err := c.nc.PublishRequest(subject, k.reply, data); err != nil {
		return nil, err
	}
	return k.Wait(ctx)
}

// Pending returns the calls waiting for their reply now.
func (c *Caller) Pending() []*Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Call, 0, len(c.pending))
	for _, k := range c.pending {
		out = append(out, k)
	}
	return out
}

// Fail fails the call with err, unless it already ended.
func (k *Call) Fail(err *proto.Error) { k.finish(nil, err) }

// Done reports whether the call ended (replied, failed or given up).
func (k *Call) Done() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// Direct reports whether the call was sent to its worker by the caller
// itself ([Call.PlaceDirect]).
func (k *Call) Direct() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.direct
}

// FailWorker fails every call placed on worker with err.
func (c *Caller) FailWorker(worker string, err *proto.Error) {
	c.mu.Lock()
	var hit []*Call
	for _, k := range c.pending {
		k.mu.Lock()
		if k.worker == worker {
			hit = append(hit, k)
		}
		k.mu.Unlock()
	}
	c.mu.Unlock()
	for _, k := range hit {
		k.finish(nil, err)
	}
}

// FailRouter fails with err every call sent to router by name that the
// router has not placed yet (no placement note, no reply): the router went
// away holding it, so it ran nowhere.
func (c *Caller) FailRouter(router string, err *proto.Error) {
	c.mu.Lock()
	var hit []*Call
	for _, k := range c.pending {
		k.mu.Lock()
		if k.router == router && k.worker == "" && !k.direct {
			hit = append(hit, k)
		}
		k.mu.Unlock()
	}
	c.mu.Unlock()
	for _, k := range hit {
		k.finish(nil, err)
	}
}

// ErrRouterLost fails a call whose router went away before placing it: it
// ran nowhere, and may be sent again.
var ErrRouterLost = &proto.Error{Code: proto.CodeNotDelivered, Msg: "the router taking the call went away before it placed it"}

// ErrRouterSilent fails a call whose router stopped heartbeating before
// placing it: it may be late rather than gone, and place the call yet, so
// the call is not sent again; the client decides (it may have run).
var ErrRouterSilent = &proto.Error{Code: proto.CodeWorkerLost, Msg: "the router holding the call stopped answering before it placed it (the call may still run)"}

// onMsg runs on the subscription's goroutine: it only copies and signals.
func (c *Caller) onMsg(m *nats.Msg) {
	id, err := strconv.ParseUint(proto.LastToken(m.Subject), 10, 64)
	if err != nil {
		return
	}
	c.mu.Lock()
	k := c.pending[id]
	c.mu.Unlock()
	if k == nil {
		return
	}
	if m.Header != nil {
		if hop.Traced(m.Header) {
			k.mu.Lock()
			k.hdr = m.Header // the stamps ride on the final (or last) message
			k.mu.Unlock()
		}
		if w := m.Header.Get(proto.HdrPlaced); w != "" {
			k.placed(w, m.Data)
			return
		}
		if ch := m.Header.Get(proto.HdrChunk); ch != "" {
			k.chunk(ch, m.Data)
			return
		}
		if m.Header.Get(proto.HdrMessage) != "" {
			k.queue(m)
			return
		}
		if m.Header.Get("Status") == "503" { // no responders
			k.noResponders()
			return
		}
	}
	k.finish(m.Data, nil)
}

// noResponders fails the call on NATS's no-responders status: for a call
// sent to a worker directly, that worker is gone and the call did not run.
func (k *Call) noResponders() {
	k.mu.Lock()
	direct, router, what := k.direct, k.router, k.what
	k.mu.Unlock()
	if router != "" {
		if k.c.RouterMissing != nil {
			k.c.RouterMissing(router)
		}
		k.finish(nil, ErrRouterLost)
		return
	}
	if direct {
		// No worker id: it is an operator's name for a host, and the
		// client sees this error once the edge stops placing the call.
		k.finish(nil, &proto.Error{Code: proto.CodeNotDelivered, Msg: "the worker placed for the call went away before it started"})
		return
	}
	if what == "" {
		k.finish(nil, proto.Errorf(proto.CodeUnavailable, "no responder on the bus for this request"))
		return
	}
	k.finish(nil, proto.Errorf(proto.CodeUnavailable, "no router is running to take %s (no responder on the bus)", what))
}

func (k *Call) placed(worker string, grant []byte) {
	k.mu.Lock()
	k.worker = worker
	if len(grant) > 0 {
		k.grant = append([]byte(nil), grant...)
	}
	k.mu.Unlock()
	if k.c.Gone != nil && k.c.Gone(worker) {
		k.finish(nil, &proto.Error{Code: proto.CodeWorkerLost, Msg: "the worker placed for the call went away before it started"})
	}
}

func (k *Call) chunk(h string, data []byte) {
	idx, n, ok := parseChunk(h)
	k.mu.Lock()
	if !ok || idx != k.parts {
		k.mu.Unlock()
		k.finish(nil, proto.Errorf(proto.CodeBadEnvelope, "chunked reply out of order (%s)", h))
		return
	}
	if len(k.data)+len(data) > k.c.maxResult {
		k.mu.Unlock()
		k.finish(nil, proto.Errorf(proto.CodePayloadTooLarge, "reply exceeds %d bytes", k.c.maxResult))
		return
	}
	if k.data == nil {
		// n comes off the wire: len(data)*n may overflow, so compare by division.
		size := k.c.maxResult
		if len(data) == 0 || n <= size/len(data) {
			size = len(data) * n
		}
		k.data = make([]byte, 0, size)
	}
	k.data = append(k.data, data...)
	k.parts++
	complete := k.parts == n
	data = k.data
	k.mu.Unlock()
	if complete {
		k.finish(data, nil)
	}
}
