package proto

import (
	"bytes"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

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
	d := decPool.Get().(*msgpack.Decoder)
	d.Reset(bytes.NewReader(data))
	err := d.Decode(v)
	d.Reset(nil)
	decPool.Put(d)
	return err
}
