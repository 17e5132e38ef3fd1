// Package tenancy is the shared state of Switchyard's tenancy: the records
// tenancy-svc owns in JetStream KV and every edge and router reads.
//
//	KV switchyard_tenants   key: tenant name (a slug)   value: msgpack Tenant
//	KV switchyard_apikeys   key: API key id             value: msgpack apikey.Record
//
// tenancy-svc seeds both buckets from the configuration and changes them on
// admin requests; edges and routers watch them and keep immutable
// snapshots. Values are msgpack (github.com/vmihailenco/msgpack/v5, the
// proto package's codec), keyed by the struct tags below.
package tenancy

import (
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
)

// KV buckets.
const (
	BucketTenants = proto.BucketTenants
	BucketAPIKeys = proto.BucketAPIKeys
	// BucketSeeded is tenancy-svc's provenance bucket (which entries the
	// configuration seeded), and holds [KeySeeded].
	BucketSeeded = proto.BucketTenancySeeded
)

// KeySeeded is the key tenancy-svc writes to [BucketSeeded] once it has
// made the tenancy buckets match its configuration for the first time in
// this store. A [Watcher] loads nothing before it exists: buckets that
// exist but are not seeded yet would otherwise read as "no tenants", and
// every request would be refused until the seed landed.
const KeySeeded = "seeded"

// Tenant is one tenant's record (KV [BucketTenants], key Name).
//
// A request resolves to exactly one tenant: by its API key's record
// (apikey.Record.Tenant), by its verified JWT's claims against Selectors
// (internal/tenant), or, without credentials, to the tenant with Anonymous
// set, if any (at most one may be). Policy says which upstreams and items
// the tenant sees (internal/policy); Limits bound its traffic.
type Tenant struct {
	Name      string            `json:"name" yaml:"name" msgpack:"name"`
	Anonymous bool              `json:"anonymous,omitempty" yaml:"anonymous,omitempty" msgpack:"anonymous,omitempty"`
	Selectors []tenant.Selector `json:"selectors,omitempty" yaml:"selectors,omitempty" msgpack:"selectors,omitempty"`
	Policy    policy.Spec       `json:"policy" yaml:"policy" msgpack:"policy"`
	Limits    Limits            `json:"limits,omitempty" yaml:"limits,omitempty" msgpack:"limits,omitempty"`
}

// Limits bound a tenant's traffic across the fleet; zero means unlimited.
// Rates are requests per second with a burst (token buckets), per tenant
// and per principal; MaxInFlight caps the tenant's concurrent calls.
type Limits struct {
	Rate           float64 `json:"rate,omitempty" yaml:"rate,omitempty" msgpack:"rate,omitempty"`
	Burst          int     `json:"burst,omitempty" yaml:"burst,omitempty" msgpack:"burst,omitempty"`
	PrincipalRate  float64 `json:"principal_rate,omitempty" yaml:"principal_rate,omitempty" msgpack:"principal_rate,omitempty"`
	PrincipalBurst int     `json:"principal_burst,omitempty" yaml:"principal_burst,omitempty" msgpack:"principal_burst,omitempty"`
	MaxInFlight    int     `json:"max_in_flight,omitempty" yaml:"max_in_flight,omitempty" msgpack:"max_in_flight,omitempty"`
	// MaxSessions caps the tenant's open stateful client sessions (2025-era
	// streamable HTTP and legacy SSE) over the fleet of edges, each edge
	// holding its share; 0: only the edges' own per-tenant cap.
	MaxSessions int `json:"max_sessions,omitempty" yaml:"max_sessions,omitempty" msgpack:"max_sessions,omitempty"`
}
