package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strconv"
	"time"
)

// Layout of a key; see the package documentation.
const (
	// Prefix starts every key of this format.
	Prefix = "syk_"
	// KeyLen is the length of every key in bytes.
	KeyLen = len(Prefix) + IDLen + 1 + secretChars + checkChars
	// IDLen is the length of a key id in bytes.
	IDLen = 16
	// SecretLen is the length of a decoded secret in bytes (256 bits).
	SecretLen = 32
	// HashLen is the length of [Record.Hash] in bytes (SHA-256).
	HashLen = sha256.Size

	idBytes     = 10 // IDLen*5/8
	secretChars = 52 // ceil(SecretLen*8/5)
	checkChars  = 7  // ceil(32/5)
	idOff       = len(Prefix)
	secretOff   = idOff + IDLen + 1
	checkOff    = secretOff + secretChars
)

const alphabet = "abcdefghijklmnopqrstuvwxyz234567"

var b32 = base32.NewEncoding(alphabet).WithPadding(base32.NoPadding)

// Sentinel errors of [Verify]. They never carry any part of a key.
var (
	// ErrMalformed: the key is not in the format (length, prefix,
	// charset, checksum). No lookup is needed to return it.
	ErrMalformed = errors.New("apikey: malformed key")
	// ErrUnknown: no record has the key's id. Verify returns it for a nil
	// record; callers return it when their lookup finds nothing.
	ErrUnknown = errors.New("apikey: unknown key")
	// ErrMismatch: the secret (or id) does not match the record.
	ErrMismatch = errors.New("apikey: key mismatch")
	// ErrRevoked: the key matches a revoked record.
	ErrRevoked = errors.New("apikey: key revoked")
	// ErrExpired: the key matches a record past its expiry.
	ErrExpired = errors.New("apikey: key expired")
)

const redacted = "[redacted]"

// Secret is the decoded secret part of a key. It prints (every fmt verb),
// logs (slog) and marshals (JSON, text) as "[redacted]"; only [Secret.Bytes]
// reveals it.
type Secret struct {
	b [SecretLen]byte
}

// Bytes returns a copy of the secret. Never log it.
func (s Secret) Bytes() []byte { return append([]byte(nil), s.b[:]...) }

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns a redacted Go-syntax form.
func (Secret) GoString() string { return "apikey.Secret{" + redacted + "}" }

// Format writes "[redacted]" for every verb (the Go-syntax form for %#v),
// so %x, %q and %v reveal nothing.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = f.Write([]byte(s.GoString()))
		return
	}
	_, _ = f.Write([]byte(redacted))
}

// LogValue implements slog.LogValuer.
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText returns "[redacted]", so encoders never write the secret.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// Record is what tenancy-svc stores for one key (JSON or msgpack, keyed by
// ID). Generate and NewRecord set ID, Hash and CreatedUnixMs; the caller
// sets the rest. The hash is not secret (it cannot be turned back into the
// key), but fmt (every verb) and slog leave it out anyway.
type Record struct {
	// ID is the key's id ([IDLen] bytes of [a-z2-7]).
	ID string `json:"id" msgpack:"i"`
	// Hash is SHA-256 over the key's prefix, id and secret ([HashLen] bytes).
	Hash []byte `json:"hash" msgpack:"h"`
	// Tenant the key authenticates for; opaque here.
	Tenant string `json:"tenant,omitempty" msgpack:"t,omitempty"`
	// Principal the key authenticates as; opaque here.
	Principal string `json:"principal,omitempty" msgpack:"p,omitempty"`
	// CreatedUnixMs is when the key was minted, Unix milliseconds.
	CreatedUnixMs int64 `json:"created_unix_ms,omitempty" msgpack:"c,omitempty"`
	// ExpiresUnixMs is when the key stops verifying, Unix milliseconds;
	// 0 means never. A key is expired from this instant on.
	ExpiresUnixMs int64 `json:"expires_unix_ms,omitempty" msgpack:"x,omitempty"`
	// Revoked keys never verify again.
	Revoked bool `json:"revoked,omitempty" msgpack:"r,omitempty"`
}

// String describes r without its hash.
func (r Record) String() string {
	return "apikey.Record{id=" + strconv.Quote(r.ID) +
		" tenant=" + strconv.Quote(r.Tenant) +
		" principal=" + strconv.Quote(r.Principal) +
		" created_unix_ms=" + strconv.FormatInt(r.CreatedUnixMs, 10) +
		" expires_unix_ms=" + strconv.FormatInt(r.ExpiresUnixMs, 10) +
		" revoked=" + strconv.FormatBool(r.Revoked) + "}"
}

// GoString is String: %#v leaves the hash out too.
func (r Record) GoString() string { return r.String() }

// Format writes String for every verb, so no verb prints the hash.
func (r Record) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(r.String())) }

// LogValue implements slog.LogValuer: a group without the hash.
func (r Record) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("key_id", r.ID),
		slog.String("tenant", r.Tenant),
		slog.String("principal", r.Principal),
		slog.Int64("expires_unix_ms", r.ExpiresUnixMs),
		slog.Bool("revoked", r.Revoked),
	)
}

// Generate mints a new key from crypto/rand. It returns the plaintext key,
// to hand to its owner once and never store, and the Record to store, with
// ID, Hash and CreatedUnixMs set. Ids are 80 random bits, so collisions
// are negligible; a store should still create records only if absent (KV
// Create) so a clash fails instead of overwriting.
func Generate() (key string, rec Record, err error) {
	var raw [idBytes + SecretLen]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", Record{}, fmt.Errorf("apikey: generate: %w", err)
	}
	key = format(&raw)
	rec, err = NewRecord(key, time.Now())
	return key, rec, err
}

// format spells the key of raw: the id's bytes, then the secret's.
func format(raw *[idBytes + SecretLen]byte) string {
	var buf [KeyLen]byte
	copy(buf[:], Prefix)
	b32.Encode(buf[idOff:idOff+IDLen], raw[:idBytes])
	buf[idOff+IDLen] = '_'
	b32.Encode(buf[secretOff:checkOff], raw[idBytes:])
	var sum [4]byte
	c := checksum(string(buf[:checkOff]))
	sum[0], sum[1], sum[2], sum[3] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
	b32.Encode(buf[checkOff:], sum[:])
	return string(buf[:])
}

// NewRecord returns the Record of an existing key (to seed keys from
// configuration), with ID, Hash and CreatedUnixMs (from created) set. It
// returns ErrMalformed if key is not a key.
func NewRecord(key string, created time.Time) (Record, error) {
	id, s, ok := Parse(key)
	if !ok {
		return Record{}, ErrMalformed
	}
	h := hash(id, &s)
	return Record{ID: id, Hash: h[:], CreatedUnixMs: created.UnixMilli()}, nil
}

// Parse splits key into its id (a substring of key, safe to log and to
// look the record up by) and its secret. ok is false unless key is exactly
// in the format, checksum included. It does not allocate.
func Parse(key string) (id string, secret Secret, ok bool) {
	if len(key) != KeyLen || key[:idOff] != Prefix || key[secretOff-1] != '_' {
		return "", Secret{}, false
	}
	id = key[idOff : idOff+IDLen]
	if !ValidID(id) {
		return "", Secret{}, false
	}
	if !decode(secret.b[:], key[secretOff:checkOff]) {
		return "", Secret{}, false
	}
	var sum [4]byte
	if !decode(sum[:], key[checkOff:]) {
		return "", Secret{}, false
	}
	if uint32(sum[0])<<24|uint32(sum[1])<<16|uint32(sum[2])<<8|uint32(sum[3]) != checksum(key[:checkOff]) {
		return "", Secret{}, false
	}
	return id, secret, true
}

// ValidID reports whether id has the shape of a key id: [IDLen] bytes of
// [a-z2-7]. Use it to check ids from anywhere but [Parse].
func ValidID(id string) bool {
	if len(id) != IDLen {
		return false
	}
	var bad byte
	for i := 0; i < len(id); i++ {
		bad |= decTab[id[i]]
	}
	return bad <= 0x1f
}

// Verify checks key against rec, the record stored under the key's id, at
// time now. It returns nil or exactly one of [ErrMalformed], [ErrUnknown]
// (rec is nil), [ErrMismatch], [ErrRevoked] or [ErrExpired], unwrapped.
// The hash is compared in constant time over all [HashLen] bytes, before
// revocation and expiry are looked at. It does not allocate.
func Verify(key string, rec *Record, now time.Time) error {
	id, s, ok := Parse(key)
	if !ok {
		return ErrMalformed
	}
	if rec == nil {
		return ErrUnknown
	}
	if rec.ID != id {
		return ErrMismatch
	}
	h := hash(id, &s)
	if subtle.ConstantTimeCompare(h[:], rec.Hash) != 1 {
		return ErrMismatch
	}
	if rec.Revoked {
		return ErrRevoked
	}
	if rec.ExpiresUnixMs != 0 && now.UnixMilli() >= rec.ExpiresUnixMs {
		return ErrExpired
	}
	return nil
}

// hash is SHA-256(Prefix || id || secret): 52 bytes, one block.
func hash(id string, s *Secret) [HashLen]byte {
	var in [len(Prefix) + IDLen + SecretLen]byte
	n := copy(in[:], Prefix)
	n += copy(in[n:], id)
	copy(in[n:], s.b[:])
	return sha256.Sum256(in[:])
}

// crcTab holds the slicing-by-8 tables of CRC-32 (IEEE), as hash/crc32
// builds them. hash/crc32 itself needs a []byte that escapes (it calls
// through a function variable), which would cost an allocation per key.
// Read-only after package initialisation.
var crcTab = func() *[8][256]uint32 {
	t := new([8][256]uint32)
	t[0] = *crc32.IEEETable
	for i := range 256 {
		c := t[0][i]
		for j := 1; j < 8; j++ {
			c = t[0][c&0xff] ^ c>>8
			t[j][i] = c
		}
	}
	return t
}()

// checksum is CRC-32 (IEEE) of s.
func checksum(s string) uint32 {
	t := crcTab
	c := ^uint32(0)
	for ; len(s) >= 8; s = s[8:] {
		c ^= uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
		c = t[0][s[7]] ^ t[1][s[6]] ^ t[2][s[5]] ^ t[3][s[4]] ^
			t[4][c>>24] ^ t[5][c>>16&0xff] ^ t[6][c>>8&0xff] ^ t[7][c&0xff]
	}
	for i := 0; i < len(s); i++ {
		c = t[0][byte(c)^s[i]] ^ c>>8
	}
	return ^c
}

// decTab maps a base32 digit to its value and every other byte to 0xff.
// Read-only after package initialisation.
var decTab = func() *[256]byte {
	t := new([256]byte)
	for i := range t {
		t[i] = 0xff
	}
	for i := range len(alphabet) {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// decode decodes src (base32, no padding) into exactly dst, rejecting any
// other digit, any other length and nonzero trailing bits. It takes eight
// digits (five bytes) at a time and checks the digits once at the end.
func decode(dst []byte, src string) bool {
	if len(src) != (len(dst)*8+4)/5 {
		return false
	}
	t := decTab
	var bad byte
	n := 0
	for ; len(src) >= 8; src = src[8:] {
		var acc uint64
		for i := range 8 {
			v := t[src[i]]
			bad |= v
			acc = acc<<5 | uint64(v&0x1f)
		}
		_ = dst[n+4]
		dst[n], dst[n+1], dst[n+2], dst[n+3], dst[n+4] =
			byte(acc>>32), byte(acc>>24), byte(acc>>16), byte(acc>>8), byte(acc)
		n += 5
	}
	var acc uint64
	for i := 0; i < len(src); i++ {
		v := t[src[i]]
		bad |= v
		acc = acc<<5 | uint64(v&0x1f)
	}
	slack := len(src)*5 - (len(dst)-n)*8 // 0..4 unused low bits
	if bad > 0x1f || acc&(1<<slack-1) != 0 {
		return false
	}
	acc >>= slack
	for i := len(dst) - 1; i >= n; i-- {
		dst[i] = byte(acc)
		acc >>= 8
	}
	return true
}
