// Package tenancy is Switchyard's tenancy service. It owns three KV
// buckets, seeds them from its configuration, and serves the micro
// service that changes tenants and API keys (admin) and answers lookups
// about them (resolve).
//
// # Buckets
//
//	switchyard_upstreams       key: upstream name  value: msgpack proto.UpstreamSpec
//	switchyard_tenants         key: tenant name    value: msgpack tenancy.Tenant
//	switchyard_apikeys         key: API key id     value: msgpack apikey.Record (hash only)
//	switchyard_tenancy_seeded  key: tenant.<name> | apikey.<id>   value: "config"
//
// Edges, routers and workers watch the first three; the last is this
// service's own record of what the configuration seeded.
//
// # Seeding
//
// At start, and again every ten seconds, the buckets are made to match the
// configuration, writing only entries that changed:
//
//   - The upstream catalog is the configuration's, entirely: entries no
//     longer configured are deleted.
//   - Tenants and API keys the configuration names are its own: they are
//     written (and marked in switchyard_tenancy_seeded) and the admin
//     endpoints refuse to change or delete those tenants. A tenant or key
//     seeded earlier and no longer configured is deleted, a tenant with
//     every key of it. Tenants and keys created through the admin
//     endpoints are never marked, so they survive restarts and
//     configuration changes.
//   - A configured key is created with KV Create and changed with KV
//     Update against the revision read. For the same key, a revocation
//     made through key.revoke is kept: a restart does not bring it back.
//
// With no tenants key in the file, the configuration has one tenant,
// "default": anonymous, every upstream, default allow.
//
// # Admin service
//
// A nats.go micro service named tenancy.AdminService, discoverable with
// $SRV.PING, $SRV.INFO and $SRV.STATS, with JSON endpoints under
// tenancy.AdminGroup (switchyard.v1.tenancy.admin): tenant.put, tenant.get,
// tenant.list, tenant.delete (deletes the tenant's keys too), key.create
// (returns the plaintext key once), key.revoke, key.delete (also a
// record that does not decode) and key.list (never hashes; a record that
// does not decode is listed by id as undecodable). Errors carry micro's error headers with HTTP-like codes
// (tenancy.AdminCode*) and a tenancy.AdminError body. Whoever can publish
// to those subjects administers tenancy: restrict them with NATS
// permissions. Requests are queued (bounded) to the Run goroutine, which
// serves them one at a time between reconciliations; the micro handler
// waits for the outcome and answers through micro, so $SRV.STATS counts
// error replies.
//
// # Resolve endpoints
//
// The same micro service has a second group, tenancy.ResolveGroup
// (switchyard.v1.tenancy.resolve), in the same queue group: key (which
// tenant and principal an API key authenticates as; every refusal but
// expiry reads "not a valid key", and the key is never logged or
// echoed), principal (which tenant a principal's claims and groups
// select; none and ambiguous are errors) and access (what a tenant's
// policy decides for one item). They answer from a tenancy.Watcher
// snapshot of the buckets that Run keeps current, as an edge would, on
// the NATS callback goroutine (snapshot reads, no I/O), never through the
// admin mailbox; 503 until the snapshot has loaded. Edges do not call
// them: they resolve from their own snapshot.
package tenancy
