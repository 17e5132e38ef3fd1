package proto

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// The reference: msgpack/v5 by reflection, with codec.go's settings.
// Request and Reply have no msgpack methods, so this never reaches the
// hand-written codec.

func reflectMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

func reflectUnmarshal(data []byte, v any) error {
	return msgpack.NewDecoder(bytes.NewReader(data)).Decode(v)
}

// msgpack/v5 decodes a []byte field by allocating (and clearing) its
// declared length before reading it, so a corrupt length prefix costs up to
// 4 GiB. For arbitrary input the reference therefore decodes into mirrors
// of the hot types with *string for []byte: the decoder accepts the same
// codes for both (bytesLen), a nil pointer still tells nil from empty, and
// strings are read in bounded chunks.

type refRequest struct {
	Method         string  `msgpack:"m"`
	Tenant         string  `msgpack:"t,omitempty"`
	Edge           string  `msgpack:"e,omitempty"`
	Session        string  `msgpack:"s,omitempty"`
	View           string  `msgpack:"v,omitempty"`
	Upstream       string  `msgpack:"u,omitempty"`
	Name           string  `msgpack:"n,omitempty"`
	Protocol       string  `msgpack:"p,omitempty"`
	Principal      string  `msgpack:"a,omitempty"`
	Issuer         string  `msgpack:"q,omitempty"`
	Params         *string `msgpack:"j,omitempty"`
	ClientCaps     *string `msgpack:"c,omitempty"`
	ID             uint64  `msgpack:"i,omitempty"`
	DeadlineUnixMs int64   `msgpack:"d,omitempty"`
	Grant          *string `msgpack:"g,omitempty"`
}

type refError struct {
	Code int32   `msgpack:"c"`
	Msg  string  `msgpack:"m"`
	Data *string `msgpack:"d,omitempty"`
}

type refReply struct {
	Result    *string   `msgpack:"r,omitempty"`
	Error     *refError `msgpack:"x,omitempty"`
	Worker    string    `msgpack:"w,omitempty"`
	Upstream  string    `msgpack:"u,omitempty"`
	ServiceNs int64     `msgpack:"d,omitempty"`
}

func refBytes(p *string) []byte {
	if p == nil {
		return nil
	}
	return append([]byte{}, *p...)
}

// refUnmarshal decodes data into a fresh value of v's type (*Request or
// *Reply) by reflection.
func refUnmarshal(data []byte, v any) (any, error) {
	switch v.(type) {
	case *Request:
		var m refRequest
		err := reflectUnmarshal(data, &m)
		return &Request{Method: m.Method, Tenant: m.Tenant, Edge: m.Edge, Session: m.Session, View: m.View,
			Upstream: m.Upstream, Name: m.Name, Protocol: m.Protocol, Principal: m.Principal, Issuer: m.Issuer, Params: refBytes(m.Params),
			ClientCaps: refBytes(m.ClientCaps), ID: m.ID, DeadlineUnixMs: m.DeadlineUnixMs, Grant: refBytes(m.Grant)}, err
	case *Reply:
		var m refReply
		err := reflectUnmarshal(data, &m)
		r := &Reply{Result: refBytes(m.Result), Worker: m.Worker, Upstream: m.Upstream, ServiceNs: m.ServiceNs}
		if m.Error != nil {
			r.Error = &Error{Code: m.Error.Code, Msg: m.Error.Msg, Data: refBytes(m.Error.Data)}
		}
		return r, err
	}
	return nil, fmt.Errorf("refUnmarshal: unexpected type %T", v)
}

func TestRefUnmarshalIsReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for range 300 {
		for _, v := range []any{randRequest(rng), randReply(rng)} {
			w := &altWriter{rng: rng}
			if r, ok := v.(*Request); ok {
				altRequest(w, r)
			} else {
				altReply(w, v.(*Reply))
			}
			want := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			errWant := reflectUnmarshal(w.b, want)
			got, err := refUnmarshal(w.b, v)
			if (err == nil) != (errWant == nil) || (err == nil && !reflect.DeepEqual(got, want)) {
				t.Fatalf("%x: mirror decode %+v (%v), reflection decode %+v (%v)", w.b, got, err, want, errWant)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// Random values.

var internedSamples = []string{"tools/call", "tools/list", "catalog", "default", "2025-11-25", "2026-07-28"}

func randLen(rng *rand.Rand) int {
	switch rng.IntN(20) {
	case 0:
		return 0
	case 1:
		return 31 + rng.IntN(2) // fixstr / str8 boundary
	case 2:
		return 255 + rng.IntN(2) // 8/16-bit length boundary
	case 3:
		if rng.IntN(8) == 0 { // 16/32-bit length boundary, rarely: they are big
			return 65535 + rng.IntN(2)
		}
		return 300 + rng.IntN(700)
	case 4:
		if rng.IntN(16) == 0 {
			return 65536 + rng.IntN(10000)
		}
		return rng.IntN(300)
	default:
		return rng.IntN(40)
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return b
}

func randString(rng *rand.Rand) string {
	switch rng.IntN(6) {
	case 0:
		return ""
	case 1:
		return internedSamples[rng.IntN(len(internedSamples))]
	case 2: // a near miss of an interned value
		s := internedSamples[rng.IntN(len(internedSamples))]
		return s[:len(s)-1] + "x"
	default:
		return string(randBytes(rng, randLen(rng)))
	}
}

func randPayload(rng *rand.Rand) []byte {
	switch rng.IntN(5) {
	case 0:
		return nil
	case 1:
		return []byte{}
	default:
		return randBytes(rng, randLen(rng))
	}
}

var uintEdges = []uint64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1,
	math.MaxInt64, math.MaxInt64 + 1, math.MaxUint64}

var intEdges = []int64{0, 1, -1, -32, -33, 127, 128, -128, -129, 255, 256, 32767, -32768, -32769,
	65535, 65536, math.MaxInt32, math.MinInt32, math.MinInt32 - 1, math.MaxUint32, math.MaxUint32 + 1,
	math.MaxInt64, math.MinInt64, 1_800_000_000_000}

func randUint(rng *rand.Rand) uint64 {
	switch rng.IntN(3) {
	case 0:
		return uintEdges[rng.IntN(len(uintEdges))]
	case 1:
		return rng.Uint64() >> rng.UintN(64)
	default:
		return rng.Uint64()
	}
}

func randInt(rng *rand.Rand) int64 {
	switch rng.IntN(3) {
	case 0:
		return intEdges[rng.IntN(len(intEdges))]
	case 1:
		return int64(rng.Uint64()) >> rng.UintN(64)
	default:
		return int64(rng.Uint64())
	}
}

func randRequest(rng *rand.Rand) *Request {
	r := &Request{
		Method: randString(rng), Tenant: randString(rng), Edge: randString(rng), Session: randString(rng),
		View: randString(rng), Upstream: randString(rng), Name: randString(rng), Protocol: randString(rng),
		Principal: randString(rng), Issuer: randString(rng), Params: randPayload(rng),
	}
	if rng.IntN(3) == 0 {
		r.ClientCaps = randPayload(rng)
	}
	if rng.IntN(4) > 0 {
		r.ID = randUint(rng)
	}
	if rng.IntN(4) > 0 {
		r.DeadlineUnixMs = randInt(rng)
	}
	if rng.IntN(4) == 0 {
		r.Grant = randPayload(rng)
	}
	return r
}

func randReply(rng *rand.Rand) *Reply {
	r := &Reply{Result: randPayload(rng), Worker: randString(rng)}
	if rng.IntN(3) > 0 { // else as a router, or a worker before Upstream, sends it
		r.Upstream = randString(rng)
		r.ServiceNs = randInt(rng)
	}
	if rng.IntN(2) == 0 {
		r.Error = &Error{Msg: randString(rng), Data: randPayload(rng)}
		if rng.IntN(4) > 0 {
			r.Error.Code = int32(randInt(rng))
		}
	}
	return r
}

// ---------------------------------------------------------------------------
// Encoding equals the reflection encoding; decoding equals the reflection
// decoding.

func checkSameEncoding(t *testing.T, v any) []byte {
	t.Helper()
	want, err := reflectMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding of %+v:\n got %x\nwant %x", v, got, want)
	}
	// Appending to a non-empty buffer keeps the prefix.
	prefix := []byte("prefix")
	got, _ = AppendMarshal(slices.Clip(prefix), v)
	if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("AppendMarshal with a prefix: got %x", got)
	}
	return want
}

// checkSameDecoding decodes data with both decoders into fresh values of
// v's type and requires the same outcome; it returns the fast decoder's.
func checkSameDecoding(t *testing.T, data []byte, v any) (any, error) {
	t.Helper()
	fast := reflect.New(reflect.TypeOf(v).Elem()).Interface()
	errFast := Unmarshal(data, fast)
	slow, errSlow := refUnmarshal(data, v)
	if (errFast == nil) != (errSlow == nil) {
		t.Fatalf("%x: fast decode error %v, reflection decode error %v", data, errFast, errSlow)
	}
	if errFast == nil && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%x: fast decode %+v, reflection decode %+v", data, fast, slow)
	}
	// UnmarshalView decodes the same values, aliasing its own copy of data.
	view := reflect.New(reflect.TypeOf(v).Elem()).Interface()
	errView := UnmarshalView(append([]byte(nil), data...), view)
	if (errView == nil) != (errFast == nil) || errFast == nil && !reflect.DeepEqual(fast, view) {
		t.Fatalf("%x: view decode %+v (%v), fast decode %+v (%v)", data, view, errView, fast, errFast)
	}
	return fast, errFast
}

// mustDecodeSame is checkSameDecoding for input that must decode.
func mustDecodeSame(t *testing.T, data []byte, v any) any {
	t.Helper()
	got, err := checkSameDecoding(t, data, v)
	if err != nil {
		t.Fatalf("%x: %v", data, err)
	}
	return got
}

func TestFastCodecMatchesReflection(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		req := randRequest(rng)
		data := checkSameEncoding(t, req)
		checkSameEncoding(t, *req) // by value too
		got := mustDecodeSame(t, data, req).(*Request)
		if want := sentRequest(req); !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip: got %+v want %+v", got, want)
		}

		rep := randReply(rng)
		data = checkSameEncoding(t, rep)
		checkSameEncoding(t, *rep)
		gotRep := mustDecodeSame(t, data, rep).(*Reply)
		if want := sentReply(rep); !reflect.DeepEqual(gotRep, want) {
			t.Fatalf("round trip: got %+v want %+v", gotRep, want)
		}
		checkOneAlloc(t, req)
		checkOneAlloc(t, rep)
	}
	// Fixed cases.
	for _, v := range []any{
		&Request{}, &Reply{}, &Reply{Error: &Error{}}, (*Request)(nil), (*Reply)(nil),
		&Request{Method: strings.Repeat("m", 70000), Params: make([]byte, 70000), ID: math.MaxUint64, DeadlineUnixMs: math.MinInt64},
		&Reply{Error: &Error{Code: math.MinInt32, Msg: strings.Repeat("x", 256)}},
		&Reply{Error: &Error{Code: math.MaxInt32, Data: []byte{}}, Result: []byte{}},
		&Reply{Upstream: strings.Repeat("u", 70000), ServiceNs: math.MinInt64},
		&Reply{Result: []byte("{}"), Worker: "w", Upstream: "u", ServiceNs: math.MaxInt64},
		&Reply{Error: &Error{Code: CodeOverloaded}, Upstream: "u", ServiceNs: 1},
	} {
		data := checkSameEncoding(t, v)
		if data[0] != mpNil {
			mustDecodeSame(t, data, v)
		}
	}
}

// checkOneAlloc checks the encoder's size precomputation: Marshal grows its
// buffer once, so an underestimate shows as a second allocation.
func checkOneAlloc(t *testing.T, v any) {
	t.Helper()
	if n := testing.AllocsPerRun(1, func() { _, _ = Marshal(v) }); n != 1 {
		t.Fatalf("Marshal(%T) allocates %v times, want 1: size underestimated", v, n)
	}
}

// ---------------------------------------------------------------------------
// Decoding accepts every msgpack encoding the reflection decoder accepts.

// altWriter writes msgpack with randomly chosen (valid, often
// non-canonical) encodings.
type altWriter struct {
	rng *rand.Rand
	b   []byte
}

func (w *altWriter) strOrBin(p []byte, asStr bool) {
	n := len(p)
	var opts []byte
	if asStr && n < 32 {
		opts = append(opts, mpFixStr)
	}
	if n < 256 {
		opts = append(opts, mpStr8, mpBin8)
	}
	if n < 65536 {
		opts = append(opts, mpStr16, mpBin16)
	}
	opts = append(opts, mpStr32, mpBin32)
	switch c := opts[w.rng.IntN(len(opts))]; c {
	case mpFixStr:
		w.b = append(w.b, mpFixStr|byte(n))
	case mpStr8, mpBin8:
		w.b = append(w.b, c, byte(n))
	case mpStr16, mpBin16:
		w.b = binary.BigEndian.AppendUint16(append(w.b, c), uint16(n))
	default:
		w.b = binary.BigEndian.AppendUint32(append(w.b, c), uint32(n))
	}
	w.b = append(w.b, p...)
}

// str writes a string value; "" may be written as nil.
func (w *altWriter) str(s string) {
	if s == "" && w.rng.IntN(3) == 0 {
		w.b = append(w.b, mpNil)
		return
	}
	w.strOrBin([]byte(s), true)
}

// bytes writes a []byte value; nil is nil.
func (w *altWriter) bytes(p []byte) {
	if p == nil {
		w.b = append(w.b, mpNil)
		return
	}
	w.strOrBin(p, true)
}

// integer writes raw 64-bit value v in any encoding that decodes to it
// (for signed fields, v is the int64's bits).
func (w *altWriter) integer(v uint64, signed bool) {
	type enc struct {
		code byte
		n    int
	}
	s := int64(v)
	var opts []enc
	if v <= 127 || (signed && s >= -32 && s < 0) {
		opts = append(opts, enc{0, 0}) // fixnum
	}
	if v == 0 {
		opts = append(opts, enc{mpNil, 0})
	}
	if v <= math.MaxUint8 {
		opts = append(opts, enc{mpUint8, 1})
	}
	if v <= math.MaxUint16 {
		opts = append(opts, enc{mpUint16, 2})
	}
	if v <= math.MaxUint32 {
		opts = append(opts, enc{mpUint32, 4})
	}
	opts = append(opts, enc{mpUint64, 8}, enc{mpInt64, 8})
	if s >= math.MinInt8 && s <= math.MaxInt8 {
		opts = append(opts, enc{mpInt8, 1})
	}
	if s >= math.MinInt16 && s <= math.MaxInt16 {
		opts = append(opts, enc{mpInt16, 2})
	}
	if s >= math.MinInt32 && s <= math.MaxInt32 {
		opts = append(opts, enc{mpInt32, 4})
	}
	e := opts[w.rng.IntN(len(opts))]
	switch {
	case e.code == 0:
		w.b = append(w.b, byte(v))
	case e.n == 0:
		w.b = append(w.b, e.code)
	default:
		w.b = append(w.b, e.code)
		for i := e.n - 1; i >= 0; i-- {
			w.b = append(w.b, byte(v>>(8*i)))
		}
	}
}

func (w *altWriter) mapHeader(n int) {
	switch w.rng.IntN(3) {
	case 0:
		if n < 16 {
			w.b = append(w.b, mpFixMap|byte(n))
			return
		}
		fallthrough
	case 1:
		w.b = binary.BigEndian.AppendUint16(append(w.b, mpMap16), uint16(n))
	default:
		w.b = binary.BigEndian.AppendUint32(append(w.b, mpMap32), uint32(n))
	}
}

func (w *altWriter) arrayHeader(n int) {
	switch w.rng.IntN(3) {
	case 0:
		if n < 16 {
			w.b = append(w.b, mpFixArray|byte(n))
			return
		}
		fallthrough
	case 1:
		w.b = binary.BigEndian.AppendUint16(append(w.b, mpArray16), uint16(n))
	default:
		w.b = binary.BigEndian.AppendUint32(append(w.b, mpArray32), uint32(n))
	}
}

// key writes a map key: a field name in any str/bin encoding.
func (w *altWriter) key(k string) { w.strOrBin([]byte(k), true) }

// junk writes a random value of any type, for unknown keys.
func (w *altWriter) junk(depth int) {
	switch k := w.rng.IntN(12); {
	case k == 0 && depth < 3:
		n := w.rng.IntN(4)
		w.mapHeader(n)
		for range n {
			w.junk(depth + 1)
			w.junk(depth + 1)
		}
	case k == 1 && depth < 3:
		n := w.rng.IntN(4)
		w.arrayHeader(n)
		for range n {
			w.junk(depth + 1)
		}
	case k == 2:
		w.b = append(w.b, []byte{mpNil, mpTrue, mpFalse}[w.rng.IntN(3)])
	case k == 3:
		w.b = binary.BigEndian.AppendUint32(append(w.b, mpFloat), w.rng.Uint32())
	case k == 4:
		w.b = binary.BigEndian.AppendUint64(append(w.b, mpDouble), w.rng.Uint64())
	case k == 5: // fixext
		c := mpFixExt1 + byte(w.rng.IntN(5))
		w.b = append(append(w.b, c, 1), randBytes(w.rng, 1<<(c-mpFixExt1))...)
	case k == 6:
		n := w.rng.IntN(40)
		switch w.rng.IntN(3) {
		case 0:
			w.b = append(w.b, mpExt8, byte(n), 5)
		case 1:
			w.b = binary.BigEndian.AppendUint16(append(w.b, mpExt16), uint16(n))
			w.b = append(w.b, 5)
		default:
			w.b = binary.BigEndian.AppendUint32(append(w.b, mpExt32), uint32(n))
			w.b = append(w.b, 5)
		}
		w.b = append(w.b, randBytes(w.rng, n)...)
	case k == 7:
		w.integer(w.rng.Uint64(), true)
	default:
		w.strOrBin(randBytes(w.rng, w.rng.IntN(40)), true)
	}
}

// entry is one map entry: a key and a function writing its value.
type entry struct {
	key   string
	value func()
}

// writeMap writes entries in random order, with unknown keys and earlier
// duplicate values (which the final value overrides) mixed in.
func (w *altWriter) writeMap(entries []entry, dup func(key string) func()) {
	all := slices.Clone(entries)
	w.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, e := range entries {
		for range 2 {
			if dup != nil && w.rng.IntN(5) == 0 { // a duplicate somewhere before the final value
				at := slices.IndexFunc(all, func(x entry) bool { return x.key == e.key })
				all = slices.Insert(all, w.rng.IntN(at+1), entry{e.key, dup(e.key)})
			}
		}
	}
	for range w.rng.IntN(3) {
		k := []string{"zz", "", "M", "mm", "\x00", "x1"}[w.rng.IntN(6)]
		all = slices.Insert(all, w.rng.IntN(len(all)+1), entry{k, func() { w.junk(0) }})
	}
	w.mapHeader(len(all))
	for _, e := range all {
		if e.key == "" && w.rng.IntN(2) == 0 {
			w.b = append(w.b, mpNil) // a nil key names no field
		} else {
			w.key(e.key)
		}
		e.value()
	}
}

func altRequest(w *altWriter, r *Request) {
	if w.rng.IntN(10) == 0 { // the array form
		w.arrayHeader(reqNumFields)
		for _, s := range []string{r.Method, r.Tenant, r.Edge, r.Session, r.View, r.Upstream, r.Name, r.Protocol, r.Principal, r.Issuer} {
			w.str(s)
		}
		w.bytes(r.Params)
		w.bytes(r.ClientCaps)
		w.integer(r.ID, false)
		w.integer(uint64(r.DeadlineUnixMs), true)
		w.bytes(r.Grant)
		return
	}
	str := func(s string) func() { return func() { w.str(s) } }
	var es []entry
	add := func(k string, omit bool, f func()) {
		if !omit || w.rng.IntN(4) == 0 { // sometimes send empty fields anyway
			es = append(es, entry{k, f})
		}
	}
	add("m", false, str(r.Method))
	add("t", r.Tenant == "", str(r.Tenant))
	add("e", r.Edge == "", str(r.Edge))
	add("s", r.Session == "", str(r.Session))
	add("v", r.View == "", str(r.View))
	add("u", r.Upstream == "", str(r.Upstream))
	add("n", r.Name == "", str(r.Name))
	add("p", r.Protocol == "", str(r.Protocol))
	add("a", r.Principal == "", str(r.Principal))
	add("q", r.Issuer == "", str(r.Issuer))
	add("j", len(r.Params) == 0, func() { w.bytes(r.Params) })
	add("c", len(r.ClientCaps) == 0, func() { w.bytes(r.ClientCaps) })
	add("i", r.ID == 0, func() { w.integer(r.ID, false) })
	add("d", r.DeadlineUnixMs == 0, func() { w.integer(uint64(r.DeadlineUnixMs), true) })
	add("g", len(r.Grant) == 0, func() { w.bytes(r.Grant) })
	w.writeMap(es, func(key string) func() {
		switch key {
		case "i", "d":
			return func() { w.integer(w.rng.Uint64(), true) }
		case "j", "c":
			return func() { w.bytes(randPayload(w.rng)) }
		}
		return func() { w.str(randString(w.rng)) }
	})
}

func altError(w *altWriter, e *Error) {
	if w.rng.IntN(8) == 0 {
		w.arrayHeader(3)
		w.integer(uint64(int64(e.Code)), true)
		w.str(e.Msg)
		w.bytes(e.Data)
		return
	}
	// Any key may be missing: what an earlier value of the same Reply key
	// left (or nothing, after a nil) shows through.
	var es []entry
	for _, e := range []entry{
		{"c", func() { w.integer(uint64(int64(e.Code)), true) }},
		{"m", func() { w.str(e.Msg) }},
		{"d", func() { w.bytes(e.Data) }},
	} {
		if w.rng.IntN(4) > 0 {
			es = append(es, e)
		}
	}
	w.writeMap(es, func(key string) func() {
		if key == "c" {
			return func() { w.integer(w.rng.Uint64(), true) }
		}
		return func() { w.bytes(randPayload(w.rng)) }
	})
}

func altReply(w *altWriter, r *Reply) {
	errVal := func() {
		if r.Error == nil {
			w.b = append(w.b, mpNil)
		} else {
			altError(w, r.Error)
		}
	}
	if w.rng.IntN(10) == 0 { // the array form: every field, in declaration order
		w.arrayHeader(len(replyArrayFields))
		w.bytes(r.Result)
		errVal()
		w.str(r.Worker)
		w.str(r.Upstream)
		w.integer(uint64(r.ServiceNs), true)
		return
	}
	es := []entry{
		{"r", func() { w.bytes(r.Result) }},
		{"x", errVal},
		{"w", func() { w.str(r.Worker) }},
	}
	// The newer fields are often absent, as from a worker that predates
	// them, and sometimes sent empty.
	if r.Upstream != "" || w.rng.IntN(4) == 0 {
		es = append(es, entry{"u", func() { w.str(r.Upstream) }})
	}
	if r.ServiceNs != 0 || w.rng.IntN(4) == 0 {
		es = append(es, entry{"d", func() { w.integer(uint64(r.ServiceNs), true) }})
	}
	w.writeMap(es, func(key string) func() {
		switch key {
		case "x": // an earlier Error value, or nil, merged into or replaced
			if w.rng.IntN(2) == 0 {
				return func() { w.b = append(w.b, mpNil) }
			}
			e := randReply(w.rng).Error
			return func() {
				if e == nil {
					w.b = append(w.b, mpNil)
				} else {
					altError(w, e)
				}
			}
		case "r":
			return func() { w.bytes(randPayload(w.rng)) }
		case "d":
			return func() { w.integer(w.rng.Uint64(), true) }
		}
		return func() { w.str(randString(w.rng)) }
	})
}

func TestFastDecodeAcceptsAlternateEncodings(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for range n {
		w := &altWriter{rng: rng}
		req := randRequest(rng)
		altRequest(w, req)
		if rng.IntN(5) == 0 { // trailing bytes are ignored, as before
			w.b = append(w.b, randBytes(rng, 1+rng.IntN(5))...)
		}
		got := mustDecodeSame(t, w.b, req).(*Request)
		if got.Method != req.Method || got.Session != req.Session || got.ID != req.ID ||
			got.DeadlineUnixMs != req.DeadlineUnixMs || !bytes.Equal(got.Params, req.Params) {
			t.Fatalf("%x: decoded %+v, want %+v", w.b, got, req)
		}

		w = &altWriter{rng: rng}
		rep := randReply(rng)
		altReply(w, rep)
		gotRep := mustDecodeSame(t, w.b, rep).(*Reply)
		// (The Error's fields may come from merged duplicates: the
		// reflection decoder is the judge of those.)
		if gotRep.Worker != rep.Worker || gotRep.Upstream != rep.Upstream || gotRep.ServiceNs != rep.ServiceNs ||
			!bytes.Equal(gotRep.Result, rep.Result) || (gotRep.Error == nil) != (rep.Error == nil) {
			t.Fatalf("%x: decoded %+v, want %+v", w.b, gotRep, rep)
		}
	}
}

func TestFastDecodeArrayEncodedStructs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 500 {
		for _, v := range []any{randRequest(rng), randReply(rng)} {
			var buf bytes.Buffer
			enc := msgpack.NewEncoder(&buf)
			enc.UseArrayEncodedStructs(true)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			mustDecodeSame(t, buf.Bytes(), v)
		}
	}
	for _, in := range [][]byte{{0x90}, {0xc0}, {0x91, 0xa0}, {0x93, 0xc0, 0x90, 0xc0}, {0x93, 0xc0, 0x92, 0x01, 0x02, 0xc0}} {
		checkSameDecoding(t, in, &Request{})
		checkSameDecoding(t, in, &Reply{})
	}
	// A Reply's array form has all its fields, in declaration order: the
	// three-element form of the Reply before Upstream and ServiceNs is
	// rejected, as msgpack/v5 rejects it.
	for _, tc := range []struct {
		name, in string
		want     *Reply // nil: an error
	}{
		{"five", "\x95\xc4\x01r\xc0\xa1w\xa1u\xd1\x01\x00", &Reply{Result: []byte("r"), Worker: "w", Upstream: "u", ServiceNs: 256}},
		{"five with error", "\x95\xc0\x93\x05\xa1m\xc0\xc0\xa1u\x2a", &Reply{Error: &Error{Code: 5, Msg: "m"}, Upstream: "u", ServiceNs: 42}},
		{"five nils", "\x95\xc0\xc0\xc0\xc0\xc0", &Reply{}},
		{"three (old)", "\x93\xc4\x01r\xc0\xa1w", nil},
		{"four", "\x94\xc4\x01r\xc0\xa1w\xa1u", nil},
		{"six", "\x96\xc0\xc0\xc0\xc0\xc0\xc0", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkSameDecoding(t, []byte(tc.in), &Reply{})
			switch {
			case tc.want == nil && err == nil:
				t.Fatalf("decoded %+v, want an error", got)
			case tc.want != nil && err != nil:
				t.Fatal(err)
			case tc.want != nil && !reflect.DeepEqual(got, tc.want):
				t.Fatalf("got %+v want %+v", got, tc.want)
			}
		})
	}
}

// Repeated keys: the last value wins, and a repeated Error merges into the
// one before it unless a nil came between (as msgpack/v5 does).
func TestFastDecodeRepeatedKeys(t *testing.T) {
	const (
		x     = "\xa1x"
		c5    = "\x81\xa1c\x05"
		ma    = "\x81\xa1m\xa1a"
		c5dzz = "\x82\xa1c\x05\xa1d\xa2zz"
	)
	for _, tc := range []struct {
		in   string
		want *Reply
	}{
		{"\x81" + x + "\xc0", &Reply{}},
		{"\x81" + x + "\x80", &Reply{Error: &Error{}}},
		{"\x81" + x + "\x90", &Reply{Error: &Error{}}},
		{"\x81" + x + "\x93\x05\xa1a\xc4\x01z", &Reply{Error: &Error{Code: 5, Msg: "a", Data: []byte("z")}}},
		{"\x82" + x + c5 + x + ma, &Reply{Error: &Error{Code: 5, Msg: "a"}}},
		{"\x83" + x + c5 + x + "\xc0" + x + ma, &Reply{Error: &Error{Msg: "a"}}},
		{"\x82" + x + c5 + x + "\xc0", &Reply{}},
		{"\x82" + x + c5dzz + x + "\x90", &Reply{Error: &Error{}}},
		{"\x83" + x + c5dzz + x + "\x90" + x + ma, &Reply{Error: &Error{Msg: "a"}}},
		{"\x82" + x + c5dzz + x + "\x93\xc0\xc0\xc0", &Reply{Error: &Error{}}},
		{"\x83\xa1w\xa1a\xa1w\xc0\xa1r\xc4\x00", &Reply{Result: []byte{}}},
		{"\x84\xa1u\xa1a\xa1d\x05\xa1u\xa1b\xa1d\xc0", &Reply{Upstream: "b"}},
		{"\x83\xa1d\xd3\x80\x00\x00\x00\x00\x00\x00\x00\xa1u\xc0\xa1d\xcf\xff\xff\xff\xff\xff\xff\xff\xff", &Reply{ServiceNs: -1}},
	} {
		if got := mustDecodeSame(t, []byte(tc.in), &Reply{}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%x: got %+v want %+v", tc.in, got, tc.want)
		}
	}
	req := mustDecodeSame(t, []byte("\x84\xa1m\xaatools/call\xa1m\xa2xy\xa1i\x05\xa1i\xc0"), &Request{})
	if want := (&Request{Method: "xy"}); !reflect.DeepEqual(req, want) {
		t.Errorf("got %+v want %+v", req, want)
	}
}

// Fields absent from the input keep the destination's values, as with the
// reflection decoder.
func TestFastDecodeIntoNonZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 500 {
		base := randRequest(rng)
		data, _ := Marshal(randRequest(rng))
		fast, slow := *base, *base
		fast.Params, slow.Params = bytes.Clone(base.Params), bytes.Clone(base.Params)
		if err := Unmarshal(data, &fast); err != nil {
			t.Fatal(err)
		}
		if err := reflectUnmarshal(data, &slow); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("got %+v want %+v", fast, slow)
		}

		baseRep := randReply(rng)
		baseRep.Error = nil // the fast decoder never writes through an old *Error
		data, _ = Marshal(randReply(rng))
		fastRep, slowRep := *baseRep, *baseRep
		fastRep.Result, slowRep.Result = bytes.Clone(baseRep.Result), bytes.Clone(baseRep.Result)
		if err := Unmarshal(data, &fastRep); err != nil {
			t.Fatal(err)
		}
		if err := reflectUnmarshal(data, &slowRep); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fastRep, slowRep) {
			t.Fatalf("got %+v want %+v", fastRep, slowRep)
		}
	}
	// A decoded Error is fresh: a shared *Error is never written through.
	shared := &Error{Code: 1, Msg: "shared"}
	rep := Reply{Error: shared}
	if err := Unmarshal(golden["reply_error"].(*Reply).mustMarshal(t), &rep); err != nil {
		t.Fatal(err)
	}
	if shared.Code != 1 || shared.Msg != "shared" || rep.Error == shared {
		t.Fatalf("decode wrote through the old *Error: %+v", shared)
	}
}

func (r *Reply) mustMarshal(t *testing.T) []byte {
	t.Helper()
	b, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Decoded byte fields and strings do not alias the input.
func TestFastDecodeCopies(t *testing.T) {
	req, rep := envelopeFixtures()
	data, _ := Marshal(req)
	var got Request
	if err := Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	clear(data)
	if !reflect.DeepEqual(&got, req) {
		t.Fatalf("decoded request changed with its input: %+v", got)
	}
	data, _ = Marshal(rep)
	var gotRep Reply
	if err := Unmarshal(data, &gotRep); err != nil {
		t.Fatal(err)
	}
	clear(data)
	if !reflect.DeepEqual(&gotRep, rep) {
		t.Fatal("decoded reply changed with its input")
	}
}

// Truncations and corruptions of valid encodings: the fast decoder errs
// exactly when the reflection decoder does, agrees with it otherwise, and
// never panics.
func TestFastDecodeCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var inputs [][]byte
	for _, v := range golden {
		if b, err := Marshal(v); err == nil {
			inputs = append(inputs, b)
		}
	}
	for len(inputs) < 80 {
		w := &altWriter{rng: rng}
		if rng.IntN(2) == 0 {
			altRequest(w, randRequest(rng))
		} else {
			altReply(w, randReply(rng))
		}
		if len(w.b) < 400 {
			inputs = append(inputs, w.b)
		}
	}
	for _, in := range inputs {
		for i := range in { // every truncation
			checkSameDecoding(t, in[:i], &Request{})
			checkSameDecoding(t, in[:i], &Reply{})
		}
		for range 30 { // random byte changes
			m := bytes.Clone(in)
			for range 1 + rng.IntN(3) {
				m[rng.IntN(len(m))] = byte(rng.UintN(256))
			}
			checkSameDecoding(t, m, &Request{})
			checkSameDecoding(t, m, &Reply{})
		}
	}
}

// Length prefixes are checked against the input before anything is
// allocated.
func TestFastDecodeBoundedAllocation(t *testing.T) {
	hostile := [][]byte{
		{0xdf, 0xff, 0xff, 0xff, 0xff},                        // map32: 4G entries
		{0xdd, 0xff, 0xff, 0xff, 0xff},                        // array32
		{0x81, 0xa1, 'j', 0xc6, 0xff, 0xff, 0xff, 0xff, 1, 2}, // bin32 params
		{0x81, 0xa1, 'm', 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'},  // str32 method
		{0x81, 0xa1, 'r', 0xc6, 0x7f, 0xff, 0xff, 0xff},       // bin32 result
		{0x81, 0xa1, 'w', 0xda, 0xff, 0xff},                   // str16 worker
		{0x81, 0xa1, 'u', 0xdb, 0x7f, 0xff, 0xff, 0xff, 'a'},  // str32 upstream
		{0x81, 0xa1, 'z', 0xdd, 0xff, 0xff, 0xff, 0xff, 0xc0}, // skipped array32
		{0x81, 0xa1, 'z', 0xdf, 0xff, 0xff, 0xff, 0xff, 0xc0}, // skipped map32
		{0x81, 0xa1, 'z', 0xc9, 0xff, 0xff, 0xff, 0xff, 1},    // skipped ext32
		{0x81, 0xa1, 'x', 0xdf, 0x7f, 0xff, 0xff, 0xff},       // error map32
		{0x81, 0xdb, 0xff, 0xff, 0xff, 0xff, 'k'},             // str32 key
		{0x81, 0xa1, 'z', 0x91, 0x91, 0x91, 0x91, 0x91, 0x91}, // nested, truncated
		{0x81, 0xa1, 'z', 0xdc, 0xff, 0xff, 0x81, 0x81, 0x81}, // array16 of maps, truncated
		{0x81, 0xa1, 'x', 0x81, 0xa1, 'd', 0xc5, 0xff, 0xff},  // bin16 error data
		{0x81, 0xa1, 'x', 0x93, 0xd3, 0, 0, 0, 0, 0, 0, 0, 0}, // array error, truncated
		{0x8a, 0xa1, 'i', 0xcf, 0, 0, 0, 0, 0, 0, 0},          // short uint64
		{0x81, 0xa1, 'd', 0xcb, 0, 0, 0, 0, 0, 0, 0, 0},       // float64 for the service time
		{0x81, 0xc1, 0xc0},                   // never-used code
		{0x81, 0xa1, 'i', 0xca, 0, 0, 0, 0},  // float for an int
		{0x81, 0xa1, 'm', 0x01},              // int for a string
		{0x81, 0xa1, 'x', 0xa1, 'x'},         // str for an Error
		{0x81, 0x01, 0xc0},                   // int key
		{0x93, 0xc0, 0xc0},                   // short array struct
		{0x81, 0xa1, 'd', 0xd3, 0, 0, 0, 0},  // short int64 service time
		{0x95, 0xc0, 0xc0, 0xc0, 0xc0, 0xa0}, // str for the service time (array form)
	}
	for _, in := range hostile {
		failed := false
		for _, v := range []any{&Request{}, &Reply{}} {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range 100 {
				_ = Unmarshal(in, v)
			}
			runtime.ReadMemStats(&after)
			if n := after.TotalAlloc - before.TotalAlloc; n > 64<<10 {
				t.Errorf("%x: %d bytes allocated for 100 decodes into %T", in, n, v)
			}
			_, err := checkSameDecoding(t, in, v)
			failed = failed || err != nil
		}
		if !failed { // each input is malformed for at least one of the types
			t.Errorf("%x decoded without error", in)
		}
	}
}

func TestFastCodecAllocs(t *testing.T) {
	req, rep := envelopeFixtures()
	buf := make([]byte, 0, 4096)
	var outReq Request
	var outRep Reply
	for _, tc := range []struct {
		name string
		max  float64
		f    func()
	}{
		{"encode request", 0, func() { buf, _ = AppendMarshal(buf[:0], req) }},
		{"encode reply", 0, func() { buf, _ = AppendMarshal(buf[:0], rep) }},
		{"round trip request", 2, func() {
			buf, _ = AppendMarshal(buf[:0], req)
			outReq = Request{}
			_ = Unmarshal(buf, &outReq)
		}},
		{"round trip reply", 2, func() {
			buf, _ = AppendMarshal(buf[:0], rep)
			outRep = Reply{}
			_ = Unmarshal(buf, &outRep)
		}},
		{"marshal request", 1, func() { _, _ = Marshal(req) }},
	} {
		if n := testing.AllocsPerRun(100, tc.f); n > tc.max {
			t.Errorf("%s: %v allocations, want <= %v", tc.name, n, tc.max)
		}
	}
	if !reflect.DeepEqual(&outReq, req) || !reflect.DeepEqual(&outRep, rep) {
		t.Fatal("round trip changed the messages")
	}
}

// ---------------------------------------------------------------------------
// Fuzzing.

// sentRequest is r as a decoder sees it after an encode: omitempty drops
// empty byte fields, which a decoder leaves nil.
func sentRequest(r *Request) *Request {
	c := *r
	if len(c.Params) == 0 {
		c.Params = nil
	}
	if len(c.ClientCaps) == 0 {
		c.ClientCaps = nil
	}
	if len(c.Grant) == 0 {
		c.Grant = nil
	}
	return &c
}

func sentReply(r *Reply) *Reply {
	c := *r
	if len(c.Result) == 0 {
		c.Result = nil
	}
	if r.Error != nil {
		e := *r.Error
		if len(e.Data) == 0 {
			e.Data = nil
		}
		c.Error = &e
	}
	return &c
}

func fuzzSeeds(f *testing.F, gen func(*altWriter)) {
	for _, v := range golden {
		if b, err := Marshal(v); err == nil {
			f.Add(b)
		}
	}
	rng := rand.New(rand.NewPCG(11, 12))
	for range 20 {
		w := &altWriter{rng: rng}
		gen(w)
		if len(w.b) < 2048 {
			f.Add(w.b)
		}
	}
}

func FuzzUnmarshalReply(f *testing.F) {
	fuzzSeeds(f, func(w *altWriter) { altReply(w, randReply(w.rng)) })
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := checkSameDecoding(t, data, &Reply{})
		if err != nil {
			return
		}
		r := v.(*Reply)
		again := checkSameEncoding(t, r)
		var r2 Reply
		if err := Unmarshal(again, &r2); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(sentReply(r), &r2) {
			t.Fatalf("decode-encode-decode differs: %+v vs %+v", r, &r2)
		}
	})
}

func TestProtoUnmarshalBoundsReflectedTypes(t *testing.T) {
	// A ListSet whose Items array claims 2^32-1 entries in 6 bytes.
	for _, in := range [][]byte{
		{0x81, 0xa1, 't', 0xdd, 0xff, 0xff, 0xff, 0xff},
		{0x81, 0xa1, 'u', 0xc6, 0xff, 0xff, 0xff, 0xff},
	} {
		var ts ListSet
		if err := Unmarshal(in, &ts); err == nil {
			t.Fatalf("%x decoded", in)
		}
	}
}

// TestUnmarshalViewAliases: UnmarshalView allocates nothing for a Request
// or an error-free Reply, its strings and bytes are views of the input,
// and an append to a byte field copies instead of overwriting the input.
func TestUnmarshalViewAliases(t *testing.T) {
	req, rep := envelopeFixtures()
	data, _ := Marshal(req)
	var got Request
	if n := testing.AllocsPerRun(100, func() { got = Request{}; _ = UnmarshalView(data, &got) }); n != 0 {
		t.Fatalf("UnmarshalView(Request) allocates %v times", n)
	}
	if !reflect.DeepEqual(&got, sentRequest(req)) {
		t.Fatalf("view decode %+v, want %+v", &got, req)
	}
	if &got.Params[0] != &data[bytes.Index(data, req.Params)] || cap(got.Params) != len(got.Params) {
		t.Fatal("Params is not a capped view of the input")
	}
	before := append([]byte(nil), data...)
	_ = append(got.Params, '!')
	if !bytes.Equal(data, before) {
		t.Fatal("an append to Params wrote into the input")
	}
	i := bytes.Index(data, []byte(req.Session))
	data[i] ^= 0x20 // the decoded string sees the input change
	if got.Session == req.Session {
		t.Fatal("Session is not a view of the input")
	}
	data[i] ^= 0x20

	rdata, _ := Marshal(rep)
	var gotRep Reply
	if n := testing.AllocsPerRun(100, func() { gotRep = Reply{}; _ = UnmarshalView(rdata, &gotRep) }); n != 0 {
		t.Fatalf("UnmarshalView(Reply) allocates %v times", n)
	}
	if !reflect.DeepEqual(&gotRep, rep) {
		t.Fatalf("view decode %+v, want %+v", &gotRep, rep)
	}
	if i := bytes.Index(rdata, []byte(rep.Upstream)); unsafe.StringData(gotRep.Upstream) != &rdata[i] {
		t.Fatal("Upstream is not a view of the input")
	}
}
