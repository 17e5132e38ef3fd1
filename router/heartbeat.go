package router

import (
	"context"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// HeartbeatInterval is how often a router says it is alive
// (proto.RouterHeartbeat): edges count it gone after proto.HeartbeatMisses
// of them, and send the calls it held and had not placed to another
// router, so a router that dies costs its calls at most that long.
const HeartbeatInterval = 500 * time.Millisecond

// drainWait bounds how long a stopping router places the calls delivered
// to it before it says Bye.
const drainWait = 5 * time.Second

// beat asks the heartbeat loop to publish now (and flush), waiting at most
// a second for it to take the request.
func (s *Service) beat() {
	select {
	case s.beatNow <- struct{}{}:
	case <-time.After(time.Second):
	}
}

// heartbeat publishes the router's heartbeat every HeartbeatInterval until
// ctx ends, then its Bye (flushed), after which edges send it nothing.
func (s *Service) heartbeat(ctx context.Context) {
	subj, err := proto.EvtRouterSubject(s.cfg.ID)
	if err != nil {
		s.log.Error("router id is not a subject token: no heartbeat", proto.LogErr, err)
		return
	}
	hb := proto.RouterHeartbeat{Router: s.cfg.ID, Boot: time.Now().UnixNano(), IntervalMs: int32(HeartbeatInterval / time.Millisecond)}
	publish := func() {
		hb.Draining = s.draining.Load()
		hb.Backlog = s.backlog()
		if data, err := proto.Marshal(&hb); err == nil {
			_ = s.nc.Publish(subj, data)
		}
	}
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	publish()
	for {
		select {
		case <-ctx.Done():
			hb.Bye = true
			publish()
			_ = s.nc.FlushTimeout(time.Second)
			return
		case <-t.C:
			publish()
		case <-s.beatNow:
			publish()
			_ = s.nc.FlushTimeout(time.Second)
		}
	}
}

// backlog reports whether calls wait in the router's intake subscriptions
// or are being handled (proto.RouterHeartbeat.Backlog). The handler count
// is read on both sides of the pending counts, so a call moving from a
// queue to the handler is seen.
func (s *Service) backlog() bool {
	if s.handling.Load() > 0 {
		return true
	}
	if subs := s.intake.Load(); subs != nil {
		for _, sub := range *subs {
			if n, _, err := sub.Pending(); err == nil && n > 0 {
				return true
			}
		}
	}
	return s.handling.Load() > 0
}
