// Package metrics defines Switchyard's Prometheus metrics and the helpers
// the roles use to record them cheaply on hot paths.
//
// Every name starts with switchyard_, uses base units (seconds, bytes),
// and counters end in _total. Labels are bounded: method (the MCP
// methods the gateway knows, else "other"), outcome ("ok" or the class of
// the JSON-RPC error code, see [Outcome]), upstream (the catalog's
// names), limit, role, and tenant only where [TenantLabels] allows it.
// Session ids, tool names and arguments are never labels.
//
// # Registries
//
// A role takes a [prometheus.Registerer] in its Config; [Or] turns nil
// into a private registry, so a role built without one (tests, benches)
// still counts but nobody scrapes it. The role commands create one
// registry per process with [NewRegistry] (Go runtime, process and
// [RegisterBuildInfo] collectors) and serve it on the admin listener
// (internal/admin); in embedded mode every role registers into that one
// registry, so role metric names never collide across roles.
//
// # Hot paths
//
// [MethodOutcome] caches the histogram child of each (method, outcome)
// pair on first use, so recording a request is two map-free array
// lookups, an atomic load and Observe: no allocation.
//
// docs/observability.md lists every metric with its type, labels and
// meaning.
package metrics
