package worker

import (
	"sync"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// The worker keeps each call's reply for a short while after sending it:
// a reply published while its edge's NATS connection was down (a NATS
// node restarting, a network cut) reaches nobody, since the server keeps
// nothing for a subscriber that is reconnecting. When the edge is back it
// asks which of its calls still run (proto.InFlight); the worker sends a
// kept reply again and says so, and the call completes instead of failing
// with "its result was lost" (edge/reconnect.go).
const (
	// keepFor is how long a reply is kept: longer than an edge takes to
	// reconnect and ask (a reconnect is immediate to another node of a
	// cluster; the edge asks at once).
	keepFor = proto.ReplyKeepMs * time.Millisecond
	// keepBytes bounds the results kept, all calls together; the oldest
	// go first. A result larger than keepMaxOne is not kept.
	keepBytes  = 16 << 20
	keepMaxOne = 1 << 20
)

// replyKeep holds the replies sent lately, by call key. Safe for
// concurrent use.
type replyKeep struct {
	mu    sync.Mutex
	byKey map[callKey]*keptReply // guarded by mu
	queue []*keptReply           // guarded by mu: oldest first, from head
	head  int                    // guarded by mu
	bytes int                    // guarded by mu: sizes of the replies in byKey
	// pressed is when a reply last left before keepFor because of
	// keepBytes, or was not kept for its size: until keepFor after it, a
	// call the worker does not know may have run here (unsure).
	pressed time.Time // guarded by mu
}

type keptReply struct {
	key  callKey
	to   string // the subject the reply went to
	r    *proto.Reply
	size int
	at   time.Time
}

func newReplyKeep() *replyKeep { return &replyKeep{byKey: map[callKey]*keptReply{}} }

// put keeps r, sent to subject to as the reply of call key.
func (k *replyKeep) put(key callKey, to string, r *proto.Reply, now time.Time) {
	size := len(r.Result) + 128
	if r.Error != nil {
		size += len(r.Error.Msg) + len(r.Error.Data)
	}
	if key.id == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if size > keepMaxOne {
		k.pressed = now
		return
	}
	e := &keptReply{key: key, to: to, r: r, size: size, at: now}
	if old := k.byKey[key]; old != nil {
		k.bytes -= old.size
	}
	k.byKey[key] = e
	k.bytes += size
	k.queue = append(k.queue, e)
	k.expire(now)
}

// expire drops the replies kept longer than keepFor, and the oldest
// beyond keepBytes. Called with mu held.
func (k *replyKeep) expire(now time.Time) {
	for k.head < len(k.queue) {
		e := k.queue[k.head]
		if k.byKey[e.key] != e { // replaced by a later put
			k.queue[k.head] = nil
			k.head++
			continue
		}
		if now.Sub(e.at) < keepFor && k.bytes <= keepBytes {
			break
		}
		if now.Sub(e.at) < keepFor {
			k.pressed = now
		}
		delete(k.byKey, e.key)
		k.bytes -= e.size
		k.queue[k.head] = nil
		k.head++
	}
	if k.head > 1024 && k.head*2 > len(k.queue) { // compact
		k.queue = append(k.queue[:0], k.queue[k.head:]...)
		k.head = 0
	}
}

// unsure reports whether a reply left the keep early lately: a call the
// worker neither runs nor keeps may then have run.
func (k *replyKeep) unsure(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.pressed.IsZero() && now.Sub(k.pressed) < keepFor
}

// get returns the reply kept for key and where it went, if any.
func (k *replyKeep) get(key callKey, now time.Time) (to string, r *proto.Reply, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expire(now)
	e := k.byKey[key]
	if e == nil {
		return "", nil, false
	}
	return e.to, e.r, true
}
