package proto

import (
	"slices"
	"strings"
)

// Identity is one NATS user of a deployment: one per role, and one each
// for the operators' tools (admin), the audit readers (audit) and the
// bench. Each identity's permissions are computed from [AccessTable], the
// single source of truth of who may use which subject, bucket and stream;
// `switchyard nats init` writes them into the identities' credentials.
type Identity string

// The identities of a deployment.
const (
	IdentityEdge    Identity = "edge"
	IdentityRouter  Identity = "router"
	IdentityWorker  Identity = "upstream-worker"
	IdentityTenancy Identity = "tenancy-svc"
	// IdentityAdmin is the operators' tools: the tenancy and audit CLIs,
	// `switchyard nats provision`, discovery; the only identity that may
	// update, purge or delete a stream.
	IdentityAdmin Identity = "admin"
	// IdentityAudit reads the audit stream (the admin listeners' /audit/
	// search, `switchyard audit search`) and nothing else.
	IdentityAudit Identity = "audit"
	// IdentityBench is the bench's own traffic (the bus floor).
	IdentityBench Identity = "bench"
)

// Identities is every identity, in a fixed order.
var Identities = []Identity{IdentityEdge, IdentityRouter, IdentityWorker, IdentityTenancy, IdentityAdmin, IdentityAudit, IdentityBench}

// ValidIdentity reports whether id is one of [Identities].
func ValidIdentity(id Identity) bool { return slices.Contains(Identities, id) }

// InboxPrefix is the prefix of id's reply subjects, "_INBOX.<id>" (nats.go
// CustomInboxPrefix): each identity may subscribe to its own inbox
// subjects only, so nobody reads another's replies. Edges share one
// prefix: they are one trust domain.
func (id Identity) InboxPrefix() string { return "_INBOX." + string(id) }

// NATS micro service names ($SRV discovery) of the roles.
const (
	ServiceEdge    = "switchyard-edge"
	ServiceRouter  = "switchyard-router"
	ServiceWorker  = "switchyard-worker"
	ServiceTenancy = "switchyard-tenancy"
)

// MicroService is the NATS micro service name ($SRV discovery) of the role
// with identity id, "" for an identity that runs none.
func (id Identity) MicroService() string {
	switch id {
	case IdentityEdge:
		return ServiceEdge
	case IdentityRouter:
		return ServiceRouter
	case IdentityWorker:
		return ServiceWorker
	case IdentityTenancy:
		return ServiceTenancy
	}
	return ""
}

// Access is one row of the bus's permission table: who may do what to one
// resource, and the NATS subject patterns ('*' and '>' wildcards) that
// grants. An identity may publish to, and subscribe to, exactly the union
// of the Pub and Sub patterns of the rows that name it; everything else is
// refused by the server.
type Access struct {
	// Resource names what the row is about as the docs do: a subject with
	// <placeholders>, "KV <bucket>", "stream <name>" or "streams".
	Resource string
	// Verb is what the identities may do: publish, subscribe, read, get
	// (a bucket's keys one at a time), watch (a bucket's keys and their
	// changes), write, create or manage (update, purge, delete).
	Verb string
	// Who are the identities the row grants it to.
	Who []Identity
	// Pub and Sub are the patterns the row grants.
	Pub, Sub []string
	// Why says what the role does with it.
	Why string
}

// AccessParams are the deployment's settings the table depends on.
type AccessParams struct {
	// AuditStream is the audit stream's name; "" is [DefaultAuditStream].
	AuditStream string
}

func (p AccessParams) auditStream() string {
	if p.AuditStream == "" {
		return DefaultAuditStream
	}
	return p.AuditStream
}

// JetStream API subjects, as nats-server names them.
const (
	jsAPI = "$JS.API."
	jsFC  = "$JS.FC."
)

// streamRead is what reading a stream takes: its info, direct and stored
// message gets, and ordered (ephemeral) consumers delivering to the
// reader's inbox, with their flow control answers.
func streamRead(stream string) []string {
	return []string{
		jsAPI + "STREAM.INFO." + stream,
		jsAPI + "DIRECT.GET." + stream,
		jsAPI + "DIRECT.GET." + stream + ".>",
		jsAPI + "STREAM.MSG.GET." + stream,
		jsAPI + "CONSUMER.CREATE." + stream,
		jsAPI + "CONSUMER.CREATE." + stream + ".>",
		jsAPI + "CONSUMER.INFO." + stream + ".*",
		jsAPI + "CONSUMER.DELETE." + stream + ".*",
		jsFC + stream + ".>",
	}
}

// streamGet is what reading single messages of a stream takes (a KV get):
// its info and direct and stored message gets, and no consumer: a
// consumer can deliver a stream's messages to any subject, so an
// identity that may write a bucket gets consumers on it only where it
// must watch it (see bus.Guard).
func streamGet(stream string) []string {
	return []string{
		jsAPI + "STREAM.INFO." + stream,
		jsAPI + "DIRECT.GET." + stream,
		jsAPI + "DIRECT.GET." + stream + ".>",
		jsAPI + "STREAM.MSG.GET." + stream,
	}
}

// kvWrite is what writing bucket b takes: its info (to open it) and the
// bucket's key subjects (put, create, update, delete, purge are publishes
// there, acknowledged on the writer's inbox).
func kvWrite(b string) []string {
	return []string{jsAPI + "STREAM.INFO." + KVStream(b), "$KV." + b + ".>"}
}

// streamManage is what changing an existing stream takes.
func streamManage(stream string) []string {
	return []string{
		jsAPI + "STREAM.UPDATE." + stream,
		jsAPI + "STREAM.PURGE." + stream,
		jsAPI + "STREAM.DELETE." + stream,
		jsAPI + "STREAM.MSG.DELETE." + stream,
	}
}

func ids(v ...Identity) []Identity { return v }

// Streams is every JetStream stream of a deployment: the KV buckets'
// streams and the audit stream.
func (p AccessParams) Streams() []string {
	out := make([]string, 0, len(Buckets)+1)
	for _, b := range Buckets {
		out = append(out, KVStream(b))
	}
	return append(out, p.auditStream())
}

// AccessTable returns the bus's permission table for p: every subject,
// bucket and stream a role uses, and who may use it. The rows are in the
// order docs/security.md lists them.
func AccessTable(p AccessParams) []Access {
	all := func(suffixes ...string) []string {
		var out []string
		for _, s := range p.Streams() {
			for _, x := range suffixes {
				out = append(out, jsAPI+x+s)
			}
		}
		return out
	}
	var manage []string
	for _, s := range p.Streams() {
		manage = append(manage, streamManage(s)...)
	}
	kvWatch := func(b string) []string { return streamRead(KVStream(b)) }
	kvGet := func(b string) []string { return streamGet(KVStream(b)) }
	audit := p.auditStream()

	t := []Access{
		// Calls.
		{Resource: Prefix + "route.<tenant>.<op>", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "route.*.*"}, Why: "an edge sends every call a router must place"},
		{Resource: Prefix + "route.<tenant>.<op>", Verb: "subscribe", Who: ids(IdentityRouter),
			Sub: []string{SubjRouteAll}, Why: "routers take calls (queue group router)"},
		{Resource: Prefix + "router.<router>.<tenant>.<op>", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{SubjRouterRouteAll}, Why: "an edge sends a call to one live router by name, to know which one holds it"},
		{Resource: Prefix + "router.<router>.<tenant>.<op>", Verb: "subscribe", Who: ids(IdentityRouter),
			Sub: []string{SubjRouterRouteAll}, Why: "a router takes the calls sent to it by name"},
		{Resource: Prefix + "evt.router.<router>", Verb: "publish", Who: ids(IdentityRouter),
			Pub: []string{SubjEvtRouterAll}, Why: "a router's heartbeat"},
		{Resource: Prefix + "evt.router.<router>", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{SubjEvtRouterAll}, Why: "the live routers"},
		{Resource: Prefix + "worker.<worker>.<op>", Verb: "publish", Who: ids(IdentityRouter),
			Pub: []string{Prefix + "worker.*.*"}, Why: "a router forwards a placed call to its worker"},
		{Resource: Prefix + "worker.<worker>.cancel", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "worker.*." + OpCancel}, Why: "an edge cancels a call it placed"},
		{Resource: Prefix + "worker.<worker>.in_flight", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "worker.*." + OpInFlight}, Why: "an edge back from a bus interruption asks which of its calls still run"},
		{Resource: Prefix + "worker.<worker>.probe", Verb: "publish", Who: ids(IdentityWorker),
			Pub: []string{Prefix + "worker.*.probe"}, Why: "a starting worker checks that no live worker has its id"},
		{Resource: Prefix + "worker.<worker>.<op>", Verb: "subscribe", Who: ids(IdentityWorker),
			Sub: []string{Prefix + "worker.*.*"}, Why: "a worker takes the calls placed on it"},
		{Resource: Prefix + "grant.<worker>.tools_call", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "grant.*." + OpToolsCall}, Why: "an edge sends a call on a router's route grant; the worker checks the grant's MAC"},
		{Resource: Prefix + "grant.<worker>.<op>", Verb: "subscribe", Who: ids(IdentityWorker),
			Sub: []string{Prefix + "grant.*.*"}, Why: "a worker takes calls sent on route grants"},
		{Resource: Prefix + "pool.<upstream>.<op>", Verb: "publish", Who: ids(IdentityRouter),
			Pub: []string{Prefix + "pool.*.*"}, Why: "any worker of an upstream's pool"},
		{Resource: Prefix + "pool.<upstream>.<op>", Verb: "subscribe", Who: ids(IdentityWorker),
			Sub: []string{Prefix + "pool.*.*"}, Why: "workers take pool calls (queue group pool.<upstream>)"},
		{Resource: Prefix + "edge.<edge>.msg", Verb: "publish", Who: ids(IdentityWorker),
			Pub: []string{Prefix + "edge.*.msg"}, Why: "upstream messages for a client session outside any call"},
		{Resource: Prefix + "edge.<edge>.msg", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{Prefix + "edge.*.msg"}, Why: "an edge relays them to its client sessions"},
		{Resource: Prefix + "edge.<edge>.answer", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "edge.*.answer"}, Why: "a client's answer to a request another edge relayed to it"},
		{Resource: Prefix + "edge.<edge>.answer", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{Prefix + "edge.*.answer"}, Why: "answers to the requests an edge relayed, from the edge the client posted them to"},
		{Resource: Prefix + "edge.<edge>.resume", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "edge.*.resume"}, Why: "a client's follow-up to a call another edge suspended for its input (SEP-2322)"},
		{Resource: Prefix + "edge.<edge>.resume", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{Prefix + "edge.*.resume"}, Why: "follow-ups to the calls an edge suspended, from the edge the client posted them to"},
		{Resource: Prefix + "sse.<session>.post", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "sse.*.post"}, Why: "a legacy SSE session's POST that reached an edge not holding its GET stream"},
		{Resource: Prefix + "sse.<session>.post", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{Prefix + "sse.*.post"}, Why: "the POSTs of the legacy SSE sessions whose GET stream an edge holds"},
		{Resource: Prefix + "evt.session_level.<edge>", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{SubjEvtSessionLevelAll}, Why: "a client session's log level changed"},
		{Resource: Prefix + "evt.session_level.<edge>", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{SubjEvtSessionLevelAll}, Why: "every copy of a session filters logs alike"},
		{Resource: Prefix + "evt.session_cancel.<edge>", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{SubjEvtSessionCancelAll}, Why: "a client's notifications/cancelled for a call another edge runs"},
		{Resource: Prefix + "evt.session_cancel.<edge>", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{SubjEvtSessionCancelAll}, Why: "the edge running the call cancels it"},

		// Events.
		{Resource: Prefix + "evt.worker.<worker>", Verb: "publish", Who: ids(IdentityWorker),
			Pub: []string{SubjEvtWorkerAll}, Why: "worker heartbeats and goodbyes"},
		{Resource: Prefix + "evt.worker.<worker>", Verb: "subscribe", Who: ids(IdentityEdge, IdentityRouter),
			Sub: []string{SubjEvtWorkerAll}, Why: "worker presence: placement, failing calls of a worker that left"},
		{Resource: SubjEvtPresence, Verb: "publish", Who: ids(IdentityEdge, IdentityRouter),
			Pub: []string{SubjEvtPresence}, Why: "ask every worker for a heartbeat now (at start)"},
		{Resource: SubjEvtPresence, Verb: "subscribe", Who: ids(IdentityWorker),
			Sub: []string{SubjEvtPresence}, Why: "answer with a heartbeat"},
		{Resource: Prefix + "evt.list_changed.<tenant>", Verb: "publish", Who: ids(IdentityRouter),
			Pub: []string{Prefix + "evt.list_changed.*"}, Why: "a list in a tenant's view changed"},
		{Resource: Prefix + "evt.list_changed.<tenant>", Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{SubjEvtListChangedAll}, Why: "send clients list_changed"},
		{Resource: Prefix + "evt.session_closed.<edge>", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{Prefix + "evt.session_closed.*"}, Why: "a client session ended"},
		{Resource: Prefix + "evt.session_closed.<edge>", Verb: "subscribe", Who: ids(IdentityEdge, IdentityWorker),
			Sub: []string{SubjEvtSessionClosedAll}, Why: "close the upstream sessions held for it (worker); drop a copy of a session another edge served (edge)"},
		{Resource: SubjEvtRoutes, Verb: "publish", Who: ids(IdentityRouter),
			Pub: []string{SubjEvtRoutes}, Why: "route grants are void"},
		{Resource: SubjEvtRoutes, Verb: "subscribe", Who: ids(IdentityEdge),
			Sub: []string{SubjEvtRoutes}, Why: "drop the route grants held"},

		// Tenancy endpoints.
		{Resource: SubjTenancyAdmin + ".>", Verb: "publish", Who: ids(IdentityAdmin),
			Pub: []string{SubjTenancyAdmin + ".>"}, Why: "tenants and API keys (switchyard tenancy)"},
		{Resource: SubjTenancyAdmin + ".>", Verb: "subscribe", Who: ids(IdentityTenancy),
			Sub: []string{SubjTenancyAdmin + ".>"}, Why: "tenancy-svc serves them"},
		{Resource: SubjTenancyResolve + ".>", Verb: "publish", Who: ids(IdentityAdmin),
			Pub: []string{SubjTenancyResolve + ".>"}, Why: "key, principal and access lookups (switchyard tenancy resolve)"},
		{Resource: SubjTenancyResolve + ".>", Verb: "subscribe", Who: ids(IdentityTenancy),
			Sub: []string{SubjTenancyResolve + ".>"}, Why: "tenancy-svc serves them"},

		// Discovery.
		{Resource: "$SRV.PING|INFO|STATS[.<service>[.<id>]]", Verb: "publish", Who: ids(IdentityAdmin),
			Pub: []string{"$SRV.>"}, Why: "NATS micro discovery of every role"},

		// Replies. Each identity reads its own inbox only; these rows say
		// who may answer into whose.
		{Resource: IdentityEdge.InboxPrefix() + ".>", Verb: "publish", Who: ids(IdentityEdge, IdentityRouter, IdentityWorker),
			Pub: []string{IdentityEdge.InboxPrefix() + ".>"}, Why: "placement notes and lists (router); replies, chunks, progress and upstream requests of a call (worker); the messages and outcome of a call resumed for another edge (edge)"},
		{Resource: IdentityRouter.InboxPrefix() + ".>", Verb: "publish", Who: ids(IdentityWorker),
			Pub: []string{IdentityRouter.InboxPrefix() + ".>"}, Why: "replies to a router's own requests (fan-outs)"},
		{Resource: IdentityWorker.InboxPrefix() + ".>", Verb: "publish", Who: ids(IdentityEdge, IdentityWorker),
			Pub: []string{IdentityWorker.InboxPrefix() + ".>"}, Why: "a client's answers to an upstream's requests (edge); the id probe (worker)"},
		{Resource: IdentityAdmin.InboxPrefix() + ".>", Verb: "publish", Who: ids(IdentityEdge, IdentityRouter, IdentityWorker, IdentityTenancy),
			Pub: []string{IdentityAdmin.InboxPrefix() + ".>"}, Why: "discovery replies; tenancy admin and resolve replies"},
		{Resource: IdentityBench.InboxPrefix() + ".>", Verb: "publish", Who: ids(IdentityBench),
			Pub: []string{IdentityBench.InboxPrefix() + ".>"}, Why: "the bench's echo responder"},
		{Resource: SubjBench + ".>", Verb: "publish", Who: ids(IdentityBench),
			Pub: []string{SubjBench + ".>"}, Why: "the bench's own requests"},
		{Resource: SubjBench + ".>", Verb: "subscribe", Who: ids(IdentityBench),
			Sub: []string{SubjBench + ".>"}, Why: "the bench's echo responder"},

		// Audit.
		{Resource: SubjAudit + ".>", Verb: "publish", Who: ids(IdentityEdge),
			Pub: []string{SubjAudit + ".>"}, Why: "audit events, stored by the audit stream (acknowledged on the edge's inbox)"},
		{Resource: "stream " + audit, Verb: "read", Who: ids(IdentityAdmin, IdentityAudit),
			Pub: streamRead(audit), Why: "search the audit trail"},

		// KV buckets. "watch" is reading every key and its changes (an
		// ordered consumer); "get" is reading keys one at a time.
		{Resource: "KV " + BucketUpstreams, Verb: "write", Who: ids(IdentityTenancy),
			Pub: kvWrite(BucketUpstreams), Why: "the catalog, seeded from the config file"},
		{Resource: "KV " + BucketUpstreams, Verb: "watch", Who: ids(IdentityEdge, IdentityRouter, IdentityWorker, IdentityTenancy),
			Pub: kvWatch(BucketUpstreams), Why: "the catalog (edges: passthrough views; tenancy-svc: what to reconcile)"},
		{Resource: "KV " + BucketLists, Verb: "write", Who: ids(IdentityWorker),
			Pub: kvWrite(BucketLists), Why: "every upstream's lists"},
		{Resource: "KV " + BucketLists, Verb: "get", Who: ids(IdentityWorker),
			Pub: kvGet(BucketLists), Why: "skip writing a list that did not change"},
		{Resource: "KV " + BucketLists, Verb: "watch", Who: ids(IdentityRouter),
			Pub: kvWatch(BucketLists), Why: "merged, namespaced lists"},
		{Resource: "KV " + BucketTenants, Verb: "write", Who: ids(IdentityTenancy),
			Pub: kvWrite(BucketTenants), Why: "tenants and their policy"},
		{Resource: "KV " + BucketTenants, Verb: "watch", Who: ids(IdentityEdge, IdentityRouter, IdentityTenancy),
			Pub: kvWatch(BucketTenants), Why: "authentication and limits (edge), policy (router)"},
		{Resource: "KV " + BucketAPIKeys, Verb: "write", Who: ids(IdentityTenancy),
			Pub: kvWrite(BucketAPIKeys), Why: "API key records (hashes only)"},
		{Resource: "KV " + BucketAPIKeys, Verb: "watch", Who: ids(IdentityEdge, IdentityTenancy),
			Pub: kvWatch(BucketAPIKeys), Why: "authenticate API keys"},
		{Resource: "KV " + BucketTenancySeeded, Verb: "write", Who: ids(IdentityTenancy),
			Pub: kvWrite(BucketTenancySeeded), Why: "what was seeded from the config file"},
		{Resource: "KV " + BucketTenancySeeded, Verb: "get", Who: ids(IdentityEdge, IdentityRouter),
			Pub: kvGet(BucketTenancySeeded), Why: "wait until tenancy-svc has seeded"},
		{Resource: "KV " + BucketTenancySeeded, Verb: "watch", Who: ids(IdentityTenancy),
			Pub: kvWatch(BucketTenancySeeded), Why: "what the config file owns"},
		{Resource: "KV " + BucketKeys, Verb: "write", Who: ids(IdentityTenancy),
			Pub: kvWrite(BucketKeys), Why: "create the fleet's secrets (task id sealing, grant MAC)"},
		{Resource: "KV " + BucketKeys, Verb: "get", Who: ids(IdentityRouter, IdentityWorker, IdentityTenancy),
			Pub: kvGet(BucketKeys), Why: "sign route grants (router); verify them and seal task ids (worker); create a secret only where none is (tenancy-svc)"},
		{Resource: "KV " + BucketEdges, Verb: "write", Who: ids(IdentityEdge),
			Pub: kvWrite(BucketEdges), Why: "an edge's liveness, for fleet-wide limit shares"},
		{Resource: "KV " + BucketEdges, Verb: "watch", Who: ids(IdentityEdge),
			Pub: kvWatch(BucketEdges), Why: "the live edges"},
		{Resource: "KV " + BucketSessions, Verb: "write", Who: ids(IdentityEdge),
			Pub: kvWrite(BucketSessions), Why: "the stateful client sessions an edge creates, changes and ends"},
		{Resource: "KV " + BucketSessions, Verb: "get", Who: ids(IdentityEdge),
			Pub: kvGet(BucketSessions), Why: "adopt a session another edge created"},

		// Streams.
		{Resource: "streams", Verb: "create", Who: ids(IdentityTenancy, IdentityAdmin),
			Pub: append(all("STREAM.CREATE.", "STREAM.INFO."), jsAPI+"INFO"), Why: "create every bucket and stream (tenancy-svc at start; switchyard nats provision); account info, which KV creation reads"},
		{Resource: "streams", Verb: "manage", Who: ids(IdentityAdmin),
			Pub: manage, Why: "update, purge or delete a stream (switchyard nats provision --update)"},
	}
	// Inboxes and discovery, per identity.
	for _, id := range Identities {
		t = append(t, Access{Resource: id.InboxPrefix() + ".>", Verb: "subscribe", Who: ids(id),
			Sub: []string{id.InboxPrefix() + ".>"}, Why: "replies to " + string(id) + "'s own requests"})
	}
	for _, id := range Identities {
		svc := id.MicroService()
		if svc == "" {
			continue
		}
		// The verbs are listed, not "$SRV.*": a subscription's own "*"
		// or ">" tokens match an allowed "*", so "$SRV.*" would also let
		// it subscribe to "$SRV.>", every service's discovery traffic.
		var sub []string
		for _, verb := range []string{"PING", "INFO", "STATS"} {
			sub = append(sub, "$SRV."+verb, "$SRV."+verb+"."+svc, "$SRV."+verb+"."+svc+".*")
		}
		t = append(t, Access{Resource: "$SRV.PING|INFO|STATS[." + svc + "[.<id>]]", Verb: "subscribe", Who: ids(id),
			Sub: sub, Why: "answer NATS micro discovery as " + svc})
	}
	return t
}

// Permissions returns the publish and subscribe patterns of id: the union
// of the rows of [AccessTable](p) that name it, sorted, without
// duplicates. Both are empty for an unknown identity.
func Permissions(id Identity, p AccessParams) (pub, sub []string) {
	for _, a := range AccessTable(p) {
		if !slices.Contains(a.Who, id) {
			continue
		}
		pub = append(pub, a.Pub...)
		sub = append(sub, a.Sub...)
	}
	slices.Sort(pub)
	slices.Sort(sub)
	return slices.Compact(pub), slices.Compact(sub)
}

// SubjectMatch reports whether subject (no wildcards) matches pattern,
// whose tokens may be '*' (one non-empty token) or a final '>' (one or
// more).
func SubjectMatch(pattern, subject string) bool {
	for {
		pt, prest, pmore := strings.Cut(pattern, ".")
		st, srest, smore := strings.Cut(subject, ".")
		switch {
		case pt == ">":
			return st != ""
		case pt == "*" && st == "", pt != "*" && pt != st:
			return false
		case !pmore || !smore:
			return pmore == smore
		}
		pattern, subject = prest, srest
	}
}
