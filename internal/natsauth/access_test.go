package natsauth_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/internal/natsauth"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/testutil/natsauthtest"
)

// prober is a connection of one identity that tells, for each publish or
// subscribe, whether the server refused it: it follows the operation
// with a publish the server always refuses (a sentinel) and reads the
// asynchronous errors up to the sentinel's, which NATS reports in order.
type prober struct {
	t   *testing.T
	id  proto.Identity
	nc  *nats.Conn
	n   int
	mu  sync.Mutex
	got []string // permission violations, in order
	ch  chan struct{}
}

func newProber(t *testing.T, srv *natsauthtest.Server, id proto.Identity) *prober {
	p := &prober{t: t, id: id, ch: make(chan struct{}, 1024)}
	u := srv.Material.Users[id]
	nc, err := nats.Connect("", nats.InProcessServer(srv.Server), nats.UserJWTAndSeed(u.JWT, string(u.Seed)),
		nats.CustomInboxPrefix(id.InboxPrefix()),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				p.mu.Lock()
				p.got = append(p.got, err.Error())
				p.mu.Unlock()
				p.ch <- struct{}{}
			}
		}))
	if err != nil {
		t.Fatalf("connect as %s: %v", id, err)
	}
	t.Cleanup(nc.Close)
	p.nc = nc
	return p
}

// refused runs op and reports whether the server refused it for subject.
func (p *prober) refused(subject string, op func() error) bool {
	p.t.Helper()
	p.n++
	sentinel := fmt.Sprintf("sentinel.%s.%d", p.id, p.n)
	if err := op(); err != nil {
		p.t.Fatalf("%s: %s: %v", p.id, subject, err)
	}
	if err := p.nc.Publish(sentinel, nil); err != nil {
		p.t.Fatal(err)
	}
	if err := p.nc.Flush(); err != nil {
		p.t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		for i, e := range p.got {
			if strings.Contains(e, `"`+sentinel+`"`) {
				hit := false
				for _, before := range p.got[:i] {
					hit = hit || strings.Contains(before, `"`+subject+`"`)
				}
				p.got = p.got[i+1:]
				p.mu.Unlock()
				return hit
			}
		}
		p.mu.Unlock()
		select {
		case <-p.ch:
		case <-deadline:
			p.t.Fatalf("%s: no violation reported for the sentinel %s", p.id, sentinel)
		}
	}
}

func (p *prober) pubRefused(subject string) bool {
	return p.refused(subject, func() error { return p.nc.Publish(subject, nil) })
}

func (p *prober) subRefused(subject string) bool {
	var sub *nats.Subscription
	r := p.refused(subject, func() (err error) {
		sub, err = p.nc.SubscribeSync(subject)
		return err
	})
	_ = sub.Unsubscribe()
	return r
}

// concrete turns a pattern into a subject it matches.
func concrete(pattern string) string {
	toks := strings.Split(pattern, ".")
	for i, t := range toks {
		switch t {
		case "*":
			toks[i] = "x1"
		case ">":
			toks[i] = "x2.x3"
		}
	}
	return strings.Join(toks, ".")
}

// allows reports whether one of patterns matches subject.
func allows(patterns []string, subject string) bool {
	for _, p := range patterns {
		if proto.SubjectMatch(p, subject) {
			return true
		}
	}
	return false
}

// TestAccessTableEnforced checks every row of the permission table
// against a server running the generated credentials: for each subject
// pattern of each row, every identity the table allows it is allowed by
// the server, and every other identity is refused.
func TestAccessTableEnforced(t *testing.T) {
	params := proto.AccessParams{AuditStream: "AUDIT_T"}
	srv := natsauthtest.Start(t, params)
	probers := map[proto.Identity]*prober{}
	for _, id := range proto.Identities {
		probers[id] = newProber(t, srv, id)
	}
	rows := proto.AccessTable(params)
	checked := 0
	for _, row := range rows {
		for _, kind := range []string{"pub", "sub"} {
			patterns := row.Pub
			if kind == "sub" {
				patterns = row.Sub
			}
			for _, pat := range patterns {
				subj := concrete(pat)
				for _, id := range proto.Identities {
					pub, sub := proto.Permissions(id, params)
					var want bool
					var refused bool
					if kind == "pub" {
						want = allows(pub, subj)
						refused = probers[id].pubRefused(subj)
					} else {
						want = allows(sub, subj)
						refused = probers[id].subRefused(subj)
					}
					if refused == want {
						t.Errorf("%s %s %s (row %q %s): refused %v, want allowed %v", id, kind, subj, row.Resource, row.Verb, refused, want)
					}
					// The row's own identities are allowed by construction
					// of Permissions: check the table says so too.
					for _, w := range row.Who {
						if w == id && !want {
							t.Errorf("row %q %s names %s but its permissions do not allow %s", row.Resource, row.Verb, id, subj)
						}
					}
					checked++
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d checks: the table looks empty", checked)
	}
}

// TestAccessNobodyReadsEverything is the table's global rules: no identity
// may subscribe to everything, to every inbox, to another identity's
// inbox, to the audit subjects (the stream is read through JetStream by
// audit and admin only) or to the JetStream and KV API subjects.
func TestAccessNobodyReadsEverything(t *testing.T) {
	srv := natsauthtest.Start(t, proto.AccessParams{})
	for _, id := range proto.Identities {
		p := newProber(t, srv, id)
		subs := []string{">", "_INBOX.>", "_INBOX.*.>", "$JS.API.>", "$KV.>", "$KV.switchyard_tenants.>",
			proto.Prefix + ">", proto.SubjAudit + ".>", "$SYS.>", "$SRV.>"}
		for _, other := range proto.Identities {
			if other != id {
				subs = append(subs, other.InboxPrefix()+".>", other.InboxPrefix()+".x")
			}
		}
		for _, s := range subs {
			if !p.subRefused(s) {
				t.Errorf("%s may subscribe to %s", id, s)
			}
		}
		if p.subRefused(id.InboxPrefix() + ".>") {
			t.Errorf("%s may not subscribe to its own inbox", id)
		}
	}
}

// TestAccessAttacks are the attacks of docs/security.md's threat model, per
// identity: each must be refused for every identity but the owner named.
func TestAccessAttacks(t *testing.T) {
	srv := natsauthtest.Start(t, proto.AccessParams{})
	type attack struct {
		name   string
		sub    bool
		subj   string
		owners []proto.Identity // who may; everyone else is refused
	}
	attacks := []attack{
		{"write the catalog", false, "$KV." + proto.BucketUpstreams + ".evil", []proto.Identity{proto.IdentityTenancy}},
		{"write a tenant", false, "$KV." + proto.BucketTenants + ".evil", []proto.Identity{proto.IdentityTenancy}},
		{"mint an API key", false, "$KV." + proto.BucketAPIKeys + ".evil", []proto.Identity{proto.IdentityTenancy}},
		{"write the seeding record", false, "$KV." + proto.BucketTenancySeeded + ".seeded", []proto.Identity{proto.IdentityTenancy}},
		{"replace a shared secret", false, "$KV." + proto.BucketKeys + "." + proto.KeyGrants, []proto.Identity{proto.IdentityTenancy}},
		{"write the lists", false, "$KV." + proto.BucketLists + ".u.tools", []proto.Identity{proto.IdentityWorker}},
		{"delete a tenant's messages", false, "$JS.API.STREAM.MSG.DELETE.KV_" + proto.BucketTenants, []proto.Identity{proto.IdentityAdmin}},
		{"purge the API keys", false, "$JS.API.STREAM.PURGE.KV_" + proto.BucketAPIKeys, []proto.Identity{proto.IdentityAdmin}},
		{"call a tenancy admin endpoint", false, proto.SubjTenancyAdmin + ".key.create", []proto.Identity{proto.IdentityAdmin}},
		{"call a tenancy resolve endpoint", false, proto.SubjTenancyResolve + ".key", []proto.Identity{proto.IdentityAdmin}},
		{"create a stream", false, "$JS.API.STREAM.CREATE.KV_" + proto.BucketTenants, []proto.Identity{proto.IdentityTenancy, proto.IdentityAdmin}},
		{"create any other stream", false, "$JS.API.STREAM.CREATE.EVIL", nil},
		{"update the audit stream", false, "$JS.API.STREAM.UPDATE." + proto.DefaultAuditStream, []proto.Identity{proto.IdentityAdmin}},
		{"purge the audit stream", false, "$JS.API.STREAM.PURGE." + proto.DefaultAuditStream, []proto.Identity{proto.IdentityAdmin}},
		{"delete the audit stream", false, "$JS.API.STREAM.DELETE." + proto.DefaultAuditStream, []proto.Identity{proto.IdentityAdmin}},
		{"read the audit stream", false, "$JS.API.DIRECT.GET." + proto.DefaultAuditStream, []proto.Identity{proto.IdentityAdmin, proto.IdentityAudit}},
		{"read the audit stream by consumer", false, "$JS.API.CONSUMER.CREATE." + proto.DefaultAuditStream, []proto.Identity{proto.IdentityAdmin, proto.IdentityAudit}},
		{"forge an audit event", false, proto.SubjAudit + ".t.u.ok.abc", []proto.Identity{proto.IdentityEdge}},
		{"take a pool's calls", true, proto.Prefix + "pool.github.tools_call", []proto.Identity{proto.IdentityWorker}},
		{"take a worker's calls", true, proto.Prefix + "worker.w1.tools_call", []proto.Identity{proto.IdentityWorker}},
		{"take granted calls", true, proto.Prefix + "grant.w1.tools_call", []proto.Identity{proto.IdentityWorker}},
		{"call a pool directly", false, proto.Prefix + "pool.github.tools_call", []proto.Identity{proto.IdentityRouter}},
		{"call a worker directly", false, proto.Prefix + "worker.w1.tools_call", []proto.Identity{proto.IdentityRouter}},
		{"call on a grant", false, proto.Prefix + "grant.w1.tools_call", []proto.Identity{proto.IdentityEdge}},
		{"forge a heartbeat or goodbye", false, proto.Prefix + "evt.worker.w1", []proto.Identity{proto.IdentityWorker}},
		{"void the route grants", false, proto.SubjEvtRoutes, []proto.Identity{proto.IdentityRouter}},
		{"forge list_changed", false, proto.Prefix + "evt.list_changed.acme", []proto.Identity{proto.IdentityRouter}},
		{"take calls as a router", true, proto.Prefix + "route.acme.tools_call", []proto.Identity{proto.IdentityRouter}},
		{"send calls as an edge", false, proto.Prefix + "route.acme.tools_call", []proto.Identity{proto.IdentityEdge}},
		{"answer into an edge's inbox", false, proto.IdentityEdge.InboxPrefix() + ".abc.1", []proto.Identity{proto.IdentityEdge, proto.IdentityRouter, proto.IdentityWorker}},
		{"read the upstream messages of a session", true, proto.Prefix + "edge.e1.msg", []proto.Identity{proto.IdentityEdge}},
		{"watch session ends", true, proto.Prefix + "evt.session_closed.e1", []proto.Identity{proto.IdentityEdge, proto.IdentityWorker}},
	}
	probers := map[proto.Identity]*prober{}
	for _, id := range proto.Identities {
		probers[id] = newProber(t, srv, id)
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			for _, id := range proto.Identities {
				p := probers[id]
				p.t = t
				var refused bool
				if a.sub {
					refused = p.subRefused(a.subj)
				} else {
					refused = p.pubRefused(a.subj)
				}
				owner := false
				for _, o := range a.owners {
					owner = owner || o == id
				}
				if refused == owner {
					t.Errorf("%s: refused %v (owners %v)", id, refused, a.owners)
				}
			}
		})
	}
}

// TestAccessCredentialsRequired: no credentials, credentials of a user no
// account signed, and a rotated (revoked) key are refused at connect.
func TestAccessCredentialsRequired(t *testing.T) {
	srv := natsauthtest.Start(t, proto.AccessParams{})
	url := srv.ClientURL()
	if nc, err := nats.Connect(url, nats.Timeout(5*time.Second)); err == nil {
		nc.Close()
		t.Fatal("a connection without credentials was accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("without credentials: %v, want an authorization violation", err)
	}
	other, err := natsauth.Generate(proto.AccessParams{})
	if err != nil {
		t.Fatal(err)
	}
	u := other.Users[proto.IdentityAdmin]
	if nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.UserJWTAndSeed(u.JWT, string(u.Seed))); err == nil {
		nc.Close()
		t.Fatal("credentials of another deployment were accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("another deployment's credentials: %v, want an authorization violation", err)
	}
	// A JWT of this deployment presented with another key's seed.
	mine := srv.Material.Users[proto.IdentityAdmin]
	if nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.UserJWTAndSeed(mine.JWT, string(u.Seed))); err == nil {
		nc.Close()
		t.Fatal("a JWT with another user's seed was accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("a JWT with another user's seed: %v, want an authorization violation", err)
	}
}

// TestAccessRotateRevokes: after switchyard nats rotate's Rotate and a
// reload, the old credentials are refused and the open connection made
// with them is closed; the new ones work.
func TestAccessRotateRevokes(t *testing.T) {
	srv := natsauthtest.Start(t, proto.AccessParams{})
	old := srv.Material.Users[proto.IdentityEdge]
	closed := make(chan struct{})
	nc, err := nats.Connect("", nats.InProcessServer(srv.Server), nats.UserJWTAndSeed(old.JWT, string(old.Seed)),
		nats.NoReconnect(), nats.ClosedHandler(func(*nats.Conn) { close(closed) }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	srv.Rotate(t, proto.IdentityEdge)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the connection with the revoked key is still open")
	}
	if c, err := nats.Connect(srv.ClientURL(), nats.Timeout(5*time.Second), nats.UserJWTAndSeed(old.JWT, string(old.Seed))); err == nil {
		c.Close()
		t.Fatal("the revoked credentials were accepted")
	} else if !errors.Is(err, nats.ErrAuthorization) && !errors.Is(err, nats.ErrAuthRevoked) {
		t.Errorf("the revoked credentials: %v, want an authorization violation", err)
	}
	nu := srv.Material.Users[proto.IdentityEdge]
	c, err := nats.Connect("", nats.InProcessServer(srv.Server), nats.UserJWTAndSeed(nu.JWT, string(nu.Seed)))
	if err != nil {
		t.Fatalf("the rotated credentials: %v", err)
	}
	c.Close()
}
