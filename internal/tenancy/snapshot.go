package tenancy

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenant"
	"github.com/switchyard-mcp/switchyard/proto"
)

// ErrUnknownTenant is returned by [Snapshot.ResolveKey] for a key that
// verifies but whose tenant is not in the snapshot: deleted, never
// created, or skipped as invalid.
var ErrUnknownTenant = errors.New("tenancy: the key's tenant is not in the snapshot")

// Snapshot is one consistent view of both tenancy buckets: the valid
// tenants ([BucketTenants]) with their compiled policies and the selector
// index over them, and the valid API key records ([BucketAPIKeys]).
//
// A Snapshot is immutable and safe for concurrent use; a [Watcher]
// publishes a new one on every change (read it with [Watcher.Current]
// once per request and use that one throughout, so a request sees one
// state). Records it returns (the *Tenant of [Snapshot.Tenant]) are
// shared: callers must not modify them.
//
// # Invalid records fail closed
//
// A record that does not decode or is stored under another key than its
// own name or id, a tenant that [CheckTenant] refuses (name, policy,
// selectors, limits), or an API key record that [CheckAPIKey] refuses,
// does not poison the snapshot: it is left out, and [Snapshot.Problems]
// says why. A tenant left out resolves to
// nothing: no selector of it matches, it is not the anonymous tenant, its
// keys are refused with [ErrUnknownTenant] and [Snapshot.Tenant] does not
// know it. Likewise an API key left out is [apikey.ErrUnknown]. Two or
// more tenants with Anonymous set leave no anonymous tenant at all.
type Snapshot struct {
	rev uint64
	tenantPart
	keyPart
	problems []string // tenantPart's then keyPart's, sorted
}

// tenantPart is the half of a Snapshot built from BucketTenants. A
// rebuild after a change to the other bucket reuses it as is.
type tenantPart struct {
	tenants   map[string]tenantEntry
	anonymous string
	index     *tenant.Index
	tProblems []string
}

// keyPart is the half of a Snapshot built from BucketAPIKeys.
type keyPart struct {
	keys      map[string]*apikey.Record // by id
	kProblems []string
}

// tenantEntry is one valid tenant as a Snapshot serves it.
type tenantEntry struct {
	t *Tenant
	p *policy.Policy
}

// tenantRec is one tenant record checked and compiled (e set), or the
// reason it is left out (problem set). raw is the KV value it came from,
// so that a Watcher recompiles only records whose value changed.
type tenantRec struct {
	raw     []byte
	e       tenantEntry
	problem string
}

// keyRec is one API key record checked (rec set) or the reason it is
// left out (problem set).
type keyRec struct {
	raw     []byte
	rec     *apikey.Record
	problem string
}

// emptySnapshot resolves nothing: what a Watcher serves before its first
// load, so that an early caller fails closed.
func emptySnapshot() *Snapshot {
	return &Snapshot{tenantPart: tenantPart{index: &tenant.Index{}}}
}

// NewSnapshot builds a Snapshot from records in hand rather than from KV:
// for tests, and for a single process seeded from its configuration. It
// applies the same checks as a [Watcher]; a tenant name or key id listed
// twice is a problem, and every record under it is left out.
func NewSnapshot(tenants []Tenant, keys []apikey.Record) *Snapshot {
	trecs := make(map[string]*tenantRec, len(tenants))
	for i := range tenants {
		t := tenants[i] // a copy the snapshot owns
		t.Selectors = slices.Clone(t.Selectors)
		t.Policy.Upstreams = slices.Clone(t.Policy.Upstreams)
		t.Policy.Rules = slices.Clone(t.Policy.Rules)
		key := t.Name
		if _, ok := trecs[key]; ok {
			trecs[key] = &tenantRec{problem: fmt.Sprintf("tenant %q: listed twice", key)}
			continue
		}
		trecs[key] = checkTenant(key, &t)
	}
	krecs := make(map[string]*keyRec, len(keys))
	for i := range keys {
		r := keys[i]
		r.Hash = slices.Clone(r.Hash)
		key := r.ID
		if _, ok := krecs[key]; ok {
			krecs[key] = &keyRec{problem: fmt.Sprintf("api key %s: listed twice", PrintableKeyID(key))}
			continue
		}
		krecs[key] = checkKey(key, &r)
	}
	return assemble(0, buildTenants(trecs), buildKeys(krecs))
}

// Revision counts the snapshots a [Watcher] has published; it is 0 for
// the empty snapshot served before the first load and for [NewSnapshot].
func (s *Snapshot) Revision() uint64 { return s.rev }

// Tenant returns the valid tenant name and its compiled policy. ok is
// false for a tenant that does not exist or was left out as invalid. It
// does not allocate.
func (s *Snapshot) Tenant(name string) (t *Tenant, p *policy.Policy, ok bool) {
	e, ok := s.tenants[name]
	return e.t, e.p, ok
}

// Anonymous returns the tenant that requests without credentials belong
// to: the one valid tenant with Anonymous set. ok is false when there is
// none, or when two or more claim it (see [Snapshot.Problems]).
func (s *Snapshot) Anonymous() (name string, ok bool) {
	return s.anonymous, s.anonymous != ""
}

// ResolveKey authenticates an API key: it parses the key, looks its
// record up by id and verifies it ([apikey.Verify]) at now, then requires
// the record's tenant to be in the snapshot. It returns the tenant and
// principal of the record, or exactly one of [apikey.ErrMalformed],
// [apikey.ErrUnknown] (no valid record has the id), [apikey.ErrMismatch],
// [apikey.ErrRevoked], [apikey.ErrExpired] or [ErrUnknownTenant],
// unwrapped and carrying no part of the key. It allocates nothing beyond
// what [apikey.Verify] does (nothing).
func (s *Snapshot) ResolveKey(key string, now time.Time) (tenantName, principal string, err error) {
	id, _, ok := apikey.Parse(key)
	if !ok {
		return "", "", apikey.ErrMalformed
	}
	rec := s.keys[id] // nil when absent: Verify says ErrUnknown
	if err := apikey.Verify(key, rec, now); err != nil {
		return "", "", err
	}
	// Only a holder of the key learns that its tenant is gone.
	if _, ok := s.tenants[rec.Tenant]; !ok {
		return "", "", ErrUnknownTenant
	}
	return rec.Tenant, rec.Principal, nil
}

// ResolvePrincipal returns the tenant whose selectors claim p, through
// the snapshot's [tenant.Index]: [tenant.ErrNoTenant] if none does,
// [tenant.ErrAmbiguous] if two or more do. It does not allocate.
func (s *Snapshot) ResolvePrincipal(p *tenant.Principal) (string, error) {
	return s.index.Resolve(p)
}

// Len returns the number of valid tenants.
func (s *Snapshot) Len() int { return len(s.tenants) }

// All yields every valid tenant with its compiled policy, in no
// particular order.
func (s *Snapshot) All() iter.Seq2[*Tenant, *policy.Policy] {
	return func(yield func(*Tenant, *policy.Policy) bool) {
		for _, e := range s.tenants {
			if !yield(e.t, e.p) {
				return
			}
		}
	}
}

// Problems describes every record left out of the snapshot and why, one
// line each, sorted; its length counts them. Lines name tenants and key
// ids, never key material. It returns a new slice on each call.
func (s *Snapshot) Problems() []string { return slices.Clone(s.problems) }

// CheckAPIKey reports every problem that would leave r out of a
// snapshot, joined: an id that is not a key id ([apikey.ValidID]), a hash
// of the wrong length, no tenant, or a principal [CheckPrincipal] refuses.
func CheckAPIKey(r *apikey.Record) error {
	var errs []error
	if !apikey.ValidID(r.ID) {
		errs = append(errs, errors.New("id: not a key id"))
	}
	if len(r.Hash) != apikey.HashLen {
		errs = append(errs, fmt.Errorf("hash: %d bytes, want %d", len(r.Hash), apikey.HashLen))
	}
	if r.Tenant == "" {
		errs = append(errs, errors.New("tenant: required"))
	}
	if err := CheckPrincipal(r.Principal); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// compileTenant checks t as tenancy-svc does before storing it
// ([CheckTenant]) and compiles its policy.
func compileTenant(t *Tenant) (tenantEntry, error) {
	if err := CheckTenant(t); err != nil {
		return tenantEntry{}, err
	}
	p, err := policy.Compile(t.Policy)
	if err != nil { // not expected: CheckTenant compiled it
		return tenantEntry{}, err
	}
	return tenantEntry{t: t, p: p}, nil
}

// checkTenant checks the tenant stored under key.
func checkTenant(key string, t *Tenant) *tenantRec {
	if t.Name != key {
		return &tenantRec{problem: fmt.Sprintf("tenant %q: record names %q", key, t.Name)}
	}
	e, err := compileTenant(t)
	if err != nil {
		return &tenantRec{problem: fmt.Sprintf("tenant %q: %v", key, oneLine(err))}
	}
	return &tenantRec{e: e}
}

// decodeTenant decodes and checks one value of BucketTenants.
func decodeTenant(key string, value []byte) *tenantRec {
	t := new(Tenant)
	var r *tenantRec
	if err := proto.Unmarshal(value, t); err != nil {
		r = &tenantRec{problem: fmt.Sprintf("tenant %q: decode: %v", key, err)}
	} else {
		r = checkTenant(key, t)
	}
	r.raw = value
	return r
}

// checkKey checks the API key record stored under key.
func checkKey(key string, r *apikey.Record) *keyRec {
	switch {
	case !apikey.ValidID(key):
		return &keyRec{problem: fmt.Sprintf("api key %s: not a key id", PrintableKeyID(key))}
	case r.ID != key:
		return &keyRec{problem: fmt.Sprintf("api key %s: record has another id", PrintableKeyID(key))}
	}
	if err := CheckAPIKey(r); err != nil {
		return &keyRec{problem: fmt.Sprintf("api key %s: %v", PrintableKeyID(key), oneLine(err))}
	}
	return &keyRec{rec: r}
}

// decodeKey decodes and checks one value of BucketAPIKeys.
func decodeKey(key string, value []byte) *keyRec {
	r := new(apikey.Record)
	var k *keyRec
	if err := proto.Unmarshal(value, r); err != nil {
		k = &keyRec{problem: fmt.Sprintf("api key %s: decode: %v", PrintableKeyID(key), err)}
	} else {
		k = checkKey(key, r)
	}
	k.raw = value
	return k
}

// PrintableKeyID quotes key if it is a key id and says only its length
// otherwise: a KV key that is not an id may be a whole key stored by
// mistake, and problems end up in logs.
func PrintableKeyID(key string) string {
	if apikey.ValidID(key) {
		return fmt.Sprintf("%q", key)
	}
	return fmt.Sprintf("(%d-byte key, not shown)", len(key))
}

// oneLine joins the lines of an errors.Join error.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// buildTenants builds the tenant half of a snapshot from the checked
// records, keyed by KV key.
func buildTenants(recs map[string]*tenantRec) tenantPart {
	p := tenantPart{tenants: make(map[string]tenantEntry, len(recs))}
	var sel []tenant.TenantSelectors
	var anon []string
	for key, r := range recs {
		if r.problem != "" {
			p.tProblems = append(p.tProblems, r.problem)
			continue
		}
		p.tenants[key] = r.e
		if len(r.e.t.Selectors) > 0 {
			sel = append(sel, tenant.TenantSelectors{Tenant: key, Selectors: r.e.t.Selectors})
		}
		if r.e.t.Anonymous {
			anon = append(anon, key)
		}
	}
	idx, err := tenant.Build(sel)
	if err != nil {
		// Not expected: every tenant's selectors were checked on their own.
		// Failing closed here loses selector resolution for all tenants,
		// so it is reported loudly.
		p.tProblems = append(p.tProblems, "selector index: "+oneLine(err))
		idx = &tenant.Index{}
	}
	p.index = idx
	slices.Sort(anon)
	switch len(anon) {
	case 0:
	case 1:
		p.anonymous = anon[0]
	default:
		p.tProblems = append(p.tProblems, fmt.Sprintf("anonymous: tenants %q all allow anonymous access; none gets it", anon))
	}
	slices.Sort(p.tProblems)
	return p
}

// buildKeys builds the API key half of a snapshot.
func buildKeys(recs map[string]*keyRec) keyPart {
	p := keyPart{keys: make(map[string]*apikey.Record, len(recs))}
	for key, r := range recs {
		if r.problem != "" {
			p.kProblems = append(p.kProblems, r.problem)
			continue
		}
		p.keys[key] = r.rec
	}
	slices.Sort(p.kProblems)
	return p
}

func assemble(rev uint64, t tenantPart, k keyPart) *Snapshot {
	s := &Snapshot{rev: rev, tenantPart: t, keyPart: k}
	if n := len(t.tProblems) + len(k.kProblems); n > 0 {
		s.problems = make([]string, 0, n)
		s.problems = append(append(s.problems, t.tProblems...), k.kProblems...)
		slices.Sort(s.problems)
	}
	return s
}
