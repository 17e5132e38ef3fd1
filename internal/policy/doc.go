// Package policy is Switchyard's per-tenant policy engine: which upstreams
// a tenant sees, and which of their tools, prompts, resources and resource
// templates it may list and use. It is a pure library: no I/O, no
// goroutines, no NATS. The tenancy service stores a tenant's [Spec]; edges
// and routers [Compile] it into a [Policy] when their snapshot changes and
// ask it on every request.
//
// # Semantics
//
// An item is allowed only if its upstream is visible ([Spec] Upstreams or
// AllUpstreams) and then the first rule, in spec order, whose kind applies
// and whose glob matches the item's subject allows it; when no rule
// matches, the spec's default decides (deny when unset). First match wins,
// as in a firewall's access list: put exceptions before the broader rule
// they carve out of ("allow github__get_*" before "deny github__*").
// Subjects are federated names for tools and prompts (<upstream>__<name>)
// and URIs for resources; the glob syntax is on [Rule].
//
// A denied item must be indistinguishable from a nonexistent one. The
// package only decides; callers enforce this by leaving denied items out of
// every list (and its counts and cursors) and answering a call, read or get
// of one with the same error, message and data as an unknown name.
//
// # Hot path
//
// [Policy.Allowed] evaluates the compiled globs (no regexp, no
// allocation). For the items a catalog snapshot lists, [Policy.Bind]
// decides each once into a [Bound]: a decision is then one map lookup
// ([Bound.Allowed]) or one bit test by list index ([Bound.Visible]), and
// [Bound.AppendVisible] filters a list page into a caller's buffer without
// allocating.
//
// # Concurrency
//
// [Policy] and [Bound] are immutable once built and safe for concurrent
// use; publish them through an atomic.Pointer. Nil values deny everything.
package policy
