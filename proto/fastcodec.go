package proto

// Hand-written msgpack codec for the hot envelopes: Request, Reply and the
// Error inside a Reply. AppendMarshal and Unmarshal dispatch here; every
// other type goes through msgpack/v5 by reflection (codec.go).
//
// Encoding produces exactly the bytes the reflection encoder produces with
// the settings in codec.go (UseCompactInts, SetSortMapKeys): a map with the
// struct's fields in declaration order, keyed by their tag names, with
// omitempty fields left out when empty; fixstr/str8/str16/str32 for strings,
// bin8/bin16/bin32 for byte slices, and the smallest integer encoding. The
// golden files and TestFastCodecMatchesReflection hold it to that.
//
// Decoding accepts whatever msgpack/v5 accepts for these structs: a map
// (fixmap, map16, map32) with keys in any order, unknown keys skipped
// (values of any type), duplicate keys (the last wins), nil for any field,
// str or bin for string and byte fields, any integer width for integer
// fields (converted the way msgpack/v5 converts them), the array form of
// a struct, nil for the whole struct (zeroes it), and trailing bytes after
// the value (ignored). Malformed input yields an error, never a panic, and
// the destination is left untouched on error. Every allocation is bounded by
// the length of the input: lengths are checked against the remaining input
// before anything is allocated, and skipping unknown values is iterative.
//
// As with the reflection decoder, fields absent from the input keep the
// destination's values. Unlike it, decoded byte slices are always fresh
// copies (the reflection decoder reused the destination slice's capacity)
// and a decoded Reply.Error is always a fresh *Error (the reflection decoder
// wrote through an existing pointer, which could be a shared sentinel).
//
// UnmarshalView skips the copies: a Request's or Reply's strings and byte
// slices alias the input, and decoding allocates nothing (bar a Reply's
// *Error).
//
// Decoded strings: well-known values (methods, the default tenant, MCP
// protocol versions) are interned and cost nothing; the other strings of
// one message share a single allocation, built with a strings.Builder and
// sliced. They are ordinary immutable Go strings; retaining one keeps that
// small shared block alive, never the input or the params/result bytes.

import (
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// msgpack format codes used here.
const (
	mpFixMap   = 0x80
	mpFixArray = 0x90
	mpFixStr   = 0xa0
	mpNil      = 0xc0
	mpNeverUse = 0xc1
	mpFalse    = 0xc2
	mpTrue     = 0xc3
	mpBin8     = 0xc4
	mpBin16    = 0xc5
	mpBin32    = 0xc6
	mpExt8     = 0xc7
	mpExt16    = 0xc8
	mpExt32    = 0xc9
	mpFloat    = 0xca
	mpDouble   = 0xcb
	mpUint8    = 0xcc
	mpUint16   = 0xcd
	mpUint32   = 0xce
	mpUint64   = 0xcf
	mpInt8     = 0xd0
	mpInt16    = 0xd1
	mpInt32    = 0xd2
	mpInt64    = 0xd3
	mpFixExt1  = 0xd4
	mpFixExt2  = 0xd5
	mpFixExt4  = 0xd6
	mpFixExt8  = 0xd7
	mpFixExt16 = 0xd8
	mpStr8     = 0xd9
	mpStr16    = 0xda
	mpStr32    = 0xdb
	mpArray16  = 0xdc
	mpArray32  = 0xdd
	mpMap16    = 0xde
	mpMap32    = 0xdf
)

// ---------------------------------------------------------------------------
// Encoding: append-style helpers, each mirroring the msgpack/v5 encoder.

// appendMapHeader mirrors Encoder.EncodeMapLen.
func appendMapHeader(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, mpFixMap|byte(n))
	case n <= math.MaxUint16:
		return append(b, mpMap16, byte(n>>8), byte(n))
	default:
		return append(b, mpMap32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// appendStrHeader mirrors Encoder.encodeStringLen.
func appendStrHeader(b []byte, n int) []byte {
	switch {
	case n < 32:
		return append(b, mpFixStr|byte(n))
	case n < 256:
		return append(b, mpStr8, byte(n))
	case n <= math.MaxUint16:
		return append(b, mpStr16, byte(n>>8), byte(n))
	default:
		return append(b, mpStr32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// appendStr mirrors Encoder.EncodeString (no interning dictionary).
func appendStr(b []byte, s string) []byte {
	return append(appendStrHeader(b, len(s)), s...)
}

// appendBinHeader mirrors Encoder.EncodeBytesLen.
func appendBinHeader(b []byte, n int) []byte {
	switch {
	case n < 256:
		return append(b, mpBin8, byte(n))
	case n <= math.MaxUint16:
		return append(b, mpBin16, byte(n>>8), byte(n))
	default:
		return append(b, mpBin32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// appendBin mirrors Encoder.EncodeBytes: nil is msgpack nil.
func appendBin(b, v []byte) []byte {
	if v == nil {
		return append(b, mpNil)
	}
	return append(appendBinHeader(b, len(v)), v...)
}

// appendUint mirrors Encoder.EncodeUint (compact ints).
func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, mpUint8, byte(n))
	case n <= math.MaxUint16:
		return append(b, mpUint16, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, mpUint32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(b, mpUint64, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// appendInt mirrors Encoder.EncodeInt (compact ints).
func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, mpInt8, byte(n))
	case n >= math.MinInt16:
		return append(b, mpInt16, byte(n>>8), byte(n))
	case n >= math.MinInt32:
		return append(b, mpInt32, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(b, mpInt64, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

// appendKeyStr appends a one-letter field name and a string value.
func appendKeyStr(b []byte, k byte, s string) []byte {
	if len(s) < 32 { // the common case: key and header in one append
		return append(append(b, mpFixStr|1, k, mpFixStr|byte(len(s))), s...)
	}
	return appendStr(append(b, mpFixStr|1, k), s)
}

// appendKeyBin appends a one-letter field name and a non-nil byte value.
func appendKeyBin(b []byte, k byte, v []byte) []byte {
	if len(v) < 256 {
		return append(append(b, mpFixStr|1, k, mpBin8, byte(len(v))), v...)
	}
	return append(appendBinHeader(append(b, mpFixStr|1, k), len(v)), v...)
}

// Encoded sizes, used to grow the destination once.

func strSize(n int) int {
	switch {
	case n < 32:
		return 1 + n
	case n < 256:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	default:
		return 5 + n
	}
}

func binSize(n int) int {
	switch {
	case n < 256:
		return 2 + n
	case n <= math.MaxUint16:
		return 3 + n
	default:
		return 5 + n
	}
}

const maxIntSize = 9 // any integer, including its code

// grow makes room for n more bytes in b, with at most one allocation
// (slices.Grow costs two under the race detector): exactly n for a nil b,
// at least doubling otherwise, so that appending many messages to one
// buffer stays linear.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), max(len(b)+n, 2*cap(b)))
	copy(nb, b)
	return nb
}

// appendRequest appends r's msgpack encoding (r != nil).
func appendRequest(b []byte, r *Request) []byte {
	// One map entry per non-empty field; 2 bytes per one-letter key.
	n, size := 1, 1+2+strSize(len(r.Method))
	for _, s := range [...]string{r.Tenant, r.Edge, r.Session, r.View, r.Upstream, r.Name, r.Protocol, r.Principal, r.Issuer} {
		if s != "" {
			n++
			size += 2 + strSize(len(s))
		}
	}
	if len(r.Params) > 0 {
		n++
		size += 2 + binSize(len(r.Params))
	}
	if len(r.ClientCaps) > 0 {
		n++
		size += 2 + binSize(len(r.ClientCaps))
	}
	if r.ID != 0 {
		n++
		size += 2 + maxIntSize
	}
	if r.DeadlineUnixMs != 0 {
		n++
		size += 2 + maxIntSize
	}
	if len(r.Grant) > 0 {
		n++
		size += 2 + binSize(len(r.Grant))
	}
	b = grow(b, size)

	b = appendMapHeader(b, n) // n <= 14: one byte
	b = appendKeyStr(b, 'm', r.Method)
	if r.Tenant != "" {
		b = appendKeyStr(b, 't', r.Tenant)
	}
	if r.Edge != "" {
		b = appendKeyStr(b, 'e', r.Edge)
	}
	if r.Session != "" {
		b = appendKeyStr(b, 's', r.Session)
	}
	if r.View != "" {
		b = appendKeyStr(b, 'v', r.View)
	}
	if r.Upstream != "" {
		b = appendKeyStr(b, 'u', r.Upstream)
	}
	if r.Name != "" {
		b = appendKeyStr(b, 'n', r.Name)
	}
	if r.Protocol != "" {
		b = appendKeyStr(b, 'p', r.Protocol)
	}
	if r.Principal != "" {
		b = appendKeyStr(b, 'a', r.Principal)
	}
	if r.Issuer != "" {
		b = appendKeyStr(b, 'q', r.Issuer)
	}
	if len(r.Params) > 0 {
		b = appendKeyBin(b, 'j', r.Params)
	}
	if len(r.ClientCaps) > 0 {
		b = appendKeyBin(b, 'c', r.ClientCaps)
	}
	if r.ID != 0 {
		b = appendUint(append(b, mpFixStr|1, 'i'), r.ID)
	}
	if r.DeadlineUnixMs != 0 {
		b = appendInt(append(b, mpFixStr|1, 'd'), r.DeadlineUnixMs)
	}
	if len(r.Grant) > 0 {
		b = appendKeyBin(b, 'g', r.Grant)
	}
	return b
}

func errorSize(e *Error) int {
	size := 1 + 2 + maxIntSize + 2 + strSize(len(e.Msg))
	if len(e.Data) > 0 {
		size += 2 + binSize(len(e.Data))
	}
	return size
}

// appendError appends e's msgpack encoding (e != nil). Code and Msg are not
// omitempty.
func appendError(b []byte, e *Error) []byte {
	n := 2
	if len(e.Data) > 0 {
		n++
	}
	b = appendMapHeader(b, n)
	b = appendInt(append(b, mpFixStr|1, 'c'), int64(e.Code))
	b = appendKeyStr(b, 'm', e.Msg)
	if len(e.Data) > 0 {
		b = appendKeyBin(b, 'd', e.Data)
	}
	return b
}

// appendReply appends r's msgpack encoding (r != nil).
func appendReply(b []byte, r *Reply) []byte {
	n, size := 0, 1
	if len(r.Result) > 0 {
		n++
		size += 2 + binSize(len(r.Result))
	}
	if r.Error != nil {
		n++
		size += 2 + errorSize(r.Error)
	}
	if r.Worker != "" {
		n++
		size += 2 + strSize(len(r.Worker))
	}
	if r.Upstream != "" {
		n++
		size += 2 + strSize(len(r.Upstream))
	}
	if r.ServiceNs != 0 {
		n++
		size += 2 + maxIntSize
	}
	b = grow(b, size)

	b = appendMapHeader(b, n) // n <= 5: one byte
	if len(r.Result) > 0 {
		b = appendKeyBin(b, 'r', r.Result)
	}
	if r.Error != nil {
		b = appendError(append(b, mpFixStr|1, 'x'), r.Error)
	}
	if r.Worker != "" {
		b = appendKeyStr(b, 'w', r.Worker)
	}
	if r.Upstream != "" {
		b = appendKeyStr(b, 'u', r.Upstream)
	}
	if r.ServiceNs != 0 {
		b = appendInt(append(b, mpFixStr|1, 'd'), r.ServiceNs)
	}
	return b
}

// ---------------------------------------------------------------------------
// Decoding.

// errTruncated reports input that ends inside a value, or declares more
// elements or bytes than it has left.
var errTruncated = errors.New("msgpack: unexpected end of input")

// errArrayStruct is msgpack/v5's error for an array-encoded struct with the
// wrong number of elements.
var errArrayStruct = errors.New("msgpack: number of fields in array-encoded struct has changed")

// codeError reports a msgpack code that is not valid where it appears.
type codeError struct {
	code byte
	what string
}

func (e *codeError) Error() string {
	return "msgpack: invalid code=" + strconv.FormatUint(uint64(e.code), 16) + " decoding " + e.what
}

// decoder reads msgpack from a byte slice. Every read is bounds-checked;
// every length read from the input is checked against what is left of it
// before it is used.
type decoder struct {
	b []byte
	i int
}

func (d *decoder) rest() int { return len(d.b) - d.i }

func (d *decoder) code() (byte, error) {
	if d.i >= len(d.b) {
		return 0, errTruncated
	}
	c := d.b[d.i]
	d.i++
	return c, nil
}

// be reads an n-byte (1, 2, 4 or 8) big-endian unsigned integer.
func (d *decoder) be(n int) (uint64, error) {
	if d.rest() < n {
		return 0, errTruncated
	}
	p := d.b[d.i:]
	d.i += n
	switch n {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	default:
		return binary.BigEndian.Uint64(p), nil
	}
}

// advance skips n bytes of payload.
func (d *decoder) advance(n uint64) error {
	if n > uint64(d.rest()) {
		return errTruncated
	}
	d.i += int(n)
	return nil
}

// strBin reads a str, bin or nil value, as msgpack/v5 accepts them for
// string and []byte destinations: the payload is b[off:off+n], and n is -1
// for nil.
func (d *decoder) strBin() (off, n int, err error) {
	if d.i < len(d.b) { // fast path: fixstr
		if c := d.b[d.i]; c&0xe0 == mpFixStr {
			off, n = d.i+1, int(c&0x1f)
			if n <= len(d.b)-off {
				d.i = off + n
				return off, n, nil
			}
			return 0, 0, errTruncated
		}
	}
	return d.strBinSlow()
}

func (d *decoder) strBinSlow() (off, n int, err error) {
	c, err := d.code()
	if err != nil {
		return 0, 0, err
	}
	var m uint64
	switch c {
	case mpNil:
		return 0, -1, nil
	case mpStr8, mpBin8:
		m, err = d.be(1)
	case mpStr16, mpBin16:
		m, err = d.be(2)
	case mpStr32, mpBin32:
		m, err = d.be(4)
	default:
		return 0, 0, &codeError{c, "string/bytes length"}
	}
	if err != nil {
		return 0, 0, err
	}
	off = d.i
	if err := d.advance(m); err != nil {
		return 0, 0, err
	}
	return off, int(m), nil
}

// integer reads any msgpack integer (or nil, as 0) as its 64 raw bits:
// signed encodings are sign-extended, exactly as msgpack/v5's DecodeUint64
// and DecodeInt64 convert them.
func (d *decoder) integer() (uint64, error) {
	c, err := d.code()
	if err != nil {
		return 0, err
	}
	if c <= 0x7f || c >= 0xe0 { // positive or negative fixnum
		return uint64(int64(int8(c))), nil
	}
	switch c {
	case mpNil:
		return 0, nil
	case mpUint8, mpUint16, mpUint32, mpUint64:
		return d.be(1 << (c - mpUint8))
	case mpInt8:
		v, err := d.be(1)
		return uint64(int64(int8(v))), err
	case mpInt16:
		v, err := d.be(2)
		return uint64(int64(int16(v))), err
	case mpInt32:
		v, err := d.be(4)
		return uint64(int64(int32(v))), err
	case mpInt64:
		return d.be(8)
	}
	return 0, &codeError{c, "integer"}
}

// structLen reads the header of a struct: a map (asMap) or an array of n
// elements, or nil (n < 0). Each element needs at least one byte (a map
// entry two), so a count the input cannot hold is rejected at once.
func (d *decoder) structLen() (n int, asMap bool, err error) {
	c, err := d.code()
	if err != nil {
		return 0, false, err
	}
	var m uint64
	switch {
	case c >= mpFixMap && c <= mpFixMap|0x0f:
		m, asMap = uint64(c&0x0f), true
	case c == mpNil:
		return -1, true, nil
	case c == mpMap16 || c == mpMap32:
		m, err = d.be(2 << (c - mpMap16))
		asMap = true
	case c >= mpFixArray && c <= mpFixArray|0x0f:
		m = uint64(c & 0x0f)
	case c == mpArray16 || c == mpArray32:
		m, err = d.be(2 << (c - mpArray16))
	default:
		return 0, false, &codeError{c, "map length"}
	}
	if err != nil {
		return 0, false, err
	}
	per := uint64(1)
	if asMap {
		per = 2
	}
	if m*per > uint64(d.rest()) {
		return 0, false, errTruncated
	}
	return int(m), asMap, nil
}

// key reads a map key as msgpack/v5 does (str, bin or nil) and returns the
// one-letter field name it holds, or 0 for a key that names no field (every
// field name is one letter, and none is NUL).
func (d *decoder) key() (byte, error) {
	if d.i+1 < len(d.b) && d.b[d.i] == mpFixStr|1 { // fast path
		k := d.b[d.i+1]
		d.i += 2
		return k, nil
	}
	off, n, err := d.strBin()
	if err != nil || n != 1 {
		return 0, err
	}
	return d.b[off], nil
}

// skip skips one value of any type. It is iterative: pending counts the
// values still to skip, and since each needs at least one byte, a count
// larger than the remaining input is rejected at once.
func (d *decoder) skip() error {
	for pending := uint64(1); pending > 0; pending-- {
		c, err := d.code()
		if err != nil {
			return err
		}
		var n uint64
		switch {
		case c <= 0x7f || c >= 0xe0: // fixnum
		case c <= 0x8f: // fixmap
			pending += 2 * uint64(c&0x0f)
		case c <= 0x9f: // fixarray
			pending += uint64(c & 0x0f)
		case c <= 0xbf: // fixstr
			err = d.advance(uint64(c & 0x1f))
		default:
			switch c {
			case mpNil, mpFalse, mpTrue:
			case mpUint8, mpInt8:
				err = d.advance(1)
			case mpUint16, mpInt16:
				err = d.advance(2)
			case mpUint32, mpInt32, mpFloat:
				err = d.advance(4)
			case mpUint64, mpInt64, mpDouble:
				err = d.advance(8)
			case mpBin8, mpStr8:
				if n, err = d.be(1); err == nil {
					err = d.advance(n)
				}
			case mpBin16, mpStr16:
				if n, err = d.be(2); err == nil {
					err = d.advance(n)
				}
			case mpBin32, mpStr32:
				if n, err = d.be(4); err == nil {
					err = d.advance(n)
				}
			case mpFixExt1, mpFixExt2, mpFixExt4, mpFixExt8, mpFixExt16:
				err = d.advance(1 + 1<<(c-mpFixExt1)) // type byte + data
			case mpExt8:
				if n, err = d.be(1); err == nil {
					err = d.advance(1 + n)
				}
			case mpExt16:
				if n, err = d.be(2); err == nil {
					err = d.advance(1 + n)
				}
			case mpExt32:
				if n, err = d.be(4); err == nil {
					err = d.advance(1 + n)
				}
			case mpArray16:
				if n, err = d.be(2); err == nil {
					pending += n
				}
			case mpArray32:
				if n, err = d.be(4); err == nil {
					pending += n
				}
			case mpMap16:
				if n, err = d.be(2); err == nil {
					pending += 2 * n
				}
			case mpMap32:
				if n, err = d.be(4); err == nil {
					pending += 2 * n
				}
			default: // mpNeverUse
				err = &codeError{c, "value"}
			}
		}
		if err != nil {
			return err
		}
		if pending-1 > uint64(d.rest()) {
			return errTruncated
		}
	}
	return nil
}

// internString returns a static copy of well-known values, so that decoding
// them allocates nothing. The switch on string(b) does not allocate.
func internString(b []byte) (string, bool) {
	switch string(b) {
	case "tools/call":
		return "tools/call", true
	case "tools/list":
		return "tools/list", true
	case "catalog":
		return "catalog", true
	case "default":
		return "default", true
	case "2024-11-05":
		return "2024-11-05", true
	case "2025-03-26":
		return "2025-03-26", true
	case "2025-06-18":
		return "2025-06-18", true
	case "2025-11-25":
		return "2025-11-25", true
	case "2026-07-28":
		return "2026-07-28", true
	}
	return "", false
}

// span is a decoded str/bin value: data[off:off+n], n == -1 for nil.
type span struct{ off, n int }

// makeStrings turns the spans of the string fields whose bit is set in
// mask into strings: empty and nil values are "", well-known values are
// interned, and the rest share one allocation (at most len(data) bytes).
func makeStrings(data []byte, spans []span, mask uint32, out []string, view bool) {
	if view {
		viewStrings(data, spans, mask, out)
		return
	}
	var pending uint32
	total := 0
	for f, s := range spans {
		if mask&(1<<f) == 0 || s.n <= 0 {
			continue
		}
		if v, ok := internString(data[s.off : s.off+s.n]); ok {
			out[f] = v
			continue
		}
		pending |= 1 << f
		total += s.n
	}
	if total == 0 {
		return
	}
	var sb strings.Builder
	sb.Grow(total) // the one allocation
	for f, s := range spans {
		if pending&(1<<f) != 0 {
			sb.Write(data[s.off : s.off+s.n])
		}
	}
	all, pos := sb.String(), 0
	for f, s := range spans {
		if pending&(1<<f) != 0 {
			out[f] = all[pos : pos+s.n]
			pos += s.n
		}
	}
}

// viewStrings is makeStrings for UnmarshalView: the strings alias data
// (interning would save nothing).
func viewStrings(data []byte, spans []span, mask uint32, out []string) {
	for f, s := range spans {
		if mask&(1<<f) != 0 && s.n > 0 {
			out[f] = unsafe.String(&data[s.off], s.n)
		}
	}
}

// copyBytes copies a decoded bin/str value as msgpack/v5 does: nil for
// msgpack nil, a non-nil empty slice for a zero-length value. With view
// set it returns the value's bytes in data instead, capped so that an
// append cannot write into the rest of data.
func copyBytes(data []byte, s span, view bool) []byte {
	if s.n < 0 {
		return nil
	}
	if view {
		return data[s.off : s.off+s.n : s.off+s.n]
	}
	if s.n == 0 {
		return []byte{}
	}
	return append([]byte(nil), data[s.off:s.off+s.n]...)
}

// Request fields in declaration order (also the array-encoded order).
const (
	reqMethod = iota
	reqTenant
	reqEdge
	reqSession
	reqView
	reqUpstream
	reqName
	reqProtocol
	reqPrincipal
	reqIssuer
	reqParams
	reqCaps
	reqID
	reqDeadline
	reqGrant
	reqNumFields
)

// requestFields maps a one-letter key to 1 + its field (0: no field).
var requestFields = [256]int8{
	'm': 1 + reqMethod, 't': 1 + reqTenant, 'e': 1 + reqEdge, 's': 1 + reqSession,
	'v': 1 + reqView, 'u': 1 + reqUpstream, 'n': 1 + reqName, 'p': 1 + reqProtocol,
	'a': 1 + reqPrincipal, 'q': 1 + reqIssuer, 'j': 1 + reqParams, 'c': 1 + reqCaps, 'i': 1 + reqID, 'd': 1 + reqDeadline,
	'g': 1 + reqGrant,
}

// decodeRequest decodes data into r (r != nil). Fields absent from data
// keep their values; nothing is written to r unless the whole value decodes.
// With view set, strings and byte slices alias data (see UnmarshalView).
func decodeRequest(data []byte, r *Request, view bool) error {
	d := decoder{b: data}
	n, asMap, err := d.structLen()
	if err != nil {
		return err
	}
	if n < 0 || (!asMap && n == 0) {
		*r = Request{}
		return nil
	}
	if !asMap && n != reqNumFields {
		return errArrayStruct
	}

	var (
		spans   [reqCaps + 1]span // the string fields, then Params and ClientCaps
		grant   span
		id, dl  uint64
		present uint32 // bit per field
	)
	for i := 0; i < n; i++ {
		f := i // the array form has the fields in order
		if asMap {
			if p := d.i; p+1 < len(data) && data[p] == mpFixStr|1 { // key() inlined
				f = int(requestFields[data[p+1]]) - 1
				d.i = p + 2
			} else {
				k, err := d.key()
				if err != nil {
					return err
				}
				f = int(requestFields[k]) - 1
			}
		}
		switch {
		case f < 0:
			err = d.skip()
		case f <= reqCaps:
			if p := d.i; p < len(data) && data[p]&0xe0 == mpFixStr { // strBin() inlined
				if l := int(data[p] & 0x1f); l < len(data)-p {
					spans[f] = span{p + 1, l}
					d.i = p + 1 + l
					present |= 1 << f
					continue
				}
			}
			spans[f].off, spans[f].n, err = d.strBin()
		case f == reqID:
			id, err = d.integer()
		case f == reqGrant:
			grant.off, grant.n, err = d.strBin()
		default:
			dl, err = d.integer()
		}
		if err != nil {
			return err
		}
		if f >= 0 {
			present |= 1 << f
		}
	}

	if view {
		viewRequest(data, &spans, present, r)
	} else {
		copyRequest(data, &spans, present, r)
	}
	if present&(1<<reqID) != 0 {
		r.ID = id
	}
	if present&(1<<reqDeadline) != 0 {
		r.DeadlineUnixMs = int64(dl)
	}
	if present&(1<<reqGrant) != 0 {
		r.Grant = copyBytes(data, grant, view)
	}
	return nil
}

// viewStr is the string of span s of data, aliasing data.
func viewStr(data []byte, s span) string {
	if s.n <= 0 {
		return ""
	}
	return unsafe.String(&data[s.off], s.n)
}

// viewRequest sets r's present string and byte fields to views of data.
func viewRequest(data []byte, spans *[reqCaps + 1]span, present uint32, r *Request) {
	if present&(1<<reqMethod) != 0 {
		r.Method = viewStr(data, spans[reqMethod])
	}
	if present&(1<<reqTenant) != 0 {
		r.Tenant = viewStr(data, spans[reqTenant])
	}
	if present&(1<<reqEdge) != 0 {
		r.Edge = viewStr(data, spans[reqEdge])
	}
	if present&(1<<reqSession) != 0 {
		r.Session = viewStr(data, spans[reqSession])
	}
	if present&(1<<reqView) != 0 {
		r.View = viewStr(data, spans[reqView])
	}
	if present&(1<<reqUpstream) != 0 {
		r.Upstream = viewStr(data, spans[reqUpstream])
	}
	if present&(1<<reqName) != 0 {
		r.Name = viewStr(data, spans[reqName])
	}
	if present&(1<<reqProtocol) != 0 {
		r.Protocol = viewStr(data, spans[reqProtocol])
	}
	if present&(1<<reqPrincipal) != 0 {
		r.Principal = viewStr(data, spans[reqPrincipal])
	}
	if present&(1<<reqIssuer) != 0 {
		r.Issuer = viewStr(data, spans[reqIssuer])
	}
	if present&(1<<reqParams) != 0 {
		r.Params = copyBytes(data, spans[reqParams], true)
	}
	if present&(1<<reqCaps) != 0 {
		r.ClientCaps = copyBytes(data, spans[reqCaps], true)
	}
}

// copyRequest sets r's present string and byte fields to copies of data.
func copyRequest(data []byte, spans *[reqCaps + 1]span, present uint32, r *Request) {
	var strs [reqParams]string
	makeStrings(data, spans[:reqParams], present, strs[:], false)
	if present&(1<<reqMethod) != 0 {
		r.Method = strs[reqMethod]
	}
	if present&(1<<reqTenant) != 0 {
		r.Tenant = strs[reqTenant]
	}
	if present&(1<<reqEdge) != 0 {
		r.Edge = strs[reqEdge]
	}
	if present&(1<<reqSession) != 0 {
		r.Session = strs[reqSession]
	}
	if present&(1<<reqView) != 0 {
		r.View = strs[reqView]
	}
	if present&(1<<reqUpstream) != 0 {
		r.Upstream = strs[reqUpstream]
	}
	if present&(1<<reqName) != 0 {
		r.Name = strs[reqName]
	}
	if present&(1<<reqProtocol) != 0 {
		r.Protocol = strs[reqProtocol]
	}
	if present&(1<<reqPrincipal) != 0 {
		r.Principal = strs[reqPrincipal]
	}
	if present&(1<<reqIssuer) != 0 {
		r.Issuer = strs[reqIssuer]
	}
	if present&(1<<reqParams) != 0 {
		r.Params = copyBytes(data, spans[reqParams], false)
	}
	if present&(1<<reqCaps) != 0 {
		r.ClientCaps = copyBytes(data, spans[reqCaps], false)
	}
}

// Reply and Error fields: the bits of one present mask; those up to
// errData also index the str/bin spans.
const (
	repWorker = iota // the strings first, for makeStrings
	repUpstream
	errMsg
	repResult
	errData
	errCode
	repService
	repError    // Reply.Error was decoded (as nil or as a value)
	repErrorNil // ... and its last value was nil
)

// replyArrayFields is the Reply's keys in declaration order: the array
// form of the struct, which msgpack/v5 decodes only with exactly this many
// elements (an empty array zeroes it).
const replyArrayFields = "rxwud"

// decodeError decodes an Error value into spans/code, merging into what an
// earlier value of the same key left (as msgpack/v5 merges into the *Error
// it allocated for the first one).
func (d *decoder) decodeError(spans *[errData + 1]span, code *uint64, present *uint32) error {
	n, asMap, err := d.structLen()
	if err != nil {
		return err
	}
	if n < 0 { // the caller handles nil; an Error can only be nil as a field
		return &codeError{mpNil, "map length"}
	}
	if *present&(1<<repError) == 0 || *present&(1<<repErrorNil) != 0 {
		*present &^= 1<<errMsg | 1<<errData | 1<<errCode // a fresh *Error
	}
	*present = *present&^(1<<repErrorNil) | 1<<repError
	if !asMap && n == 0 { // an empty array zeroes the struct
		*present &^= 1<<errMsg | 1<<errData | 1<<errCode
		return nil
	}
	if !asMap && n != 3 {
		return errArrayStruct
	}
	for i := 0; i < n; i++ {
		var k byte
		if asMap {
			if k, err = d.key(); err != nil {
				return err
			}
		} else {
			k = "cmd"[i]
		}
		f := -1
		switch k {
		case 'c':
			f = errCode
			*code, err = d.integer()
		case 'm':
			f = errMsg
			spans[f].off, spans[f].n, err = d.strBin()
		case 'd':
			f = errData
			spans[f].off, spans[f].n, err = d.strBin()
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
		if f >= 0 {
			*present |= 1 << f
		}
	}
	return nil
}

// decodeReply decodes data into r (r != nil). Fields absent from data keep
// their values; nothing is written to r unless the whole value decodes. A
// decoded Error is always a fresh *Error.
func decodeReply(data []byte, r *Reply, view bool) error {
	d := decoder{b: data}
	n, asMap, err := d.structLen()
	if err != nil {
		return err
	}
	if n < 0 || (!asMap && n == 0) {
		*r = Reply{}
		return nil
	}
	if !asMap && n != len(replyArrayFields) {
		return errArrayStruct
	}
	var (
		spans   [errData + 1]span
		code    uint64
		svc     uint64
		present uint32
	)
	for i := 0; i < n; i++ {
		var k byte
		if asMap {
			if k, err = d.key(); err != nil {
				return err
			}
		} else {
			k = replyArrayFields[i]
		}
		switch k {
		case 'r':
			spans[repResult].off, spans[repResult].n, err = d.strBin()
			present |= 1 << repResult
		case 'w':
			spans[repWorker].off, spans[repWorker].n, err = d.strBin()
			present |= 1 << repWorker
		case 'u':
			spans[repUpstream].off, spans[repUpstream].n, err = d.strBin()
			present |= 1 << repUpstream
		case 'd':
			svc, err = d.integer()
			present |= 1 << repService
		case 'x':
			if d.i < len(d.b) && d.b[d.i] == mpNil {
				d.i++
				present |= 1<<repError | 1<<repErrorNil
			} else {
				err = d.decodeError(&spans, &code, &present)
			}
		default:
			err = d.skip()
		}
		if err != nil {
			return err
		}
	}

	var strs [errMsg + 1]string
	mask := present
	if present&(1<<repErrorNil) != 0 {
		mask &^= 1 << errMsg
	}
	makeStrings(data, spans[:errMsg+1], mask, strs[:], view)
	if present&(1<<repWorker) != 0 {
		r.Worker = strs[repWorker]
	}
	if present&(1<<repUpstream) != 0 {
		r.Upstream = strs[repUpstream]
	}
	if present&(1<<repService) != 0 {
		r.ServiceNs = int64(svc)
	}
	if present&(1<<repResult) != 0 {
		r.Result = copyBytes(data, spans[repResult], view)
	}
	if present&(1<<repError) != 0 {
		if present&(1<<repErrorNil) != 0 {
			r.Error = nil
		} else {
			e := &Error{Msg: strs[errMsg]}
			if present&(1<<errCode) != 0 {
				e.Code = int32(int64(code)) // truncated, as reflect.Value.SetInt does
			}
			if present&(1<<errData) != 0 {
				e.Data = copyBytes(data, spans[errData], view)
			}
			r.Error = e
		}
	}
	return nil
}
