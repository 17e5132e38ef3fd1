package bus

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// WorkerInfo is one live worker as the presence registry sees it.
type WorkerInfo struct {
	ID       string
	Boot     int64
	InFlight int32
	// Draining: the worker is stopping (proto.Heartbeat.Draining). It is
	// alive, so its calls in flight stand, but every upstream on it
	// reads as down (Err "worker draining"): nothing new is placed there.
	Draining bool
	// Reconnects is the worker's count of NATS reconnects
	// (proto.Heartbeat.Reconnects).
	Reconnects uint64
	Upstreams  map[string]proto.UpstreamState
}

// View is an immutable snapshot of the live workers.
type View struct {
	// Workers maps worker id to its info.
	Workers map[string]*WorkerInfo
	// ByUpstream lists, per upstream, the live workers that serve it, sorted
	// by id (whether the upstream is up on them is in WorkerInfo.Upstreams).
	ByUpstream map[string][]*WorkerInfo
}

// Up reports whether at least one live worker reports upstream as up.
func (v *View) Up(upstream string) bool {
	for _, w := range v.ByUpstream[upstream] {
		if w.Upstreams[upstream].Up {
			return true
		}
	}
	return false
}

// Presence tracks live workers from their heartbeats on
// switchyard.v1.evt.worker.*. A worker is gone after a goodbye heartbeat or
// after [proto.HeartbeatMisses] intervals of silence. Readers take
// immutable snapshots with [Presence.View]; OnChange and OnGone are called
// from one goroutine, never concurrently.
type Presence struct {
	nc  *nats.Conn
	log *slog.Logger
	// OnChange is called after the view changed (worker joined, left, or
	// an upstream's state flipped).
	OnChange func(*View)
	// OnGone is called when a worker leaves.
	OnGone func(worker string)
	// OnReconnect, if set, is called (on Run's goroutine: it must not
	// block) when a live worker's heartbeat says it reconnected to NATS
	// since its last one: messages sent to it meanwhile may be lost.
	OnReconnect func(worker string)

	view atomic.Pointer[View]

	workers  map[string]*entry // owned by the Run goroutine
	gone     sync.Map          // worker id -> time.Time it left; read by any goroutine
	byes     sync.Map          // worker id -> struct{}: it left saying Bye (read by any goroutine)
	recon    sync.Map          // worker id -> time.Time its heartbeat last showed a NATS reconnect
	inbox    chan *nats.Msg
	suspect  chan string
	interval time.Duration
	subject  func(string) bool // matches proto.SubjEvtWorkerAll
}

type entry struct {
	info     *WorkerInfo
	deadline time.Time
	interval time.Duration // the worker's heartbeat interval
}

// NewPresence returns a registry on nc. Call Run to start it.
func NewPresence(nc *nats.Conn, log *slog.Logger) *Presence {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Presence{nc: nc, log: log, workers: map[string]*entry{}, inbox: make(chan *nats.Msg, 1024), suspect: make(chan string, 64), interval: 100 * time.Millisecond,
		subject: Matcher(proto.SubjEvtWorkerAll)}
	p.view.Store(&View{Workers: map[string]*WorkerInfo{}, ByUpstream: map[string][]*WorkerInfo{}})
	return p
}

// View returns the current snapshot. Safe for concurrent use.
func (p *Presence) View() *View { return p.view.Load() }

// Alive reports whether worker is live.
func (p *Presence) Alive(worker string) bool { _, ok := p.View().Workers[worker]; return ok }

// Suspect drops worker at once, as if it had said goodbye: the caller saw
// proof that it is gone (NATS found no subscription for it). A heartbeat
// brings it back. Never blocks; a full queue drops the hint.
func (p *Presence) Suspect(worker string) {
	select {
	case p.suspect <- worker:
	default:
	}
}

// Draining reports whether worker is live and stopping: a call already
// placed on it stands, a new one goes elsewhere.
func (p *Presence) Draining(worker string) bool {
	w := p.View().Workers[worker]
	return w != nil && w.Draining
}

// Gone reports whether worker left (goodbye or silence) within the last
// minute and has not come back. Unlike !Alive it is false for a worker this
// registry has not heard of yet, so a call placed by a router that saw a
// newer worker first is not failed by mistake.
// SaidBye reports whether worker's last departure was a Bye (a graceful
// stop, after it answered every call it took) rather than silence or a
// restart.
func (p *Presence) SaidBye(worker string) bool {
	_, ok := p.byes.Load(worker)
	return ok
}

// ReconnectedAt returns when worker's heartbeats last showed a NATS
// reconnect of its (zero if never): a reply it sent before then may have
// been lost.
func (p *Presence) ReconnectedAt(worker string) time.Time {
	if t, ok := p.recon.Load(worker); ok {
		return t.(time.Time)
	}
	return time.Time{}
}

func (p *Presence) Gone(worker string) bool {
	t, ok := p.gone.Load(worker)
	return ok && time.Since(t.(time.Time)) < time.Minute
}

// Start subscribes and asks every worker to announce itself. Heartbeats are
// processed by Run.
func (p *Presence) Start() error {
	if _, err := p.nc.ChanSubscribe(proto.SubjEvtWorkerAll, p.inbox); err != nil {
		return err
	}
	return p.nc.Publish(proto.SubjEvtPresence, nil)
}

// Run applies heartbeats and expires silent workers until ctx ends.
func (p *Presence) Run(ctx context.Context) error {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	// While this connection is down, silence says nothing about the
	// workers: none is expired, and when it is back every worker gets a
	// fresh deadline and is asked to announce itself at once (else the
	// calls placed right after a reconnect would fail as "worker gone"
	// until the next heartbeats).
	reconnected := p.nc.StatusChanged(nats.CONNECTED)
	defer p.nc.RemoveStatusListener(reconnected)
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-p.inbox:
			p.apply(m)
		case w := <-p.suspect:
			if _, ok := p.workers[w]; ok {
				delete(p.workers, w)
				p.log.Warn("worker unreachable, dropped", proto.LogWorker, w)
				p.publish(w)
			}
		case <-reconnected:
			p.refresh(time.Now())
			_ = p.nc.Publish(proto.SubjEvtPresence, nil)
		case now := <-t.C:
			if p.nc.IsConnected() {
				p.expire(now)
			}
		}
	}
}

// refresh gives every known worker a new deadline of HeartbeatMisses of
// its intervals from now.
func (p *Presence) refresh(now time.Time) {
	for _, e := range p.workers {
		e.deadline = now.Add(e.interval * proto.HeartbeatMisses)
	}
}

func (p *Presence) apply(m *nats.Msg) {
	if !p.subject(m.Subject) {
		return // not published on a heartbeat subject (a JetStream delivery: see Guard)
	}
	var hb proto.Heartbeat
	// A heartbeat speaks for the worker its subject names, and no other.
	if err := proto.Unmarshal(m.Data, &hb); err != nil || !proto.ValidSlug(hb.Worker) || proto.LastToken(m.Subject) != hb.Worker {
		p.log.Warn("bad heartbeat", proto.LogSubject, m.Subject, proto.LogErr, err)
		return
	}
	if hb.Bye {
		if _, ok := p.workers[hb.Worker]; ok {
			delete(p.workers, hb.Worker)
			p.byes.Store(hb.Worker, struct{}{})
			p.publish(hb.Worker)
		}
		return
	}
	info := &WorkerInfo{ID: hb.Worker, Boot: hb.Boot, InFlight: hb.InFlight, Draining: hb.Draining, Reconnects: hb.Reconnects,
		Upstreams: make(map[string]proto.UpstreamState, len(hb.Upstreams))}
	for _, u := range hb.Upstreams {
		if hb.Draining { // alive, but no new call goes there
			u.Up, u.Err = false, "worker draining"
		}
		info.Upstreams[u.Name] = u
	}
	iv := time.Duration(hb.IntervalMs) * time.Millisecond
	if iv <= 0 {
		iv = 500 * time.Millisecond
	}
	old := p.workers[hb.Worker]
	if old == nil {
		p.gone.Delete(hb.Worker)
		p.byes.Delete(hb.Worker)
	}
	p.workers[hb.Worker] = &entry{info: info, deadline: time.Now().Add(iv * proto.HeartbeatMisses), interval: iv}
	gone := ""
	if old != nil && old.info.Boot != hb.Boot {
		gone = hb.Worker // restarted: its old sessions and calls are gone
	} else if old != nil && old.info.Reconnects != hb.Reconnects {
		p.recon.Store(hb.Worker, time.Now())
		if p.OnReconnect != nil {
			p.OnReconnect(hb.Worker)
		}
	}
	if old == nil || gone != "" || !sameUpstreams(old.info, info) {
		// Restarted, not gone: new calls may land on it, so it is never
		// marked in p.gone (not even while OnGone runs).
		p.notify(gone)
	} else {
		p.publishQuiet()
	}
}

func sameUpstreams(a, b *WorkerInfo) bool {
	if a.Draining != b.Draining || len(a.Upstreams) != len(b.Upstreams) {
		return false
	}
	for n, s := range a.Upstreams {
		if b.Upstreams[n].Up != s.Up {
			return false
		}
		if _, ok := b.Upstreams[n]; !ok {
			return false
		}
	}
	return true
}

func (p *Presence) expire(now time.Time) {
	for id, e := range p.workers {
		if now.After(e.deadline) {
			delete(p.workers, id)
			p.log.Warn("worker silent, dropped", proto.LogWorker, id)
			p.byes.Delete(id)
			p.publish(id)
		}
	}
}

// publishQuiet refreshes the snapshot (load figures) without callbacks.
func (p *Presence) publishQuiet() { p.view.Store(p.build()) }

func (p *Presence) publish(gone string) {
	if gone != "" {
		p.gone.Store(gone, time.Now())
	}
	p.notify(gone)
}

// notify stores a new snapshot and runs the callbacks; OnGone(gone) if
// gone is set.
func (p *Presence) notify(gone string) {
	v := p.build()
	p.view.Store(v)
	if gone != "" && p.OnGone != nil {
		p.OnGone(gone)
	}
	if p.OnChange != nil {
		p.OnChange(v)
	}
}

func (p *Presence) build() *View {
	v := &View{Workers: make(map[string]*WorkerInfo, len(p.workers)), ByUpstream: map[string][]*WorkerInfo{}}
	for id, e := range p.workers {
		v.Workers[id] = e.info
		for u := range e.info.Upstreams {
			v.ByUpstream[u] = append(v.ByUpstream[u], e.info)
		}
	}
	for _, ws := range v.ByUpstream {
		slices.SortFunc(ws, func(a, b *WorkerInfo) int { return compareStr(a.ID, b.ID) })
	}
	return v
}

func compareStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
