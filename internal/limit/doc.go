// Package limit enforces the tenants' limits (tenancy.Limits) at the edge:
// token-bucket request rates per tenant and per principal
// (golang.org/x/time/rate) and a cap on the tenant's calls in flight.
//
// # Admission
//
// [Limiter.Admit] decides one request at once: admitted, it returns a
// [Ticket] the caller ends with [Ticket.Done] when the call is over; over a
// limit, it returns a [proto.CodeLimited] error whose Data says which
// limit and when a retry may succeed. Nothing is queued.
//
// # Fleet
//
// A tenant's limits hold for the whole fleet of edges, not per edge: each
// edge enforces its share, computed from the number of live edges and its
// rank among them ([View], [Share]). [Fleet] keeps that membership:
//
//	KV switchyard_edges   key: edge id   value: {"heartbeatMs": N}
//
// Each edge puts its key every heartbeat, deletes it on a clean stop, and
// watches the bucket; a member that misses [proto.HeartbeatMisses]
// heartbeats is dropped. docs/limits.md describes the model.
package limit
