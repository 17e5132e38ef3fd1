// Package tenant resolves an authenticated principal to the one tenant it
// belongs to.
//
// # Selectors
//
// A tenant is claimed by one or more [Selector]s, each of one of three
// shapes: one claim value, one group, or compound (issuer, claim value and
// group, all required). A principal resolves to a tenant when at least one
// of that tenant's selectors matches it and no selector of any other tenant
// does: an ambiguous principal is refused ([ErrAmbiguous]) rather than given
// whichever tenant happened to match first.
//
// # Cost
//
// [Build] turns the selectors into an immutable [Index]: one
// open-addressing hash table whose records are the claim values (under
// their claim name), groups and issuers selectors name, and the
// (issuer, claim value) and (prefix, group) pairs compound selectors are
// made of. [Index.Resolve] hashes each of the principal's strings once and
// looks it up there, so its cost grows with the size of the principal and
// not with the number of tenants, and it does not allocate.
//
// The package is pure: it does no I/O and touches no subject or bucket.
// The edge builds an [Index] from the tenancy snapshot it watches and swaps
// it in whole when the snapshot changes.
package tenant
