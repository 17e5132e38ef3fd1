package apikey

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// val is the value of base32 digit c, or -1.
func val(c byte) int {
	if v := decTab[c]; v != 0xff {
		return int(v)
	}
	return -1
}

func mustGenerate(t testing.TB) (string, Record) {
	t.Helper()
	key, rec, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	return key, rec
}

// withCheck returns body (the first checkOff bytes of a key) with a valid
// checksum appended, so tests reach the checks after the checksum.
func withCheck(body string) string {
	c := checksum(body)
	return body + b32.EncodeToString([]byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)})
}

func TestAPIKeyFormat(t *testing.T) {
	key, rec := mustGenerate(t)
	if len(key) != KeyLen || KeyLen != 80 {
		t.Fatalf("len(key) = %d, KeyLen = %d, want 80", len(key), KeyLen)
	}
	if !strings.HasPrefix(key, Prefix) || key[secretOff-1] != '_' {
		t.Fatalf("key %q: bad layout", key)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c != '_' && val(c) < 0 {
			t.Fatalf("key has byte %q at %d", c, i)
		}
	}
	if rec.ID != key[idOff:idOff+IDLen] || !ValidID(rec.ID) {
		t.Fatalf("rec.ID = %q, key %q", rec.ID, key)
	}
	if len(rec.Hash) != HashLen {
		t.Fatalf("len(rec.Hash) = %d", len(rec.Hash))
	}
	if rec.CreatedUnixMs == 0 || rec.Revoked || rec.ExpiresUnixMs != 0 {
		t.Fatalf("rec = %v", rec)
	}
	// The checksum is plain CRC-32 (IEEE) of the text, as documented.
	c := crc32.ChecksumIEEE([]byte(key[:checkOff]))
	if got := b32.EncodeToString([]byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)}); got != key[checkOff:] {
		t.Fatalf("check %q, want %q", key[checkOff:], got)
	}
	// The secret decodes with the standard decoder too.
	id, s, ok := Parse(key)
	if !ok || id != rec.ID {
		t.Fatalf("Parse(generated) = %q, %v", id, ok)
	}
	std, err := b32.DecodeString(key[secretOff:checkOff])
	if err != nil || !bytes.Equal(std, s.Bytes()) {
		t.Fatalf("secret mismatch with encoding/base32: %v", err)
	}
}

func TestAPIKeyGenerateUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		key, rec := mustGenerate(t)
		if seen[key] || seen[rec.ID] {
			t.Fatalf("repeated key or id after %d", len(seen)/2)
		}
		seen[key], seen[rec.ID] = true, true
	}
}

func TestAPIKeyParseMalformed(t *testing.T) {
	key, _ := mustGenerate(t)
	body := key[:checkOff]
	flip := func(s string, i int, c byte) string { return s[:i] + string(c) + s[i+1:] }
	other := func(c byte) byte {
		if c == 'a' {
			return 'b'
		}
		return 'a'
	}
	// A secret whose last digit has a nonzero unused bit: same bytes as
	// the canonical spelling, so it must not parse.
	last := secretOff + secretChars - 1
	if val(body[last])&0xf != 0 {
		t.Fatalf("generated key has nonzero trailing bits: %q", key)
	}
	nonCanonical := withCheck(flip(body, last, alphabet[val(body[last])|1]))
	// A transposition of two adjacent, different secret digits (equal
	// neighbours would swap into the valid key itself).
	sw := secretOff
	for key[sw] == key[sw+1] {
		sw++
	}
	swapped := key[:sw] + key[sw+1:sw+2] + key[sw:sw+1] + key[sw+2:]

	cases := []struct {
		name string
		key  string
	}{
		{"empty", ""},
		{"prefix only", Prefix},
		{"truncated by one", key[:KeyLen-1]},
		{"truncated secret", key[:secretOff+10]},
		{"extra char", key + "a"},
		{"extra underscore", key + "_"},
		{"trailing newline", key + "\n"},
		{"leading space", " " + key[1:]},
		{"wrong prefix", "syx_" + key[4:]},
		{"future prefix", "syk2" + key[4:]},
		{"uppercase prefix", "SYK_" + key[4:]},
		{"uppercase", strings.ToUpper(key)},
		{"uppercase id char", withCheck(flip(body, idOff, 'A'))},
		{"padding in secret", withCheck(flip(body, checkOff-1, '='))},
		{"digit 0 in id", withCheck(flip(body, idOff+3, '0'))},
		{"digit 1 in secret", withCheck(flip(body, secretOff+5, '1'))},
		{"digit 8 in secret", withCheck(flip(body, secretOff+5, '8'))},
		{"dash for separator", withCheck(flip(body, secretOff-1, '-'))},
		{"underscore in id", withCheck(flip(body, idOff+2, '_'))},
		{"non-canonical trailing bits", nonCanonical},
		{"typo in id", flip(key, idOff+1, other(key[idOff+1]))},
		{"typo in secret", flip(key, secretOff+7, other(key[secretOff+7]))},
		{"typo in check", flip(key, KeyLen-2, other(key[KeyLen-2]))},
		{"swapped digits", swapped},
		{"unicode same length", withCheck(body[:secretOff] + "é" + body[secretOff+2:])},
		{"unicode homoglyph", "ѕyk_" + key[5:]},
		{"nul byte", withCheck(flip(body, secretOff, 0))},
		{"high byte", withCheck(flip(body, secretOff, 0xff))},
		{"bearer scheme included", "Bearer " + key},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.key == key {
				t.Fatal("case equals the valid key")
			}
			if id, s, ok := Parse(tc.key); ok || id != "" || s != (Secret{}) {
				t.Fatalf("Parse(%q) = %q, ok %v", tc.key, id, ok)
			}
			if err := Verify(tc.key, &Record{}, time.Now()); err != ErrMalformed {
				t.Fatalf("Verify = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestAPIKeyVerify(t *testing.T) {
	now := time.Now()
	key, rec := mustGenerate(t)
	key2, rec2 := mustGenerate(t)
	// Same id, different secret (with a valid checksum).
	sameID := withCheck(key[:secretOff] + key2[secretOff:checkOff])

	with := func(f func(r *Record)) *Record {
		r := rec
		r.Hash = append([]byte(nil), rec.Hash...)
		f(&r)
		return &r
	}
	cases := []struct {
		name string
		key  string
		rec  *Record
		want error
	}{
		{"valid", key, &rec, nil},
		{"valid with tenant", key, with(func(r *Record) { r.Tenant, r.Principal = "acme", "ci" }), nil},
		{"valid before expiry", key, with(func(r *Record) { r.ExpiresUnixMs = now.Add(time.Second).UnixMilli() }), nil},
		{"malformed", key[:KeyLen-1], &rec, ErrMalformed},
		{"malformed beats unknown", key + "x", nil, ErrMalformed},
		{"unknown", key, nil, ErrUnknown},
		{"wrong secret same id", sameID, &rec, ErrMismatch},
		{"other key's record", key2, &rec, ErrMismatch},
		{"record under wrong id", key, with(func(r *Record) { r.ID = rec2.ID }), ErrMismatch},
		{"hash copied to other id", key2, with(func(r *Record) { r.ID = rec2.ID }), ErrMismatch},
		{"one hash bit off", key, with(func(r *Record) { r.Hash[HashLen-1] ^= 1 }), ErrMismatch},
		{"short hash", key, with(func(r *Record) { r.Hash = r.Hash[:16] }), ErrMismatch},
		{"empty hash", key, with(func(r *Record) { r.Hash = nil }), ErrMismatch},
		{"revoked", key, with(func(r *Record) { r.Revoked = true }), ErrRevoked},
		{"revoked wrong secret", sameID, with(func(r *Record) { r.Revoked = true }), ErrMismatch},
		{"expired", key, with(func(r *Record) { r.ExpiresUnixMs = now.Add(-time.Second).UnixMilli() }), ErrExpired},
		{"expired at the instant", key, with(func(r *Record) { r.ExpiresUnixMs = now.UnixMilli() }), ErrExpired},
		{"expired wrong secret", sameID, with(func(r *Record) { r.ExpiresUnixMs = 1 }), ErrMismatch},
		{"revoked and expired", key, with(func(r *Record) { r.Revoked, r.ExpiresUnixMs = true, 1 }), ErrRevoked},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.key, tc.rec, now)
			if err != tc.want {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), tc.key[min(len(tc.key), secretOff):]) && len(tc.key) > secretOff {
				t.Fatalf("error %q contains the secret", err)
			}
		})
	}
}

func TestAPIKeyNewRecord(t *testing.T) {
	key, rec := mustGenerate(t)
	created := time.UnixMilli(1_700_000_000_000)
	got, err := NewRecord(key, created)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != rec.ID || !bytes.Equal(got.Hash, rec.Hash) || got.CreatedUnixMs != created.UnixMilli() {
		t.Fatalf("NewRecord = %v, want id and hash of %v", got, rec)
	}
	if _, err := NewRecord(key[1:], created); !errors.Is(err, ErrMalformed) {
		t.Fatalf("NewRecord(malformed) err = %v", err)
	}
}

func TestAPIKeyRecordJSON(t *testing.T) {
	key, rec := mustGenerate(t)
	rec.Tenant, rec.Principal, rec.ExpiresUnixMs, rec.Revoked = "acme", "ci", 1_900_000_000_000, true
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{`"id":`, `"hash":`, `"tenant":`, `"principal":`, `"created_unix_ms":`, `"expires_unix_ms":`, `"revoked":`} {
		if !bytes.Contains(data, []byte(f)) {
			t.Errorf("JSON %s lacks %s", data, f)
		}
	}
	var back Record
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.String() != rec.String() || !bytes.Equal(back.Hash, rec.Hash) {
		t.Fatalf("round trip: %v, want %v", back, rec)
	}
	back.Revoked = false
	if err := Verify(key, &back, time.UnixMilli(1_800_000_000_000)); err != nil {
		t.Fatalf("Verify(decoded record) = %v", err)
	}
}

func TestAPIKeyRedaction(t *testing.T) {
	key, rec := mustGenerate(t)
	rec.Tenant = "acme"
	_, s, _ := Parse(key)
	secretText := key[secretOff:checkOff]
	raw := s.Bytes()
	hashes := []string{string(rec.Hash), fmt.Sprintf("%x", rec.Hash), fmt.Sprint(rec.Hash)}

	var out bytes.Buffer
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%T"} {
		fmt.Fprintf(&out, verb+"\n", s)
		fmt.Fprintf(&out, verb+"\n", &s)
		fmt.Fprintf(&out, verb+"\n", rec)
		fmt.Fprintf(&out, verb+"\n", &rec)
		fmt.Fprintf(&out, verb+"\n", struct{ S Secret }{s})
	}
	for _, h := range []slog.Handler{slog.NewTextHandler(&out, nil), slog.NewJSONHandler(&out, nil)} {
		slog.New(h).Info("key", "secret", s, "rec", rec, "recp", &rec, "in_struct", struct{ S Secret }{s})
	}
	j, err := json.Marshal(struct{ S Secret }{s})
	if err != nil {
		t.Fatal(err)
	}
	out.Write(j)
	for _, err := range []error{ErrMalformed, ErrUnknown, ErrMismatch, ErrRevoked, ErrExpired} {
		out.WriteString(err.Error())
	}

	text := out.String()
	if !strings.Contains(text, redacted) || !strings.Contains(text, rec.ID) || !strings.Contains(text, "acme") {
		t.Fatalf("output lacks the redaction marker or the record's id/tenant:\n%s", text)
	}
	leaks := append([]string{secretText, string(raw), fmt.Sprintf("%x", raw), fmt.Sprintf("%X", raw), fmt.Sprint(raw)}, hashes...)
	for _, l := range leaks {
		if strings.Contains(text, l) {
			t.Fatalf("output contains the secret or hash %q:\n%s", l, text)
		}
	}
	if strings.Contains(strings.ToLower(text), secretText[:12]) {
		t.Fatalf("output contains part of the secret:\n%s", text)
	}
}

func TestAPIKeyDecodeMatchesStdlib(t *testing.T) {
	for n := 1; n <= 40; n++ {
		src := bytes.Repeat([]byte{0xa5, 0x3c, 0xff, 0x01}, 10)[:n]
		enc := b32.EncodeToString(src)
		dst := make([]byte, n)
		if !decode(dst, enc) || !bytes.Equal(dst, src) {
			t.Fatalf("n=%d: decode(%q) = %x, want %x", n, enc, dst, src)
		}
	}
}

func TestAPIKeyAllocs(t *testing.T) {
	key, rec := mustGenerate(t)
	now := time.Now()
	if a := testing.AllocsPerRun(100, func() { _, _, _ = Parse(key) }); a != 0 {
		t.Errorf("Parse allocates %v times", a)
	}
	if a := testing.AllocsPerRun(100, func() { _ = Verify(key, &rec, now) }); a != 0 {
		t.Errorf("Verify allocates %v times", a)
	}
}

// FuzzAPIKeyParse: Parse never panics, accepts only keys of the documented
// shape, and every accepted key is the one canonical spelling of its id
// and secret (re-encoding gives the input back); generated keys parse.
func FuzzAPIKeyParse(f *testing.F) {
	for range 4 {
		key, _ := mustGenerate(f)
		f.Add(key)
		f.Add(key[:KeyLen-1])
		f.Add(strings.ToUpper(key))
		f.Add(key + "=")
	}
	f.Add("")
	f.Add(Prefix)
	f.Add("syk_aaaaaaaaaaaaaaaa_" + strings.Repeat("a", secretChars+checkChars))
	f.Fuzz(func(t *testing.T, in string) {
		id, s, ok := Parse(in)
		if !ok {
			if id != "" || s != (Secret{}) {
				t.Fatalf("rejected %q but returned id %q or a secret", in, id)
			}
			if err := Verify(in, &Record{}, time.Time{}); err != ErrMalformed {
				t.Fatalf("Verify(rejected) = %v", err)
			}
			return
		}
		if len(in) != KeyLen || !strings.HasPrefix(in, Prefix) || !ValidID(id) || in[idOff:idOff+IDLen] != id {
			t.Fatalf("accepted %q with id %q", in, id)
		}
		body := Prefix + id + "_" + b32.EncodeToString(s.b[:])
		if withCheck(body) != in {
			t.Fatalf("accepted non-canonical %q (canonical %q)", in, withCheck(body))
		}
		rec, err := NewRecord(in, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(in, &rec, time.Time{}); err != nil {
			t.Fatalf("Verify(own record) = %v", err)
		}
	})
}

// FuzzAPIKeyRoundTrip: the key of any id and secret bytes parses back to
// them (random mutation of a key rarely keeps its checksum valid, so this
// reaches the accepting path that FuzzAPIKeyParse mostly cannot).
func FuzzAPIKeyRoundTrip(f *testing.F) {
	f.Add(make([]byte, idBytes+SecretLen))
	f.Add(bytes.Repeat([]byte{0xff}, idBytes+SecretLen))
	f.Fuzz(func(t *testing.T, in []byte) {
		var raw [idBytes + SecretLen]byte
		copy(raw[:], in)
		key := format(&raw)
		id, s, ok := Parse(key)
		if !ok || id != key[idOff:idOff+IDLen] || !bytes.Equal(s.b[:], raw[idBytes:]) {
			t.Fatalf("Parse(%q) = %q, %v", key, id, ok)
		}
		if id != b32.EncodeToString(raw[:idBytes]) {
			t.Fatalf("id %q, want %q", id, b32.EncodeToString(raw[:idBytes]))
		}
		rec, err := NewRecord(key, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(key, &rec, time.Time{}); err != nil {
			t.Fatalf("Verify(own record) = %v", err)
		}
	})
}

func BenchmarkAPIKeyVerify(b *testing.B) {
	key, rec := mustGenerate(b)
	now := time.Now()
	b.ReportAllocs()
	b.SetBytes(int64(KeyLen))
	for b.Loop() {
		if err := Verify(key, &rec, now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAPIKeyParse(b *testing.B) {
	key, _ := mustGenerate(b)
	b.ReportAllocs()
	b.SetBytes(int64(KeyLen))
	for b.Loop() {
		if _, _, ok := Parse(key); !ok {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkAPIKeyVerifyMalformed(b *testing.B) {
	key, rec := mustGenerate(b)
	bad := key[:checkOff] + "aaaaaaa"
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if err := Verify(bad, &rec, now); err != ErrMalformed {
			b.Fatal(err)
		}
	}
}

func TestAPIKeyChecksumMatchesStdlib(t *testing.T) {
	buf := make([]byte, 200)
	for i := range buf {
		buf[i] = byte(i*131 + 7)
	}
	for n := 0; n <= len(buf); n++ {
		if got, want := checksum(string(buf[:n])), crc32.ChecksumIEEE(buf[:n]); got != want {
			t.Fatalf("n=%d: checksum %08x, want %08x", n, got, want)
		}
	}
}
