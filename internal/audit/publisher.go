package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Publisher defaults.
const (
	DefaultBuffer       = 8192
	DefaultBufferBytes  = 64 << 20
	DefaultMaxPending   = 4096
	DefaultAckTimeout   = 5 * time.Second
	DefaultFlushTimeout = 2 * time.Second
)

// Publisher bounds. The buffer is allocated whole by NewPublisher, about
// 250 bytes per event (MaxBuffer: about 250 MB).
const (
	MaxBuffer      = 1_000_000
	MaxBufferBytes = 16 << 30
)

// Config configures a [Publisher]. The zero value is usable: defaults
// everywhere, no arguments or results recorded.
type Config struct {
	// Stream is the stream the Publisher publishes to (its name; the rest
	// is what tenancy-svc provisions: internal/provision).
	Stream StreamConfig
	// Buffer is how many events Record queues for publishing; when it is
	// full Record drops the event. 0 is DefaultBuffer; more than
	// MaxBuffer is MaxBuffer.
	Buffer int
	// BufferBytes bounds the bytes of Arguments and Result held by the
	// buffered events (the rest of an event is small and bounded by
	// Buffer). An event that would take the buffer past it is still
	// queued, with its Arguments and Result replaced by the JSON string
	// "[DROPPED: audit buffer full]" (Stats.TrimmedFull). 0 is
	// DefaultBufferBytes (64 MiB); more than MaxBufferBytes is
	// MaxBufferBytes.
	BufferBytes int64
	// MaxPending bounds the publishes awaiting the stream's ack; past it
	// publishing stalls (and the buffer fills). 0 is DefaultMaxPending.
	MaxPending int
	// AckTimeout is how long a publish waits for its ack before the event
	// counts as dropped. 0 is DefaultAckTimeout.
	AckTimeout time.Duration
	// FlushTimeout bounds how long Run, once stopping, keeps publishing
	// the buffered events and waiting for their acks. 0 is
	// DefaultFlushTimeout.
	FlushTimeout time.Duration
	// Redact are field paths (see [Redactor]) redacted from every
	// tenant's recorded arguments and results.
	Redact []string
	// Tenants holds the tenants that record arguments or results, and
	// their extra redact paths. A tenant not listed records neither.
	Tenants map[string]TenantPolicy
}

// TenantPolicy is one tenant's audit settings.
type TenantPolicy struct {
	// RecordArguments records each request's params.arguments (tools)
	// or arguments (prompts), redacted.
	RecordArguments bool
	// RecordResults records each result, redacted.
	RecordResults bool
	// Redact are field paths redacted in addition to Config.Redact.
	Redact []string
}

// Stats are a Publisher's counters since New. Counters only grow.
type Stats struct {
	// Recorded counts the events Record accepted into the buffer.
	Recorded uint64
	// Published counts the events the stream acknowledged.
	Published uint64
	// DroppedFull counts events Record dropped because the buffer was
	// full (the stream slow or unreachable).
	DroppedFull uint64
	// DroppedPublish counts events whose publish failed: no ack within
	// AckTimeout, no stream, disconnected beyond the reconnect buffer.
	DroppedPublish uint64
	// DroppedClosed counts events recorded after the Publisher stopped,
	// or still buffered when its flush timed out.
	DroppedClosed uint64
	// TrimmedFull counts events queued without their Arguments and
	// Result because those would have taken the buffer past BufferBytes.
	TrimmedFull uint64
	// TrimmedTooLarge counts the trims of Arguments or Result to
	// "[DROPPED: too large]" because the event would have exceeded
	// MaxEventBytes: Record trims an Arguments or Result bigger than that
	// on its own, the publish trims both of an event that still encodes
	// bigger (so one event can count twice).
	TrimmedTooLarge uint64
	// Buffered is the number of events waiting in the buffer now.
	Buffered int
	// BufferedBytes is the bytes of Arguments and Result the buffered
	// events hold now (at most BufferBytes, give or take a few markers).
	BufferedBytes int64
	// Pending is the number of publishes awaiting their ack now.
	Pending int
}

// Dropped is the total of the drop counters.
func (s Stats) Dropped() uint64 { return s.DroppedFull + s.DroppedPublish + s.DroppedClosed }

// StatsSource is what a metrics collector reads: a [Publisher]
// implements it. Read it at scrape time (prometheus CounterFunc /
// GaugeFunc); Stats is cheap (atomic loads) and safe for concurrent use.
type StatsSource interface {
	Stats() Stats
}

// Publisher publishes audit events to the audit stream without ever
// blocking or failing its caller. Record queues an event in a bounded
// buffer; Run publishes the buffer with asynchronous JetStream publishes
// and counts every event that did not make it ([Stats]).
//
// Record, Wants, SetPolicy and Stats are safe for concurrent use, before,
// during and after Run. A nil *Publisher is valid: Record does nothing
// and Wants reports false (audit disabled).
type Publisher struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	cfg  Config
	log  *slog.Logger
	ch   chan Event
	stop chan struct{} // closed by Close
	done chan struct{} // closed when Run returns

	policy atomic.Pointer[policySet]

	recorded, published, droppedFull, droppedPublish, droppedClosed atomic.Uint64
	trimmedFull, trimmedTooLarge                                    atomic.Uint64
	// bufBytes is the bytes of Arguments and Result of the events in ch
	// (payloadBytes): Record adds, whoever takes an event out subtracts.
	bufBytes atomic.Int64
	closed   atomic.Bool
	// drained is set once flush has published what it could: from then on
	// nothing reads ch, so whatever lands there counts as DroppedClosed
	// (discardBuffered), by flush or by the Record that put it there.
	drained   atomic.Bool
	running   atomic.Bool
	ensureNow chan struct{} // non-blocking poke: re-ensure the stream

	// afterClosedCheck, if set (tests, before any Record), runs in Record
	// between its closed check and its enqueue: the window a concurrent
	// flush can finish in.
	afterClosedCheck func()

	closeOnce sync.Once
}

// policySet is the compiled Config.Redact and Config.Tenants.
type policySet struct {
	global  *Redactor
	tenants map[string]tenantCompiled
}

type tenantCompiled struct {
	args, result bool
	redactor     *Redactor
}

// NewPublisher validates cfg (the redact paths) and returns a Publisher
// publishing on nc. It starts nothing: Run publishes. nc must not be nil;
// a nil log discards.
func NewPublisher(nc *nats.Conn, cfg Config, log *slog.Logger) (*Publisher, error) {
	if nc == nil {
		panic("audit: nil nats connection")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = DefaultBuffer
	}
	cfg.Buffer = min(cfg.Buffer, MaxBuffer)
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	cfg.BufferBytes = min(cfg.BufferBytes, MaxBufferBytes)
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.AckTimeout <= 0 {
		cfg.AckTimeout = DefaultAckTimeout
	}
	if cfg.FlushTimeout <= 0 {
		cfg.FlushTimeout = DefaultFlushTimeout
	}
	p := &Publisher{
		nc:        nc,
		cfg:       cfg,
		log:       log.With(proto.LogComponent, "audit"),
		ch:        make(chan Event, cfg.Buffer),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		ensureNow: make(chan struct{}, 1),
	}
	if err := p.SetPolicy(cfg.Redact, cfg.Tenants); err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(cfg.MaxPending),
		jetstream.WithPublishAsyncTimeout(cfg.AckTimeout),
		jetstream.WithPublishAsyncAckHandler(func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) {
			p.published.Add(1)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) {
			p.droppedPublish.Add(1)
			if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
				p.pokeEnsure()
			}
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("audit: jetstream: %w", err)
	}
	p.js = js
	return p, nil
}

// SetPolicy replaces the redact paths and the tenants' settings (a
// configuration reload); events recorded afterwards follow them. It
// returns the bad paths (see NewRedactor) and changes nothing then.
func (p *Publisher) SetPolicy(redact []string, tenants map[string]TenantPolicy) error {
	global, err := NewRedactor(redact)
	if err != nil {
		return err
	}
	ps := &policySet{global: global, tenants: make(map[string]tenantCompiled, len(tenants))}
	var errs []error
	for name, t := range tenants {
		r := global
		if len(t.Redact) > 0 {
			paths := append(append([]string(nil), redact...), t.Redact...)
			if r, err = NewRedactor(paths); err != nil {
				errs = append(errs, fmt.Errorf("tenant %s: %w", name, err))
				continue
			}
		}
		ps.tenants[name] = tenantCompiled{args: t.RecordArguments, result: t.RecordResults, redactor: r}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p.policy.Store(ps)
	return nil
}

// Wants reports whether tenant records arguments and results, so a
// caller copies them only when they will be kept.
func (p *Publisher) Wants(tenant string) (arguments, result bool) {
	if p == nil {
		return false, false
	}
	t := p.policy.Load().tenants[tenant]
	return t.args, t.result
}

// Record queues ev for publishing and returns at once; it never blocks.
// When the buffer is full, or the Publisher has stopped, the event is
// dropped and counted. Record copies ev, but takes ownership of the
// bytes of ev.Arguments and ev.Result: the caller must not modify them
// afterwards. Arguments and results of a tenant that does not record them
// are discarded at once; the others are redacted before publishing.
//
// Memory: an Arguments or Result bigger than MaxEventBytes could never be
// published, so Record replaces it at once by the JSON string
// "[DROPPED: too large]" (Stats.TrimmedTooLarge); an event whose
// Arguments and Result would take the buffer past Config.BufferBytes is
// queued with both replaced by "[DROPPED: audit buffer full]"
// (Stats.TrimmedFull). Either way the caller's bytes are not kept.
func (p *Publisher) Record(ev *Event) {
	if p == nil {
		return
	}
	if p.closed.Load() {
		p.droppedClosed.Add(1)
		return
	}
	if h := p.afterClosedCheck; h != nil {
		h()
	}
	e := *ev
	n := p.admit(&e)
	select {
	case p.ch <- e:
		p.recorded.Add(1)
		if p.drained.Load() {
			// flush finished before this send (the closed check above
			// passed just before Close): nobody will publish the event.
			p.discardBuffered()
		}
	default:
		p.bufBytes.Add(-n)
		p.droppedFull.Add(1)
	}
}

// Markers that replace Arguments and Result Record does not keep (JSON
// strings, like the redactor's "[REDACTED]"). Shared: nothing writes to
// an event's Arguments or Result in place.
var (
	droppedFullJSON     = []byte(`"[DROPPED: audit buffer full]"`)
	droppedTooLargeJSON = []byte(`"[DROPPED: too large]"`)
)

// admit applies the tenant's recording settings and the size bounds to
// e's Arguments and Result, and charges what remains to the buffer's
// byte budget; it returns the bytes charged (payloadBytes(e)).
func (p *Publisher) admit(e *Event) int64 {
	if e.Arguments == nil && e.Result == nil {
		return 0
	}
	t := p.policy.Load().tenants[e.Tenant]
	if !t.args {
		e.Arguments = nil
	}
	if !t.result {
		e.Result = nil
	}
	tooLarge := false
	if len(e.Arguments) > MaxEventBytes {
		e.Arguments, tooLarge = droppedTooLargeJSON, true
	}
	if len(e.Result) > MaxEventBytes {
		e.Result, tooLarge = droppedTooLargeJSON, true
	}
	if tooLarge {
		p.trimmedTooLarge.Add(1)
	}
	n := payloadBytes(e)
	if n == 0 {
		return 0
	}
	if p.bufBytes.Add(n) <= p.cfg.BufferBytes {
		return n
	}
	p.bufBytes.Add(-n)
	p.trimmedFull.Add(1)
	if e.Arguments != nil {
		e.Arguments = droppedFullJSON
	}
	if e.Result != nil {
		e.Result = droppedFullJSON
	}
	// The markers are charged too (a few bytes), so that taking the event
	// out subtracts payloadBytes whatever it holds.
	n = payloadBytes(e)
	p.bufBytes.Add(n)
	return n
}

// payloadBytes is what an event charges to the buffer's byte budget.
func payloadBytes(e *Event) int64 { return int64(len(e.Arguments) + len(e.Result)) }

// take is what a reader does with each event it receives from ch.
func (p *Publisher) take(e *Event) { p.bufBytes.Add(-payloadBytes(e)) }

// discardBuffered empties ch, counting its events as DroppedClosed. Safe
// to run concurrently with itself (each event is received once).
func (p *Publisher) discardBuffered() {
	for {
		select {
		case ev := <-p.ch:
			p.take(&ev)
			p.droppedClosed.Add(1)
		default:
			return
		}
	}
}

// enqueueWait is Record that waits for room (benchmarks measure the
// sustained rate with it). It charges the byte budget but does not
// enforce it.
func (p *Publisher) enqueueWait(ev *Event) {
	p.bufBytes.Add(payloadBytes(ev))
	p.ch <- *ev
	p.recorded.Add(1)
}

// Stats returns the counters. Safe for concurrent use; a nil Publisher
// has zero stats.
func (p *Publisher) Stats() Stats {
	if p == nil {
		return Stats{}
	}
	return Stats{
		Recorded:        p.recorded.Load(),
		Published:       p.published.Load(),
		DroppedFull:     p.droppedFull.Load(),
		DroppedPublish:  p.droppedPublish.Load(),
		DroppedClosed:   p.droppedClosed.Load(),
		TrimmedFull:     p.trimmedFull.Load(),
		TrimmedTooLarge: p.trimmedTooLarge.Load(),
		Buffered:        len(p.ch),
		BufferedBytes:   p.bufBytes.Load(),
		Pending:         p.js.PublishAsyncPending(),
	}
}

// Published is Stats().Published.
func (p *Publisher) Published() uint64 { return p.Stats().Published }

// Dropped is Stats().Dropped().
func (p *Publisher) Dropped() uint64 { return p.Stats().Dropped() }

// Run publishes recorded events until ctx ends or Close is called; then
// it stops accepting events, publishes what is buffered and waits for the
// acks, within FlushTimeout, and returns nil. Events left over count as
// DroppedClosed. While the stream does not exist (not provisioned yet,
// JetStream unavailable), Run keeps publishing (events are dropped and
// counted) and logs it at most every 10 s. Call Run once.
func (p *Publisher) Run(ctx context.Context) error {
	if !p.running.CompareAndSwap(false, true) {
		return errors.New("audit: Run called twice")
	}
	defer close(p.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before wg.Wait: it stops ensureLoop
	wg.Go(func() { p.ensureLoop(ctx) })

	var buf []byte
	for {
		select {
		case ev := <-p.ch:
			p.take(&ev)
			buf = p.publish(&ev, buf)
		case <-ctx.Done():
			p.flush(&buf)
			return nil
		case <-p.stop:
			p.flush(&buf)
			return nil
		}
	}
}

// Close stops the Publisher: Record drops from now on, and Run flushes
// and returns; Close waits for that if Run is running. Safe to call more
// than once.
func (p *Publisher) Close() {
	if p == nil {
		return
	}
	p.closeOnce.Do(func() {
		p.closed.Store(true)
		close(p.stop)
	})
	if p.running.Load() {
		<-p.done
	}
}

// flush publishes what is buffered and waits for the acks, within
// FlushTimeout. What is left in the buffer then, or recorded by a Record
// that passed its closed check before closed was set, counts as
// DroppedClosed.
func (p *Publisher) flush(buf *[]byte) {
	p.closed.Store(true)
	deadline := time.NewTimer(p.cfg.FlushTimeout)
	defer deadline.Stop()
	defer p.discardBuffered()
	// Set before the final discard: a Record that enqueues after this
	// discards itself (see Record), one that enqueued before is
	// discarded here.
	defer p.drained.Store(true)
drain:
	for {
		select {
		case ev := <-p.ch:
			p.take(&ev)
			*buf = p.publish(&ev, *buf)
		case <-deadline.C:
			return
		default:
			break drain
		}
	}
	select {
	case <-p.js.PublishAsyncComplete():
	case <-deadline.C:
		// The pending publishes time out on their own (AckTimeout) and
		// are counted by the error handler then.
	}
}

// publish prepares ev (policy, redaction, scrubbing) and publishes it
// asynchronously. buf is a scratch buffer it returns for reuse.
func (p *Publisher) publish(ev *Event, scratch []byte) []byte {
	p.prepare(ev)
	data, err := AppendEncode(scratch[:0], ev)
	if err == nil && len(data) > MaxEventBytes && (ev.Arguments != nil || ev.Result != nil) {
		p.trimmedTooLarge.Add(1)
		if ev.Arguments != nil {
			ev.Arguments = droppedTooLargeJSON
		}
		if ev.Result != nil {
			ev.Result = droppedTooLargeJSON
		}
		data, err = AppendEncode(scratch[:0], ev)
	}
	if err != nil {
		p.droppedPublish.Add(1)
		p.log.Warn("audit event not encoded", proto.LogErr, err)
		return scratch
	}
	// The publish keeps its data until the ack (it may retry), so it gets
	// its own copy; the scratch buffer stays ours.
	msg := &nats.Msg{Subject: Subject(ev), Data: append([]byte(nil), data...)}
	if _, err := p.js.PublishMsgAsync(msg); err != nil {
		p.droppedPublish.Add(1)
		if errors.Is(err, nats.ErrNoResponders) {
			p.pokeEnsure()
		}
	}
	return data
}

// prepare applies the tenant's policy: arguments and results kept only if
// recorded, redacted; secret shapes scrubbed from the free-form strings; a
// missing time set to now.
func (p *Publisher) prepare(ev *Event) {
	ps := p.policy.Load()
	t, ok := ps.tenants[ev.Tenant]
	if !ok || !t.args {
		ev.Arguments = nil
	}
	if !ok || !t.result {
		ev.Result = nil
	}
	if ev.Arguments != nil {
		ev.Arguments = t.redactor.RedactArguments(ev.Arguments)
	}
	if ev.Result != nil {
		ev.Result = t.redactor.RedactResult(ev.Result)
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	ev.Name = ScrubString(ev.Name)
	ev.Principal = ScrubString(ev.Principal)
}

func (p *Publisher) pokeEnsure() {
	select {
	case p.ensureNow <- struct{}{}:
	default:
	}
}

// ensureLoop says when publishes find no stream (not provisioned yet,
// deleted, or a server that lost its store, until tenancy-svc's next
// reconcile creates it again), at most once per missingLogEvery. It never
// creates, changes or reads the stream: tenancy-svc provisions it
// (internal/provision), only the admin identity may change it, and an
// edge may not even read its info (per-subject counts would show other
// tenants' activity). Until the stream exists, events are dropped and
// counted.
func (p *Publisher) ensureLoop(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.ensureNow:
			if now := time.Now(); now.Sub(last) >= missingLogEvery {
				p.log.Warn("audit stream missing: events are dropped until tenancy-svc creates it", "stream", p.cfg.Stream.name())
				last = now
			}
		}
	}
}

// missingLogEvery bounds how often a missing stream is logged.
const missingLogEvery = 10 * time.Second
