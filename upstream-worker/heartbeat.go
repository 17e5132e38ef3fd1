package worker

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// kickHeartbeat asks for a heartbeat now (state change, presence query).
// It never blocks.
func (s *Service) kickHeartbeat() {
	select {
	case s.hbKick <- struct{}{}:
	default:
	}
}

// minKickGap is the least time between two heartbeats a kick asks for:
// kicks coming faster (anyone who may publish a presence query can send
// thousands) are coalesced into one heartbeat at the end of the gap.
const minKickGap = 50 * time.Millisecond

// heartbeats publishes a heartbeat every HeartbeatInterval and on kicks
// (at most one per minKickGap), until ctx ends.
func (s *Service) heartbeats(ctx context.Context) {
	t := time.NewTicker(s.cfg.HeartbeatInterval)
	defer t.Stop()
	// After a reconnect, at once: edges learn from Reconnects that
	// messages to this worker may have been lost meanwhile.
	back := s.nc.StatusChanged(nats.CONNECTED)
	defer s.nc.RemoveStatusListener(back)
	s.publishHeartbeat(false)
	last := time.Now()
	var held <-chan time.Time // a kick waiting out minKickGap
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-back:
		case <-held:
			held = nil
		case <-s.hbKick:
			if held != nil {
				continue // already due
			}
			if wait := minKickGap - time.Since(last); wait > 0 {
				held = time.After(wait)
				continue
			}
		}
		s.publishHeartbeat(false)
		last = time.Now()
	}
}

// publishHeartbeat publishes a proto.Heartbeat on
// switchyard.v1.evt.worker.<id>.
func (s *Service) publishHeartbeat(bye bool) {
	data, err := proto.Marshal(s.heartbeat(bye))
	if err == nil {
		err = s.nc.Publish(s.hbSubj, data)
	}
	if err != nil {
		s.log.Warn("heartbeat failed", proto.LogErr, err)
	}
}

// heartbeat lists every upstream the worker is configured to serve (or,
// serving all, every one in the catalog); Up only once connected and
// catalogued.
func (s *Service) heartbeat(bye bool) *proto.Heartbeat {
	actors := s.mgr.all()
	names := s.cfg.Upstreams
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(actors))
	}
	hb := &proto.Heartbeat{
		Worker:     s.cfg.ID,
		Boot:       s.boot,
		IntervalMs: int32(s.cfg.HeartbeatInterval.Milliseconds()),
		InFlight:   int32(len(s.sem)),
		Reconnects: s.nc.Stats().Reconnects,
		Upstreams:  make([]proto.UpstreamState, 0, len(names)),
		Bye:        bye,
		Draining:   !bye && s.stopping.Load(),
	}
	for _, n := range names {
		if u := actors[n]; u != nil {
			hb.Upstreams = append(hb.Upstreams, u.State())
		} else {
			hb.Upstreams = append(hb.Upstreams, proto.UpstreamState{Name: n, Err: "not in the catalog"})
		}
	}
	return hb
}
