package edge

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// While the edge's NATS connection is down (a NATS node restarting, a
// network cut, or the server cutting a slow consumer), the replies, chunks
// and messages sent to its inbox are lost: the server does not keep them.
// Each time the connection is back the edge finds the calls whose replies
// may be among them and answers them within recheckWithin, instead of
// letting them wait out their timeout:
//
//   - a call placed on a worker: the worker is asked which of them it still
//     runs (proto.OpInFlight); those it runs go on (their replies come), the
//     others, and all of a worker that does not answer, fail with
//     errReplyLost: their reply is lost, and they may have run;
//   - a call not placed yet (no placement note) is given until
//     recheckWithin for its note or its reply (the router may place it
//     now); then it fails with errReplyLost too.
//
// A reply that arrives meanwhile wins: a call ends once.

// recheckWithin bounds how long after a reconnect a call whose reply may
// be lost is answered.
const recheckWithin = 1500 * time.Millisecond

// errReplyLost fails a call whose reply may have been lost in a bus
// interruption: the client may retry it, knowing it may have run.
var errReplyLost = &proto.Error{Code: proto.CodeWorkerLost, Msg: "the gateway's bus was interrupted while the call ran: its result was lost (the call may have completed)"}

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
			go s.recheckPending(ctx)
		}
	}
}

// recheckPending answers the pending calls whose replies may have been
// lost (see above).
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
	done := make(chan struct{}, len(byWorker))
	for w, ks := range byWorker {
		go func() {
			defer func() { done <- struct{}{} }()
			running := s.askInFlight(ctx, w, ks, deadline)
			lost := 0
			for _, k := range ks {
				if !running[k.ID] {
					k.Fail(errReplyLost)
					lost++
				}
			}
			if lost > 0 {
				s.log.Warn("calls whose replies were lost in a bus interruption failed", proto.LogWorker, w, "calls", lost)
			}
		}()
	}
	for range byWorker {
		<-done
	}
	if len(unplaced) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(deadline)):
		}
		for _, k := range unplaced {
			if k.Worker() == "" && !k.Done() {
				k.Fail(errReplyLost)
			}
		}
	}
}

// askInFlight asks worker which of ks it still runs, by call id; nil (none)
// if it does not answer by deadline (it is gone or cut off too).
func (s *Service) askInFlight(ctx context.Context, worker string, ks []*bus.Call, deadline time.Time) map[uint64]bool {
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
		return nil
	}
	subj, err := proto.AppendWorkerSubject(nil, worker, proto.OpInFlight)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	m, err := s.nc.RequestWithContext(ctx, string(subj), data)
	if err != nil {
		return nil
	}
	var a proto.InFlight
	if proto.Unmarshal(m.Data, &a) != nil {
		return nil
	}
	running := make(map[uint64]bool, len(a.Calls))
	for _, c := range a.Calls {
		running[c.ID] = true
	}
	// A reply the worker sent just before its answer may still be on its
	// way to the inbox: it wins if it lands now.
	time.Sleep(100 * time.Millisecond)
	return running
}
