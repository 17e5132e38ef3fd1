// Package busfloor measures the floor of the NATS round trip a call through
// Switchyard makes: one request-reply, the edge publishing to a worker and
// the worker publishing its reply straight to the edge's reply subject.
//
// A requester publishes a payload with a reply subject of its own inbox and
// waits for the answer, one request at a time, pausing [Config.Gap]
// between requests; a responder echoes the payload back. The requester
// waits as the edge does, through the edge's own multiplexed inbox
// (package github.com/switchyard-mcp/switchyard/internal/bus's Caller: one
// subscription on <inbox>.*, a reply subject per call), not through
// nats.go's Request. The responder answers from its subscription's
// callback, as a worker's intake does, but does no work: what is measured
// is NATS and the two clients, nothing of the gateway's own code beyond
// the Caller.
//
// Two deployments, as the gateway's:
//
//   - [ModeInproc]: an embedded nats-server (no JetStream, no TCP listener)
//     in this process, with in-process connections for the requester and
//     the responder (switchyard dev);
//   - [ModeTCP]: a NATS server and a responder in their own processes,
//     reached over TCP loopback (the multi-process gateway). [Run] only
//     connects; the caller starts the processes (see [Respond] for the
//     responder's side).
//
// With [Config.Stamps], every request carries one-way stamps in headers
// (the hop package's names: the requester's edge_pub, the responder's
// worker_in and worker_out), so a round trip splits into the request hop,
// the responder's turnaround and the reply hop. The stamps are wall-clock
// times of processes on one machine, one clock. They are not free: nats.go
// decodes the headers of every message that has them, and an untraced
// call's messages have none, so the round trip without stamps is the
// lower, truer floor.
//
// # Subjects
//
// Requests go to [Config.Subject] ([Subject] by default), answered by a
// responder in queue group [Queue], as workers answer their pool subjects
// in a queue group; replies go to _INBOX.<nuid>.<call id>.
package busfloor
