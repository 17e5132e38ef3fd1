package tenancy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/switchyard-mcp/switchyard/internal/apikey"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
)

// mailboxLen bounds the admin requests waiting for the Run goroutine (one
// more is refused at once with AdminCodeUnavailable), and the requests
// each admin endpoint's subscription holds while its handler waits (more
// are dropped by the client library, counted in $SRV.STATS).
const mailboxLen = 64

// opTimeout bounds the KV work of one admin request.
const opTimeout = 10 * time.Second

// maxRequestBytes bounds an admin request body.
const maxRequestBytes = 1 << 20

type op int

const (
	opTenantPut op = iota
	opTenantGet
	opTenantList
	opTenantDelete
	opKeyCreate
	opKeyRevoke
	opKeyList
	opKeyDelete
)

// endpoints are the admin micro endpoints: name (micro's [A-Za-z0-9_-]),
// subject under tenancy.AdminGroup, and op.
var endpoints = []struct {
	name, subject string
	op            op
}{
	{"tenant_put", "tenant.put", opTenantPut},
	{"tenant_get", "tenant.get", opTenantGet},
	{"tenant_list", "tenant.list", opTenantList},
	{"tenant_delete", "tenant.delete", opTenantDelete},
	{"key_create", "key.create", opKeyCreate},
	{"key_revoke", "key.revoke", opKeyRevoke},
	{"key_list", "key.list", opKeyList},
	{"key_delete", "key.delete", opKeyDelete},
}

// job is one admin request queued for the Run goroutine, which computes
// its outcome and hands it back on res. The micro handler waits for it
// and answers on the micro.Request itself: micro counts an error in
// $SRV.STATS only when the handler answers with req.Error before it
// returns, and records that on the request, so no other goroutine may
// answer it.
type job struct {
	op   op
	data []byte
	res  chan outcome // buffered (1): the Run goroutine never waits on it
}

// outcome is a served job's reply or error.
type outcome struct {
	out any
	err error
}

func newJob(o op, data []byte) job { return job{op: o, data: data, res: make(chan outcome, 1)} }

// enqueuer is the micro handler of op: it queues the request for the Run
// goroutine and waits for its outcome, or refuses it when the mailbox is
// full. Each endpoint's handler runs on its own subscription's goroutine,
// so waiting holds up only that endpoint's later requests (bounded by its
// pending limits), never the resolve endpoints.
func (s *Service) enqueuer(o op, subject string) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		if req.Subject() != subject {
			// Not published to the endpoint: a JetStream consumer's
			// delivery keeps its stored subject (see bus.Guard). Dropped
			// unanswered.
			return
		}
		j := newJob(o, req.Data())
		select {
		case s.mailbox <- j:
		default:
			s.answer(req, nil, adminErr(tenancy.AdminCodeUnavailable, "overloaded: too many admin requests queued, retry"))
			return
		}
		r := s.await(j)
		s.answer(req, r.out, r.err)
	})
}

// await returns j's outcome, or 503 when Run has returned without serving
// it. A job that was served has its outcome in res before Run can return.
func (s *Service) await(j job) outcome {
	select {
	case r := <-j.res:
		return r
	case <-s.stopped:
	}
	select {
	case r := <-j.res:
		return r
	default:
		return outcome{err: errShuttingDown}
	}
}

var errShuttingDown = &tenancy.AdminError{Code: tenancy.AdminCodeUnavailable, Message: "shutting down, retry"}

// refuseQueued answers the requests still queued at shutdown.
func (s *Service) refuseQueued() {
	for {
		select {
		case j := <-s.mailbox:
			j.res <- outcome{err: errShuttingDown}
		default:
			return
		}
	}
}

// serve runs one admin request and hands its outcome to the waiting
// handler. A request taken from the mailbox runs to its end even when
// shutdown starts meanwhile (bounded by opTimeout): a write that went
// through must be answered as such, and a key.create's plaintext key must
// reach its caller.
func (s *Service) serve(ctx context.Context, j job) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
	defer cancel()
	var r outcome
	if len(j.data) > maxRequestBytes {
		r.err = badRequest("request larger than %d bytes", maxRequestBytes)
	} else {
		r.out, r.err = s.run(ctx, j)
	}
	j.res <- r
}

func (s *Service) run(ctx context.Context, j job) (any, error) {
	switch j.op {
	case opTenantPut:
		return s.tenantPut(ctx, j.data)
	case opTenantGet:
		return s.tenantGet(ctx, j.data)
	case opTenantList:
		return s.tenantList(ctx, j.data)
	case opTenantDelete:
		return s.tenantDelete(ctx, j.data)
	case opKeyCreate:
		return s.keyCreate(ctx, j.data)
	case opKeyRevoke:
		return s.keyRevoke(ctx, j.data)
	case opKeyList:
		return s.keyList(ctx, j.data)
	case opKeyDelete:
		return s.keyDelete(ctx, j.data)
	}
	return nil, fmt.Errorf("unknown admin op %d", j.op)
}

// answer replies to req through micro: out as JSON, or err as an
// AdminError body with micro's error headers (req.Error, which is what
// makes $SRV.STATS count it). A successful request without a reply
// subject gets no answer.
func (s *Service) answer(req micro.Request, out any, err error) {
	var body []byte
	if e := toAdminError(err); e != nil {
		c := *e
		c.Message = clip(c.Message) // it may quote the request: keep the reply small
		if c.Message == "" {
			c.Message = "error" // micro refuses an empty description
		}
		if body, err = json.Marshal(&c); err == nil {
			err = req.Error(c.Code, c.Message, body)
		}
	} else if req.Reply() == "" {
		return
	} else if body, err = json.Marshal(out); err == nil {
		err = req.Respond(body)
	}
	if err != nil && req.Reply() != "" {
		s.log.Warn("reply failed", proto.LogSubject, req.Subject(), proto.LogErr, err)
	}
}

// maxErrorMessage bounds an error message in a reply (bytes).
const maxErrorMessage = 512

// clip cuts msg to maxErrorMessage bytes, on a rune boundary.
func clip(msg string) string {
	if len(msg) <= maxErrorMessage {
		return msg
	}
	i := maxErrorMessage
	for i > 0 && !utf8.RuneStart(msg[i]) {
		i--
	}
	return msg[:i] + "…"
}

// toAdminError converts err at the boundary: an *AdminError as it is, any
// other error (the KV store's) as AdminCodeInternal.
func toAdminError(err error) *tenancy.AdminError {
	if err == nil {
		return nil
	}
	var e *tenancy.AdminError
	if errors.As(err, &e) {
		return e
	}
	return &tenancy.AdminError{Code: tenancy.AdminCodeInternal, Message: err.Error()}
}

func adminErr(code, format string, a ...any) error {
	return &tenancy.AdminError{Code: code, Message: fmt.Sprintf(format, a...)}
}

func badRequest(format string, a ...any) error {
	return adminErr(tenancy.AdminCodeBadRequest, format, a...)
}

func checkName(name string) error {
	if !proto.ValidSlug(name) {
		return badRequest("tenant name %q is not a slug ([a-z0-9-], 1-63 characters)", name)
	}
	return nil
}

// oneLine joins the lines of an errors.Join error.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// source is the provenance of the tenant or key under mark.
func (s *Service) source(ctx context.Context, mark string) (string, error) {
	_, err := s.st.seeded.Get(ctx, mark)
	switch {
	case err == nil:
		return tenancy.SourceConfig, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return tenancy.SourceAdmin, nil
	}
	return "", err
}

func (s *Service) refuseConfigured(ctx context.Context, name, verb string) error {
	src, err := s.source(ctx, markTenant+name)
	if err != nil {
		return err
	}
	if src == tenancy.SourceConfig {
		return adminErr(tenancy.AdminCodeConflict, "tenant %q is managed by the configuration file: %s it there", name, verb)
	}
	return nil
}

func (s *Service) getTenant(ctx context.Context, name string) (tenancy.TenantInfo, error) {
	e, err := s.st.tenants.Get(ctx, name)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return tenancy.TenantInfo{}, adminErr(tenancy.AdminCodeNotFound, "tenant %q not found", name)
	}
	if err != nil {
		return tenancy.TenantInfo{}, err
	}
	info := tenancy.TenantInfo{Revision: e.Revision()}
	if err := proto.Unmarshal(e.Value(), &info.Tenant); err != nil {
		return tenancy.TenantInfo{}, fmt.Errorf("tenant %q: stored record does not decode: %w", name, err)
	}
	if info.Source, err = s.source(ctx, markTenant+name); err != nil {
		return tenancy.TenantInfo{}, err
	}
	return info, nil
}

// allTenants reads every tenant, sorted by name. Records that do not
// decode are skipped (the snapshot builders report them).
func (s *Service) allTenants(ctx context.Context) ([]tenancy.TenantInfo, error) {
	names, err := listKeys(ctx, s.st.tenants)
	if err != nil {
		return nil, err
	}
	marks, err := markSet(ctx, s.st.seeded, markTenant+"*")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	out := make([]tenancy.TenantInfo, 0, len(names))
	for _, n := range names {
		e, err := s.st.tenants.Get(ctx, n)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		info := tenancy.TenantInfo{Revision: e.Revision(), Source: tenancy.SourceAdmin}
		if proto.Unmarshal(e.Value(), &info.Tenant) != nil {
			s.log.Warn("stored tenant does not decode", proto.LogTenant, n)
			continue
		}
		if marks[markTenant+n] {
			info.Source = tenancy.SourceConfig
		}
		out = append(out, info)
	}
	return out, nil
}

// allKeys reads every API key record, and returns apart the KV keys of
// the records that do not decode (their content is never logged).
func (s *Service) allKeys(ctx context.Context) (recs []apikey.Record, undecodable []string, err error) {
	ids, err := listKeys(ctx, s.st.keys)
	if err != nil {
		return nil, nil, err
	}
	recs = make([]apikey.Record, 0, len(ids))
	for _, id := range ids {
		e, err := s.st.keys.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		var r apikey.Record
		if proto.Unmarshal(e.Value(), &r) != nil {
			// The KV key may be a whole key stored by mistake: never log it.
			s.log.Warn("stored api key record does not decode", "key_id", tenancy.PrintableKeyID(id))
			undecodable = append(undecodable, id)
			continue
		}
		recs = append(recs, r)
	}
	return recs, undecodable, nil
}

func (s *Service) tenantPut(ctx context.Context, data []byte) (any, error) {
	var req tenancy.TenantPutRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	t := &req.Tenant
	if err := tenancy.CheckTenant(t); err != nil {
		return nil, badRequest("invalid tenant: %s", oneLine(err))
	}
	if err := s.refuseConfigured(ctx, t.Name, "change"); err != nil {
		return nil, err
	}
	if t.Anonymous {
		all, err := s.allTenants(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range all {
			if o.Tenant.Anonymous && o.Tenant.Name != t.Name {
				return nil, adminErr(tenancy.AdminCodeConflict, "tenant %q is anonymous already; at most one tenant may be", o.Tenant.Name)
			}
		}
	}
	value, err := proto.Marshal(t)
	if err != nil {
		return nil, err
	}
	created := false
	var rev uint64
	if req.Revision != 0 {
		rev, err = s.st.tenants.Update(ctx, t.Name, value, req.Revision)
		if errors.Is(err, jetstream.ErrKeyExists) {
			return nil, adminErr(tenancy.AdminCodeConflict, "tenant %q: revision %d is not the current one", t.Name, req.Revision)
		}
	} else {
		rev, err = s.st.tenants.Create(ctx, t.Name, value)
		created = err == nil
		if errors.Is(err, jetstream.ErrKeyExists) {
			rev, err = s.st.tenants.Put(ctx, t.Name, value)
		}
	}
	if err != nil {
		return nil, err
	}
	s.log.Info("tenant stored", proto.LogTenant, t.Name, "revision", rev, "created", created)
	return tenancy.TenantPutReply{
		TenantInfo: tenancy.TenantInfo{Tenant: *t, Revision: rev, Source: tenancy.SourceAdmin},
		Created:    created,
	}, nil
}

func (s *Service) tenantGet(ctx context.Context, data []byte) (any, error) {
	var req tenancy.TenantGetRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkName(req.Name); err != nil {
		return nil, err
	}
	return s.getTenant(ctx, req.Name)
}

func (s *Service) tenantList(ctx context.Context, data []byte) (any, error) {
	var req tenancy.TenantListRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	all, err := s.allTenants(ctx)
	if err != nil {
		return nil, err
	}
	return tenancy.TenantListReply{Tenants: all}, nil
}

func (s *Service) tenantDelete(ctx context.Context, data []byte) (any, error) {
	var req tenancy.TenantDeleteRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	// Any stored key may be deleted, even one that is not a slug or whose
	// record does not decode: that is how such garbage is removed.
	if !proto.ValidToken(req.Name) {
		return nil, badRequest("tenant name %q is not a KV key", req.Name)
	}
	if _, err := s.st.tenants.Get(ctx, req.Name); errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, adminErr(tenancy.AdminCodeNotFound, "tenant %q not found", req.Name)
	} else if err != nil {
		return nil, err
	}
	if err := s.refuseConfigured(ctx, req.Name, "remove"); err != nil {
		return nil, err
	}
	n, err := s.deleteTenant(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	s.log.Info("tenant deleted", proto.LogTenant, req.Name, "keys_deleted", n)
	return tenancy.TenantDeleteReply{Name: req.Name, KeysDeleted: n}, nil
}

func (s *Service) keyCreate(ctx context.Context, data []byte) (any, error) {
	var req tenancy.KeyCreateRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if err := checkName(req.Tenant); err != nil {
		return nil, err
	}
	if err := tenancy.CheckPrincipal(req.Principal); err != nil {
		return nil, badRequest("%v", err)
	}
	if req.ExpiresUnixMs < 0 || req.ExpiresUnixMs != 0 && req.ExpiresUnixMs <= time.Now().UnixMilli() {
		return nil, badRequest("expires_unix_ms %d is not in the future", req.ExpiresUnixMs)
	}
	if _, err := s.getTenant(ctx, req.Tenant); err != nil {
		return nil, err
	}
	key, rec, err := apikey.Generate()
	if err != nil {
		return nil, err
	}
	rec.Tenant, rec.Principal, rec.ExpiresUnixMs = req.Tenant, req.Principal, req.ExpiresUnixMs
	value, err := proto.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	if _, err := s.st.keys.Create(ctx, rec.ID, value); err != nil {
		return nil, fmt.Errorf("store key %s: %w", rec.ID, err)
	}
	s.log.Info("api key created", "key_id", rec.ID, proto.LogTenant, rec.Tenant, "principal", rec.Principal)
	return tenancy.KeyCreateReply{Key: key, KeyInfo: tenancy.KeyInfoOf(&rec, tenancy.SourceAdmin)}, nil
}

func (s *Service) keyRevoke(ctx context.Context, data []byte) (any, error) {
	var req tenancy.KeyRevokeRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	// Not quoted: a whole key given as the id would reach the reply and
	// $SRV.STATS' last_error.
	if !apikey.ValidID(req.ID) {
		return nil, badRequest("key id %s is not a key id (%d characters of [a-z2-7])", tenancy.PrintableKeyID(req.ID), apikey.IDLen)
	}
	src, err := s.source(ctx, markAPIKey+req.ID)
	if err != nil {
		return nil, err
	}
	// Revoking is idempotent; a concurrent writer makes the update fail,
	// so read and write again.
	for attempt := 0; ; attempt++ {
		e, err := s.st.keys.Get(ctx, req.ID)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, adminErr(tenancy.AdminCodeNotFound, "key %s not found", req.ID)
		}
		if err != nil {
			return nil, err
		}
		var r apikey.Record
		if proto.Unmarshal(e.Value(), &r) != nil {
			return nil, adminErr(tenancy.AdminCodeConflict, "key %s: the stored record does not decode, so there is nothing to mark revoked (it authenticates nothing as it is): delete it (key.delete)", req.ID)
		}
		if r.Revoked {
			return tenancy.KeyInfoOf(&r, src), nil
		}
		r.Revoked = true
		value, err := proto.Marshal(&r)
		if err != nil {
			return nil, err
		}
		// The revocation is remembered apart from the record, so a
		// configured key that leaves the configuration and comes back is
		// seeded revoked (seedKey).
		if _, err := s.st.seeded.Put(ctx, markRevoked+req.ID, []byte("revoked")); err != nil {
			return nil, err
		}
		_, err = s.st.keys.Update(ctx, req.ID, value, e.Revision())
		if err == nil {
			s.log.Info("api key revoked", "key_id", r.ID, proto.LogTenant, r.Tenant)
			return tenancy.KeyInfoOf(&r, src), nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || attempt == 2 {
			return nil, err
		}
	}
}

func (s *Service) keyList(ctx context.Context, data []byte) (any, error) {
	var req tenancy.KeyListRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if req.Tenant != "" {
		if err := checkName(req.Tenant); err != nil {
			return nil, err
		}
	}
	recs, undecodable, err := s.allKeys(ctx)
	if err != nil {
		return nil, err
	}
	marks, err := markSet(ctx, s.st.seeded, markAPIKey+"*")
	if err != nil {
		return nil, err
	}
	out := make([]tenancy.KeyInfo, 0, len(recs)+len(undecodable))
	// Whose an undecodable record is cannot be told: listed whatever the
	// filter, by id alone (or by length, if the KV key is not an id).
	for _, id := range undecodable {
		src := tenancy.SourceAdmin
		if marks[markAPIKey+id] {
			src = tenancy.SourceConfig
		}
		shown := id
		if !apikey.ValidID(id) {
			shown = tenancy.PrintableKeyID(id)
		}
		out = append(out, tenancy.KeyInfo{ID: shown, Source: src, Undecodable: true})
	}
	for i := range recs {
		r := &recs[i]
		if req.Tenant != "" && r.Tenant != req.Tenant {
			continue
		}
		src := tenancy.SourceAdmin
		if marks[markAPIKey+r.ID] {
			src = tenancy.SourceConfig
		}
		out = append(out, tenancy.KeyInfoOf(r, src))
	}
	slices.SortFunc(out, func(a, b tenancy.KeyInfo) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Principal, b.Principal), strings.Compare(a.ID, b.ID))
	})
	return tenancy.KeyListReply{Keys: out}, nil
}

func (s *Service) keyDelete(ctx context.Context, data []byte) (any, error) {
	var req tenancy.KeyDeleteRequest
	if err := decode(data, &req); err != nil {
		return nil, err
	}
	if !apikey.ValidID(req.ID) {
		return nil, badRequest("key id %s is not a key id (%d characters of [a-z2-7])", tenancy.PrintableKeyID(req.ID), apikey.IDLen)
	}
	e, err := s.st.keys.Get(ctx, req.ID)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, adminErr(tenancy.AdminCodeNotFound, "key %s not found", req.ID)
	}
	if err != nil {
		return nil, err
	}
	src, err := s.source(ctx, markAPIKey+req.ID)
	if err != nil {
		return nil, err
	}
	if src == tenancy.SourceConfig {
		return nil, adminErr(tenancy.AdminCodeConflict, "key %s is managed by the configuration file: remove it there (or revoke it)", req.ID)
	}
	info := tenancy.KeyInfo{ID: req.ID, Source: src, Undecodable: true}
	var r apikey.Record
	if proto.Unmarshal(e.Value(), &r) == nil {
		info = tenancy.KeyInfoOf(&r, src)
	}
	if err := s.st.keys.Delete(ctx, req.ID); err != nil {
		return nil, err
	}
	s.log.Info("api key deleted", "key_id", req.ID, proto.LogTenant, info.Tenant, "undecodable", info.Undecodable)
	return info, nil
}

// markSet returns the seed marks matching filter as a set.
func markSet(ctx context.Context, kv jetstream.KeyValue, filter string) (map[string]bool, error) {
	keys, err := listKeys(ctx, kv, filter)
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m, nil
}
