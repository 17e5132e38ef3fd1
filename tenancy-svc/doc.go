// Package tenancy is Switchyard's tenancy service.
//
// It owns the upstream catalog: KV bucket switchyard_upstreams, one key per
// upstream name, msgpack proto.UpstreamSpec values. At start it seeds the
// bucket from its configuration (writing only entries that changed) and
// removes entries that are no longer configured, so the configuration file
// stays the source of truth. Edges, routers and workers watch the bucket.
package tenancy
