package bus

import (
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Guard returns h behind a check that each message's subject matches
// pattern, the subject h was subscribed to; other messages are dropped.
//
// A NATS subscription receives more than what is published on its
// subject: a JetStream push consumer delivers stored messages to its
// deliver subject with their stored subject (a KV key's $KV.<bucket>.<key>)
// and a $JS.ACK reply, and JetStream does not check the deliver subject
// against its creator's publish permissions. So an identity that may write
// some bucket and create a consumer on it could otherwise send anything to
// any literal subscription (docs/security.md). Every role subscription is
// guarded. The check is a prefix compare and a token count for the shapes
// the roles subscribe to (a literal prefix, then only '*' tokens or a
// final '>'), proto.SubjectMatch otherwise; it never allocates.
func Guard(pattern string, h nats.MsgHandler) nats.MsgHandler {
	match := Matcher(pattern)
	return func(m *nats.Msg) {
		if match(m.Subject) {
			h(m)
		}
	}
}

// Matcher returns a function reporting whether a subject matches pattern
// (the rules of proto.SubjectMatch), specialised for pattern's shape.
func Matcher(pattern string) func(subject string) bool {
	i := strings.IndexAny(pattern, "*>")
	if i < 0 {
		return func(s string) bool { return s == pattern }
	}
	lit, rest := pattern[:i], pattern[i:]
	stars, tail := 0, false
	for tok := range strings.SplitSeq(rest, ".") {
		switch tok {
		case "*":
			stars++
		case ">":
			tail = true
		default:
			return func(s string) bool { return proto.SubjectMatch(pattern, s) }
		}
	}
	return func(s string) bool {
		r, ok := strings.CutPrefix(s, lit)
		if !ok {
			return false
		}
		// r holds the tokens the wildcards match: each non-empty.
		n := 1
		for j := 0; j < len(r); j++ {
			if r[j] == '.' {
				if j == 0 || r[j-1] == '.' {
					return false
				}
				n++
			}
		}
		if r == "" || r[len(r)-1] == '.' {
			return false
		}
		if tail {
			return n > stars
		}
		return n == stars
	}
}
