// Package sessionstore is the edges' shared table of stateful client
// sessions: one [proto.SessionRecord] per 2025-era streamable HTTP session
// in the JetStream KV bucket [proto.BucketSessions] (created by
// tenancy-svc, internal/provision), so that any edge serves any session
// and a session outlives the edge that created it.
//
// The edge that creates a session puts its record before answering the
// initialize; an edge that receives a request for a session it does not
// hold gets the record and adopts the session (docs/architecture.md,
// "Sessions"). Records are small (the client's initialize params are the
// bulk) and written rarely: at initialize, on logging/setLevel, and while
// the session is in use at most every quarter of the idle timeout.
//
// A Store is safe for concurrent use; each method is one KV round trip.
package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// ErrNotFound is returned by [Store.Get] for a session without a record:
// never created, ended, or expired (internal/provision.SessionRecordTTL).
var ErrNotFound = errors.New("sessionstore: no such session")

// Store reads and writes session records in [proto.BucketSessions].
type Store struct {
	kv jetstream.KeyValue
	nc *nats.Conn // for reads at the stream's leader (leaderGet)
}

// Open opens the bucket; it fails with an error wrapping
// bus.ErrNotProvisioned while tenancy-svc has not created it.
func Open(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := bus.Bucket(ctx, js, proto.BucketSessions)
	if err != nil {
		return nil, err
	}
	return &Store{kv: kv, nc: js.Conn()}, nil
}

// ValidID reports whether id can be a record's key: a session id the edge
// minted has only letters, digits, '-' and '_' (a client may send
// anything, which must not reach the KV API as a subject token).
func ValidID(id string) bool {
	if id == "" || len(id) > 256 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Put stores rec under rec.ID, replacing any record there.
func (s *Store) Put(ctx context.Context, rec *proto.SessionRecord) error {
	if !ValidID(rec.ID) {
		return fmt.Errorf("sessionstore: invalid session id %q", rec.ID)
	}
	data, err := proto.Marshal(rec)
	if err != nil {
		return fmt.Errorf("sessionstore: encode: %w", err)
	}
	if _, err := s.kv.Put(ctx, rec.ID, data); err != nil {
		return fmt.Errorf("sessionstore: put: %w", err)
	}
	return nil
}

// Get returns the record of session id, or [ErrNotFound].
func (s *Store) Get(ctx context.Context, id string) (*proto.SessionRecord, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	e, err := s.kv.Get(ctx, id)
	var value []byte
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		// KV reads are direct gets, which any replica of a clustered
		// bucket may answer, before it has the latest write: a session
		// created a moment ago on another edge may read as missing
		// there. Missing is confirmed at the stream's leader.
		if value, err = s.leaderGet(ctx, id); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("sessionstore: get: %w", err)
	default:
		value = e.Value()
	}
	var rec proto.SessionRecord
	if err := proto.Unmarshal(value, &rec); err != nil {
		return nil, fmt.Errorf("sessionstore: decode %s: %w", id, err)
	}
	if rec.ID != id {
		return nil, fmt.Errorf("sessionstore: record under %s names %q", id, rec.ID)
	}
	return &rec, nil
}

// Exists reports whether session id has a record, read at the bucket
// stream's leader (a replica may still hold a record just deleted).
func (s *Store) Exists(ctx context.Context, id string) (bool, error) {
	if !ValidID(id) {
		return false, nil
	}
	_, err := s.leaderGet(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// Update changes the record of session id with change and writes it back
// if nobody wrote it meanwhile (its revision), trying again from a fresh
// read up to three times. A record that is gone (the session ended) is
// not written again: ErrNotFound.
func (s *Store) Update(ctx context.Context, id string, change func(*proto.SessionRecord)) (*proto.SessionRecord, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	var err error
	for range 3 {
		var e jetstream.KeyValueEntry
		e, err = s.kv.Get(ctx, id)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("sessionstore: get: %w", err)
		}
		var rec proto.SessionRecord
		if err := proto.Unmarshal(e.Value(), &rec); err != nil || rec.ID != id {
			return nil, fmt.Errorf("sessionstore: decode %s: bad record", id)
		}
		change(&rec)
		data, merr := proto.Marshal(&rec)
		if merr != nil {
			return nil, fmt.Errorf("sessionstore: encode: %w", merr)
		}
		if _, err = s.kv.Update(ctx, id, data, e.Revision()); err == nil {
			return &rec, nil
		}
	}
	return nil, fmt.Errorf("sessionstore: update %s: %w", id, err)
}

// leaderGet reads the value of key id at the bucket stream's leader
// ($JS.API.STREAM.MSG.GET, which only the leader answers): ErrNotFound for
// no value or a deleted one.
func (s *Store) leaderGet(ctx context.Context, id string) ([]byte, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": "$KV." + proto.BucketSessions + "." + id}) // strings only: always encodes
	m, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+proto.KVStream(proto.BucketSessions), req)
	if err != nil {
		return nil, fmt.Errorf("sessionstore: get: %w", err)
	}
	var resp struct {
		Error *struct {
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
		Message *struct {
			Hdrs []byte `json:"hdrs"`
			Data []byte `json:"data"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("sessionstore: get: %w", err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound):
		return nil, ErrNotFound
	case resp.Error != nil:
		return nil, fmt.Errorf("sessionstore: get: %s (%d)", resp.Error.Desc, resp.Error.ErrCode)
	case resp.Message == nil:
		return nil, ErrNotFound
	}
	if len(resp.Message.Hdrs) > 0 {
		if h, err := nats.DecodeHeadersMsg(resp.Message.Hdrs); err == nil {
			if op := h.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
				return nil, ErrNotFound
			}
		}
	}
	return resp.Message.Data, nil
}

// Delete removes the record of session id; a missing one is not an error.
func (s *Store) Delete(ctx context.Context, id string) error {
	if !ValidID(id) {
		return nil
	}
	if err := s.kv.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("sessionstore: delete: %w", err)
	}
	return nil
}
