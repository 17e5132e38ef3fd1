package edge

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// While a NATS connection is down (a NATS node restarting or stopping, a
// network cut, the server cutting a slow consumer), what is sent to its
// subscriptions is lost: the server keeps nothing for a client that is
// reconnecting. The edge's own connection loses replies; a worker's loses
// calls sent to it (when the cluster still routed them to its old node).
// Each time one of them is back, the edge settles the calls that may be
// affected instead of letting them wait out their timeout:
//
//   - a call placed on a worker: the worker is asked which of them it
//     still runs (proto.OpInFlight); those go on (their replies come).
//     Those it finished lately it answers again from the replies it keeps
//     (upstream-worker/keep.go): they complete as if nothing happened, or
//     fail with errReplyLost if that reply does not land within
//     resentWithin either. Those it never saw did not run: they are placed
//     again (as a call a router could not deliver) if between lostAfter
//     and replaceBefore old (younger, asked again later; older, or if the
//     worker is unsure, it could not keep every recent reply, they fail
//     with errReplyLost, as do all of a worker that does not answer);
//   - after the edge's own reconnect, a call not placed yet (no placement
//     note) is given until recheckWithin for its note or its reply (the
//     router may place it now); then every worker is asked about it, since
//     its note may be what was lost, and if none knows it, it fails with
//     errReplyLost too, or is placed again when it is sure that it ran
//     nowhere (settleUnplaced).
//
// A reply that arrives meanwhile wins: a call ends once.

// recheckWithin bounds how long after a reconnect a call whose reply may
// be lost is answered.
const recheckWithin = 1500 * time.Millisecond

// resentWithin is how long a reply a worker sent again has to land.
const resentWithin = time.Second

// workerRecheckAfter is how long after a worker's reconnect the edge asks
// about the calls it had placed on it before: long enough for any of them
// still on its way to have reached the worker, so that one the worker
// does not know was lost.
const workerRecheckAfter = time.Second

// flushWait is how long after its reconnect the edge waits before asking
// workers about its calls.
const flushWait = 300 * time.Millisecond

// errReplyLost fails a call whose reply may have been lost in a bus
// interruption: the client may retry it, knowing it may have run.
var errReplyLost = &proto.Error{Code: proto.CodeWorkerLost, Msg: "the gateway's bus was interrupted while the call ran: its result was lost (the call may have completed)"}

// errLostOnTheWay sends a call the worker never received to be placed
// again (roundTrip's attempts, as for a router's no-responder).
var errLostOnTheWay = &proto.Error{Code: proto.CodeNotDelivered, Msg: "the call was lost on its way to the worker in a bus interruption"}

// recheckOnReconnect runs recheckPending each time nc connects again, until
// ctx ends.
func (s *Service) recheckOnReconnect(ctx context.Context) {
	ch := s.nc.StatusChanged(nats.CONNECTED)
	defer s.nc.RemoveStatusListener(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			s.lastGap.Store(time.Now().UnixNano())
			go s.recheckPending(ctx)
		}
	}
}

// sweepEvery is how often the edge looks for calls stuck in a gap it did
// not see (a route to a NATS node that was cut off still counted as alive,
// so a call or note went into the cut): a call pending at two sweeps in a
// row, 2 to 4 s, is checked.
const sweepEvery = 2 * time.Second

// errUnplaced fails a call no router placed or answered within two sweeps:
// it was sent into a bus interruption the edge's own connection did not
// see, or its router is stalled. It may still run, if that router is only
// late.
var errUnplaced = &proto.Error{Code: proto.CodeWorkerLost, Msg: "no router placed the call in time (the bus may have lost it; the call may still run)"}

// sweepStuck checks, every sweepEvery until ctx ends, the calls pending at
// the previous sweep too:
//
//   - one no router has placed (no placement note, no reply): every worker
//     is asked about it (its note may be what was lost); if none knows it,
//     it is placed again when it is sure that it ran nowhere
//     (settleUnplaced), else it fails with errUnplaced (the calls of a
//     router known to go silent fail sooner: routers' OnGone);
//   - those placed on a worker are asked about (settle, in sweep mode):
//     one the worker never saw is placed again, and a reply it kept is
//     sent again; the calls it runs go on, however long.
func (s *Service) sweepStuck(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	prev := map[*bus.Call]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur := map[*bus.Call]bool{}
		byWorker := map[string][]*bus.Call{}
		var unplaced []*bus.Call
		for _, k := range s.caller.Pending() {
			if k.Done() {
				continue
			}
			cur[k] = true
			if !prev[k] {
				continue
			}
			if w := k.Worker(); w != "" {
				byWorker[w] = append(byWorker[w], k)
				continue
			}
			unplaced = append(unplaced, k)
		}
		if len(unplaced) > 0 {
			go s.settleUnplaced(ctx, unplaced, time.Now().Add(recheckWithin), errUnplaced)
		}
		for w, ks := range byWorker {
			go s.settle(ctx, w, ks, time.Now().Add(recheckWithin), onSweep)
		}
		prev = cur
	}
}

// How settle treats a worker's silence.
type settleMode int

const (
	// afterGap: a known interruption; a worker that does not answer has
	// lost the calls' replies.
	afterGap settleMode = iota
	// onSweep: a routine check; a worker that does not answer is left to
	// its heartbeats.
	onSweep
)

// recheckWorker settles the calls placed on worker before it reconnected
// (presence's OnReconnect), workerRecheckAfter later.
func (s *Service) recheckWorker(ctx context.Context, worker string) {
	var ks []*bus.Call
	for _, k := range s.caller.Pending() {
		if k.Worker() == worker {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(workerRecheckAfter):
	}
	live := ks[:0]
	for _, k := range ks {
		if !k.Done() {
			live = append(live, k)
		}
	}
	if len(live) > 0 {
		s.settle(ctx, worker, live, time.Now().Add(recheckWithin), afterGap)
	}
}

// recheckPending settles the pending calls whose replies may have been
// lost while the edge's connection was down (see above).
func (s *Service) recheckPending(ctx context.Context) {
	byWorker := map[string][]*bus.Call{}
	var unplaced []*bus.Call
	for _, k := range s.caller.Pending() {
		if w := k.Worker(); w != "" {
			byWorker[w] = append(byWorker[w], k)
		} else {
			unplaced = append(unplaced, k)
		}
	}
	if len(byWorker) == 0 && len(unplaced) == 0 {
		return
	}
	s.log.Info("bus connection back: checking the calls in flight", "placed_on", len(byWorker), "unplaced", len(unplaced))
	deadline := time.Now().Add(recheckWithin)
	// What the connection buffered while down is sent first: let it
	// reach the workers before they are asked what they saw.
	select {
	case <-ctx.Done():
		return
	case <-time.After(flushWait):
	}
	done := make(chan struct{}, len(byWorker))
	for w, ks := range byWorker {
		go func() {
			defer func() { done <- struct{}{} }()
			s.settle(ctx, w, ks, deadline, afterGap)
		}()
	}
	for range byWorker {
		<-done
	}
	if len(unplaced) > 0 {
		// Given until the deadline for their notes or replies; then every
		// worker is asked about those still unplaced, since the note may
		// be what was lost.
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(deadline) - askEvery):
		}
		s.settleUnplaced(ctx, unplaced, time.Now().Add(askEvery), errReplyLost)
	}
}

// settleUnplaced asks every live worker about ks, calls with no placement
// note (it may have been lost with the reply): one a worker runs goes on,
// one whose kept reply a worker sent again gets resentWithin to land; the
// others, which no worker knows, fail with fail, unless it is sure that
// they ran nowhere and never will: every worker answered (none unsure),
// the call is between lostAfter and replaceBefore old, the router it went
// to has said since that it had nothing in hand, and no worker went
// (routerHeard). Those
// are placed again (errLostOnTheWay): the call was lost before the
// router, or the router's forward was lost with a connection (a stalled
// route gives up what it held within ~3 s).
func (s *Service) settleUnplaced(ctx context.Context, ks []*bus.Call, deadline time.Time, fail *proto.Error) {
	live := ks[:0:0]
	for _, k := range ks {
		if !k.Done() && k.Worker() == "" {
			live = append(live, k)
		}
	}
	if len(live) == 0 {
		return
	}
	type answer struct {
		a  inFlightAnswer
		ok bool
	}
	workers := s.presence.View().Workers
	answers := make(chan answer, len(workers))
	for w := range workers {
		go func() {
			a, ok := s.askInFlight(ctx, w, live, deadline)
			answers <- answer{a, ok}
		}()
	}
	known, resent := map[uint64]bool{}, map[uint64]bool{}
	sure := true // every worker answered, none unsure or with a backlog
	for range workers {
		r := <-answers
		if !r.ok || r.a.unsure || r.a.backlog {
			sure = false
		}
		if !r.ok {
			continue
		}
		for id := range r.a.running {
			known[id] = true
		}
		for id := range r.a.resent {
			known[id], resent[id] = true, true
		}
	}
	var waiting []*bus.Call
	failed, again := 0, 0
	for _, k := range live {
		switch {
		case k.Done() || k.Worker() != "":
		case resent[k.ID]:
			waiting = append(waiting, k)
		case known[k.ID]:
		case k.Age() < lostAfter:
			// Its forward may still be on its way, or its worker was
			// moving too: asked again at a later sweep.
		case sure && k.Age() < replaceBefore && s.routerHeard(k):
			k.Fail(errLostOnTheWay)
			again++
		default:
			k.Fail(fail)
			failed++
		}
	}
	failed += awaitResent(ctx, waiting)
	if again > 0 {
		s.log.Info("calls no router placed sent again: lost on their way", "calls", again)
	}
	if failed > 0 {
		s.log.Warn("calls no router placed, or whose note was lost, failed", "calls", failed)
	}
}

// forwardSettled reports whether the message that took placed call k to
// its worker can no longer be on its way: the edge sent it itself (a
// route grant: the edge's own buffer went out at its reconnect, before it
// asks), or the router that placed it has said, a second or more after k
// was sent, that it had nothing queued or in hand (routerHeard). A router
// whose connection broke between sending k's placement note and its
// forward sends the forward when it reconnects, maybe seconds later: k
// must not be placed again before. A call placed through the routers'
// queue (no router by name) is never sure.
func (s *Service) forwardSettled(k *bus.Call) bool {
	if k.Direct() {
		return true
	}
	r := k.Router()
	return r != "" && s.routers.ClearAfter(r, k.Born().Add(time.Second))
}

// routerHeard reports whether the router k went to by name is live and
// has said, in a heartbeat a second or more after k was sent, that it had
// no call queued or in hand: anything of k it received has been placed
// (its forward gone out before that heartbeat) or answered
// (bus.Routers.ClearAfter). And no worker went or restarted since k was
// sent: one that held k and is gone cannot be asked. A call sent on the
// routers' queue (no router by name) is never sure.
func (s *Service) routerHeard(k *bus.Call) bool {
	r := k.Router()
	return r != "" && s.routers.ClearAfter(r, k.Born().Add(time.Second)) &&
		time.Unix(0, s.workerGoneAt.Load()).Before(k.Born())
}

// awaitResent gives the calls whose kept reply a worker sent again
// resentWithin to land, then fails those still waiting with errReplyLost;
// it returns how many it failed (none if ctx ends first).
func awaitResent(ctx context.Context, waiting []*bus.Call) int {
	if len(waiting) == 0 {
		return 0
	}
	select {
	case <-ctx.Done():
		return 0
	case <-time.After(resentWithin):
	}
	failed := 0
	for _, k := range waiting {
		if !k.Done() {
			k.Fail(errReplyLost)
			failed++
		}
	}
	return failed
}

// settle asks worker about ks and ends those whose reply will not come
// (see above); the question is bounded by deadline. A call the worker does
// not know while calls wait unread in its subscriptions (Backlog) is left
// for the next sweep: it may be among them.
func (s *Service) settle(ctx context.Context, worker string, ks []*bus.Call, deadline time.Time, mode settleMode) {
	a, ok := s.askInFlight(ctx, worker, ks, deadline)
	if !ok && mode == onSweep {
		return
	}
	if !ok {
		// After a gap, a worker that does not answer may be moving too:
		// its young calls are asked about again at a later sweep.
		old := ks[:0:0]
		for _, k := range ks {
			if k.Age() >= lostAfter {
				old = append(old, k)
			}
		}
		ks = old
	}
	lost, again := 0, 0
	var waiting []*bus.Call
	for _, k := range ks {
		switch {
		case ok && a.running[k.ID]:
		case ok && a.resent[k.ID]:
			waiting = append(waiting, k)
		case ok && a.backlog:
		case ok && !a.unsure && k.Age() < lostAfter:
			// It may still be on its way (a stalled route): asked again
			// at a later sweep.
		case ok && !a.unsure && k.Age() < replaceBefore && s.forwardSettled(k):
			if !k.Done() {
				k.Fail(errLostOnTheWay)
				again++
			}
		default:
			if !k.Done() {
				k.Fail(errReplyLost)
				lost++
			}
		}
	}
	lost += awaitResent(ctx, waiting)
	if again > 0 {
		s.log.Info("calls lost on their way to a worker in a bus interruption placed again", proto.LogWorker, worker, "calls", again)
	}
	if lost > 0 {
		s.log.Warn("calls whose replies were lost in a bus interruption failed", proto.LogWorker, worker, "calls", lost)
	}
}

// askEvery is how long one in_flight question waits for its answer
// (longer than a worker's backlogWait).
const askEvery = 700 * time.Millisecond

// A call a worker says it never saw is placed again only between these
// ages. Younger, it may still be on its way: a stalled route or
// connection is given up (and what it held discarded) within ~3 s, as
// NATS nodes and roles ping every second. Older, the worker may have run
// it and forgotten its reply (it keeps replies proto.ReplyKeepMs): it
// fails, "may have run".
const (
	lostAfter     = 5 * time.Second
	replaceBefore = proto.ReplyKeepMs*time.Millisecond - 2*time.Second
)

// inFlightAnswer is a worker's answer to an in_flight question, by call id.
type inFlightAnswer struct {
	running, resent map[uint64]bool
	unsure, backlog bool
}

// askInFlight asks worker which of ks it still runs, which it finished and
// has just answered again, and whether it is sure about the others; false
// if it does not answer by deadline (it is gone or cut off too).
func (s *Service) askInFlight(ctx context.Context, worker string, ks []*bus.Call, deadline time.Time) (inFlightAnswer, bool) {
	q := proto.InFlight{Calls: make([]proto.Cancel, 0, len(ks))}
	for _, k := range ks {
		from := k.From
		if from == "" {
			from = s.cfg.ID
		}
		q.Calls = append(q.Calls, proto.Cancel{Edge: from, ID: k.ID})
	}
	data, err := proto.Marshal(&q)
	if err != nil {
		return inFlightAnswer{}, false
	}
	subj, err := proto.AppendWorkerSubject(nil, worker, proto.OpInFlight)
	if err != nil {
		return inFlightAnswer{}, false
	}
	// Asked again every askEvery until deadline: the worker's own
	// connection may be moving too (a NATS node stopping moves every
	// client), and a question sent into that gap is lost.
	var m *nats.Msg
	for m == nil {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return inFlightAnswer{}, false
		}
		actx, cancel := context.WithTimeout(ctx, min(left, askEvery))
		m, err = s.nc.RequestWithContext(actx, string(subj), data)
		cancel()
		switch {
		case err == nil:
		case errors.Is(err, nats.ErrNoResponders):
			time.Sleep(50 * time.Millisecond) // not subscribed again yet
		case !errors.Is(err, context.DeadlineExceeded):
			return inFlightAnswer{}, false
		}
	}
	var a proto.InFlight
	if proto.Unmarshal(m.Data, &a) != nil {
		return inFlightAnswer{}, false
	}
	if wi := s.presence.View().Workers[worker]; wi != nil && a.Boot != 0 && wi.Boot != a.Boot {
		return inFlightAnswer{}, false // another process under that id: it knows nothing of ks
	}
	out := inFlightAnswer{running: make(map[uint64]bool, len(a.Calls)), resent: make(map[uint64]bool, len(a.Resent)), unsure: a.Unsure, backlog: a.Backlog}
	for _, c := range a.Calls {
		out.running[c.ID] = true
	}
	for _, c := range a.Resent {
		out.resent[c.ID] = true
	}
	// A reply the worker sent just before its answer may still be on its
	// way to the inbox: it wins if it lands now.
	time.Sleep(100 * time.Millisecond)
	return out, true
}
