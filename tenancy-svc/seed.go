package tenancy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/internal/provision"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// bucketSeeded records which tenants and API keys the configuration seeded
// (key "tenant.<name>" or "apikey.<id>", value "config"). Only those are
// deleted when the configuration no longer names them, and the admin
// endpoints refuse to change or delete a configured tenant.
const bucketSeeded = tenancy.BucketSeeded

const (
	markTenant = "tenant."
	markAPIKey = "apikey."
	// markRevoked+<id> records that key <id> was revoked; it outlives the
	// key's record, so a revoked key is never seeded valid again.
	markRevoked = "revoked."
)

// stores are the buckets tenancy-svc writes.
type stores struct {
	upstreams, tenants, keys, seeded jetstream.KeyValue
}

func openStores(ctx context.Context, js jetstream.JetStream) (*stores, error) {
	var st stores
	for _, b := range []struct {
		kv   *jetstream.KeyValue
		name string
	}{
		{&st.upstreams, proto.BucketUpstreams},
		{&st.tenants, tenancy.BucketTenants},
		{&st.keys, tenancy.BucketAPIKeys},
		{&st.seeded, bucketSeeded},
	} {
		kv, err := bus.Bucket(ctx, js, b.name)
		if err != nil {
			return nil, err
		}
		*b.kv = kv
	}
	return &st, nil
}

// logProvision logs what Ensure created (rare: a new deployment, or a
// server that lost its store) and drift when it changes.
func (s *Service) logProvision(r provision.Result) {
	for _, c := range r.Created {
		s.log.Info("provisioned", "what", c)
	}
	drift := strings.Join(r.Drift, ", ")
	if drift != s.drift && drift != "" {
		s.log.Warn("provision drift: exists with another configuration than the config file's; apply it with switchyard nats provision --update (admin identity)", "what", drift)
	}
	s.drift = drift
}

// seed makes the buckets match the configuration: the upstream catalog
// entirely; tenants and API keys as far as the configuration owns them.
func (s *Service) seed(ctx context.Context, js jetstream.JetStream) error {
	res, err := provision.Ensure(ctx, js, *s.cfg.Provision, provision.Options{CreateSecrets: true})
	s.logProvision(res)
	if err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	if s.st == nil {
		st, err := openStores(ctx, js)
		if err != nil {
			return err
		}
		s.st = st
	}
	if err := s.seedUpstreams(ctx); err != nil {
		return fmt.Errorf("seed upstreams: %w", err)
	}
	if err := s.seedTenancy(ctx); err != nil {
		return fmt.Errorf("seed tenants: %w", err)
	}
	// Only now may edges and routers load the tenancy state.
	if err := putIfChanged(ctx, s.st.seeded, tenancy.KeySeeded, []byte("1")); err != nil {
		return fmt.Errorf("seed tenants: %w", err)
	}
	s.seeded = true
	return nil
}

func (s *Service) seedUpstreams(ctx context.Context) error {
	kv := s.st.upstreams
	want := map[string]bool{}
	for _, u := range s.cfg.Upstreams {
		want[u.Name] = true
		data, err := proto.Marshal(&u)
		if err != nil {
			return err
		}
		if err := putIfChanged(ctx, kv, u.Name, data); err != nil {
			return err
		}
	}
	keys, err := listKeys(ctx, kv)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if !want[k] {
			// An entry the config does not name was written outside it:
			// by an older config, or with a credential that reaches the
			// catalog (tenancy-svc's, or admin's through a stream it
			// reconfigures). A catalog entry is a command every worker
			// may run: say so.
			if s.seeded {
				s.log.Warn("catalog entry not in the config removed", proto.LogUpstream, k)
			}
			if err := kv.Delete(ctx, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// seedTenancy writes the configured tenants and keys that changed, then
// deletes those seeded earlier that the configuration no longer names:
// keys first, then tenants with every key of theirs. Writes come in an
// order that never leaves a key pointing at a tenant not yet written.
func (s *Service) seedTenancy(ctx context.Context) error {
	marks, err := listKeys(ctx, s.st.seeded)
	if err != nil {
		return err
	}
	marked := make(map[string]bool, len(marks))
	for _, m := range marks {
		marked[m] = true
	}
	mark := func(m string) error {
		if marked[m] {
			return nil
		}
		_, err := s.st.seeded.Put(ctx, m, []byte(tenancy.SourceConfig))
		return err
	}

	wantTenants := make(map[string]bool, len(s.cfg.Tenants))
	anonymous := false
	for i := range s.cfg.Tenants {
		t := &s.cfg.Tenants[i]
		wantTenants[t.Name] = true
		anonymous = anonymous || t.Anonymous
		// Marked first: from now on the admin endpoints leave it alone.
		if err := mark(markTenant + t.Name); err != nil {
			return err
		}
		data, err := proto.Marshal(t)
		if err != nil {
			return err
		}
		if err := putIfChanged(ctx, s.st.tenants, t.Name, data); err != nil {
			return fmt.Errorf("tenant %s: %w", t.Name, err)
		}
	}
	wantKeys := make(map[string]bool, len(s.cfg.APIKeys))
	for i := range s.cfg.APIKeys {
		r := &s.cfg.APIKeys[i]
		wantKeys[r.ID] = true
		if err := mark(markAPIKey + r.ID); err != nil {
			return err
		}
		if err := s.seedKey(ctx, r); err != nil {
			return fmt.Errorf("api key %s: %w", r.ID, err)
		}
	}

	for _, m := range marks {
		if id, ok := strings.CutPrefix(m, markAPIKey); ok && !wantKeys[id] {
			if err := s.st.keys.Delete(ctx, id); err != nil {
				return err
			}
			if err := s.st.seeded.Delete(ctx, m); err != nil {
				return err
			}
			s.log.Info("api key no longer configured: deleted", "key_id", id)
		}
	}
	for _, m := range marks {
		if name, ok := strings.CutPrefix(m, markTenant); ok && !wantTenants[name] {
			n, err := s.deleteTenant(ctx, name)
			if err != nil {
				return err
			}
			if err := s.st.seeded.Delete(ctx, m); err != nil {
				return err
			}
			s.log.Info("tenant no longer configured: deleted", proto.LogTenant, name, "keys_deleted", n)
		}
	}
	if anonymous && !s.seeded {
		s.warnAnonymous(ctx)
	}
	return nil
}

// seedKey writes one configured key record: created if absent (KV Create,
// so a concurrent writer is not overwritten), else updated against the
// revision read if tenant, principal or key changed. For the same key, its
// creation time and a revocation (by key.revoke) are kept: a restart must
// not bring a revoked key back.
func (s *Service) seedKey(ctx context.Context, r *apikey.Record) error {
	kv := s.st.keys
	cur, err := kv.Get(ctx, r.ID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		rec := *r
		if _, err := s.st.seeded.Get(ctx, markRevoked+r.ID); err == nil {
			rec.Revoked = true // revoked before it left the configuration
			s.log.Warn("configured api key was revoked; it stays revoked", "key_id", r.ID, proto.LogTenant, r.Tenant)
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
		data, err := proto.Marshal(&rec)
		if err != nil {
			return err
		}
		_, err = kv.Create(ctx, r.ID, data)
		return err
	}
	if err != nil {
		return err
	}
	want := *r
	var old apikey.Record
	if proto.Unmarshal(cur.Value(), &old) == nil && bytes.Equal(old.Hash, r.Hash) {
		want.CreatedUnixMs = old.CreatedUnixMs
		want.Revoked = old.Revoked
		if old.Revoked && !s.seeded {
			s.log.Warn("configured api key is revoked; it stays revoked", "key_id", r.ID, proto.LogTenant, r.Tenant)
		}
	}
	data, err := proto.Marshal(&want)
	if err != nil {
		return err
	}
	if bytes.Equal(cur.Value(), data) {
		return nil
	}
	_, err = kv.Update(ctx, r.ID, data, cur.Revision())
	return err
}

// warnAnonymous logs when more than one stored tenant is anonymous (an
// admin-created one besides the configuration's): no request then gets
// anonymous access.
func (s *Service) warnAnonymous(ctx context.Context) {
	ts, err := s.allTenants(ctx)
	if err != nil {
		return
	}
	var anon []string
	for _, t := range ts {
		if t.Tenant.Anonymous {
			anon = append(anon, t.Tenant.Name)
		}
	}
	if len(anon) > 1 {
		s.log.Warn("more than one tenant is anonymous; none gets anonymous access", "tenants", anon)
	}
}

// deleteTenant deletes the tenant's keys (and their seed marks), then the
// tenant, then any key created for it meanwhile. It returns how many keys
// it deleted. A tenant that does not exist is not an error.
func (s *Service) deleteTenant(ctx context.Context, name string) (int, error) {
	n, err := s.deleteKeysOf(ctx, name)
	if err != nil {
		return n, err
	}
	if err := s.st.tenants.Delete(ctx, name); err != nil {
		return n, err
	}
	m, err := s.deleteKeysOf(ctx, name)
	return n + m, err
}

// deleteKeysOf deletes the keys whose records name tenantName; records
// that do not decode name no tenant and stay (key.delete removes them).
func (s *Service) deleteKeysOf(ctx context.Context, tenantName string) (int, error) {
	recs, _, err := s.allKeys(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.Tenant != tenantName {
			continue
		}
		if err := s.st.keys.Delete(ctx, r.ID); err != nil {
			return n, err
		}
		if err := s.st.seeded.Delete(ctx, markAPIKey+r.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// putIfChanged writes data under key unless it is there already.
func putIfChanged(ctx context.Context, kv jetstream.KeyValue, key string, data []byte) error {
	cur, err := kv.Get(ctx, key)
	if err == nil && bytes.Equal(cur.Value(), data) {
		return nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	_, err = kv.Put(ctx, key, data)
	return err
}

// listKeys returns the bucket's keys matching filters (all without).
func listKeys(ctx context.Context, kv jetstream.KeyValue, filters ...string) ([]string, error) {
	var (
		l   jetstream.KeyLister
		err error
	)
	if len(filters) > 0 {
		l, err = kv.ListKeysFiltered(ctx, filters...)
	} else {
		l, err = kv.ListKeys(ctx)
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	return out, nil
}
