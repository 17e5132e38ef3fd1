package proto

import (
	"bytes"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// The hot envelopes (Request, Reply) have a hand-written codec
// (fastcodec.go) that produces the same bytes as the reflection encoder
// below; every other type goes through msgpack/v5 by reflection.

type encoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encPool = sync.Pool{New: func() any {
	e := &encoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	e.enc.UseCompactInts(true)
	e.enc.SetSortMapKeys(true) // deterministic bytes: KV writers compare them
	return e
}}

var decPool = sync.Pool{New: func() any { return msgpack.NewDecoder(nil) }}

// AppendMarshal appends the msgpack encoding of v to dst and returns it.
// Safe for concurrent use.
func AppendMarshal(dst []byte, v any) ([]byte, error) {
	switch m := v.(type) {
	case *Request:
		if m == nil {
			return append(dst, mpNil), nil
		}
		return appendRequest(dst, m), nil
	case *Reply:
		if m == nil {
			return append(dst, mpNil), nil
		}
		return appendReply(dst, m), nil
	case Request:
		return appendRequest(dst, &m), nil
	case Reply:
		return appendReply(dst, &m), nil
	}
	return appendMarshalReflect(dst, v)
}

// appendMarshalReflect is AppendMarshal by reflection.
func appendMarshalReflect(dst []byte, v any) ([]byte, error) {
	e := encPool.Get().(*encoder)
	e.buf.Reset()
	err := e.enc.Encode(v)
	if err == nil {
		dst = append(dst, e.buf.Bytes()...)
	}
	if e.buf.Cap() <= 64<<10 { // do not pin big buffers in the pool
		encPool.Put(e)
	}
	return dst, err
}

// Marshal returns the msgpack encoding of v.
func Marshal(v any) ([]byte, error) { return AppendMarshal(nil, v) }

// Unmarshal decodes msgpack data into v. Byte fields are copied, so data
// may be reused. A malformed message yields an error, never a panic.
func Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *Request:
		if m != nil {
			return decodeRequest(data, m, false)
		}
	case *Reply:
		if m != nil {
			return decodeReply(data, m, false)
		}
	}
	// msgpack/v5 allocates a bin or array's declared length before reading
	// it, so a 10-byte message could make it allocate gigabytes. Walk the
	// value first: every declared length must fit in what is left.
	d := decoder{b: data}
	if err := d.skip(); err != nil {
		return err
	}
	return unmarshalReflect(data, v)
}

// UnmarshalView is Unmarshal without the copies, for the hot path: the
// strings and byte slices it decodes into a *Request or *Reply alias data
// (a Reply's *Error is still allocated), so decoding allocates nothing.
// data must not be modified or reused while they are in use; a
// nats.Msg's Data, which nats.go allocates per message, qualifies. A
// string kept beyond the message's handling keeps all of data alive:
// strings.Clone it. Byte slices are capped at their own length, so an
// append copies instead of writing into data. Other types decode as with
// Unmarshal.
func UnmarshalView(data []byte, v any) error {
	switch m := v.(type) {
	case *Request:
		if m != nil {
			return decodeRequest(data, m, true)
		}
	case *Reply:
		if m != nil {
			return decodeReply(data, m, true)
		}
	}
	return Unmarshal(data, v)
}

// unmarshalReflect is Unmarshal by reflection.
func unmarshalReflect(data []byte, v any) error {
	d := decPool.Get().(*msgpack.Decoder)
	d.Reset(bytes.NewReader(data))
	err := d.Decode(v)
	d.Reset(nil)
	decPool.Put(d)
	return err
}
