package bus

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

func TestBusGuard(t *testing.T) {
	var got []string
	h := Guard("switchyard.v1.route.*.*", func(m *nats.Msg) { got = append(got, m.Subject) })
	for _, s := range []string{
		"switchyard.v1.route.acme.tools_call",
		"$KV.switchyard_edges.x1", // a JetStream delivery keeps its stored subject
		"switchyard.v1.route.acme",
		"switchyard.v1.route.acme.tools_call.more",
		"switchyard.v1.worker.w.tools_call",
	} {
		h(&nats.Msg{Subject: s})
	}
	if len(got) != 1 || got[0] != "switchyard.v1.route.acme.tools_call" {
		t.Fatalf("handled %q", got)
	}
}

func BenchmarkBusGuard(b *testing.B) {
	h := Guard("switchyard.v1.route.*.*", func(*nats.Msg) {})
	m := &nats.Msg{Subject: "switchyard.v1.route.acme.tools_call"}
	b.ReportAllocs()
	for b.Loop() {
		h(m)
	}
}

// TestBusMatcherAgreesWithSubjectMatch: the specialised matcher decides as
// proto.SubjectMatch for the patterns the roles subscribe to.
func TestBusMatcherAgreesWithSubjectMatch(t *testing.T) {
	patterns := []string{
		"switchyard.v1.route.*.*", "switchyard.v1.worker.w1.*", "switchyard.v1.evt.presence",
		"_INBOX.router.abc.f.>", "_INBOX.edge.xyz.*", "$SRV.*.svc", "switchyard.v1.evt.worker.*",
	}
	subjects := []string{
		"switchyard.v1.route.acme.tools_call", "switchyard.v1.route.acme", "switchyard.v1.route.acme.x.y",
		"switchyard.v1.route..x", "switchyard.v1.route.a.", "switchyard.v1.worker.w1.tools_call",
		"switchyard.v1.worker.w2.tools_call", "switchyard.v1.evt.presence", "switchyard.v1.evt.presencex",
		"_INBOX.router.abc.f.w1._INBOX.edge.q.1", "_INBOX.router.abc.f.", "_INBOX.router.abc.f",
		"_INBOX.edge.xyz.7", "_INBOX.edge.xyz.7.8", "$SRV.PING.svc", "$SRV.PING.other",
		"switchyard.v1.evt.worker.w1", "$KV.switchyard_edges.x1", "",
	}
	for _, p := range patterns {
		m := Matcher(p)
		for _, s := range subjects {
			if got, want := m(s), proto.SubjectMatch(p, s); got != want {
				t.Errorf("Matcher(%q)(%q) = %v, SubjectMatch %v", p, s, got, want)
			}
		}
	}
}
