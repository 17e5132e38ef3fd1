package audit

import "math"

// A hand-written msgpack encoder for wireEvent: the Publisher encodes an
// event per request, and the reflection encoder costs about 18
// allocations doing it. It produces exactly the bytes proto.AppendMarshal
// produces for a *wireEvent (a map of the present fields in declaration
// order, the smallest string, bin and integer forms);
// TestAuditCodecMatchesReflection holds it to that. Decoding stays with
// proto.Unmarshal, which bounds its allocations by the input.

func appendWire(b []byte, w *wireEvent) []byte {
	n := 1 // t is always present
	for _, s := range [...]string{w.Tenant, w.Principal, w.Method, w.Upstream, w.Name, w.Outcome, w.TraceID, w.EdgeID} {
		if s != "" {
			n++
		}
	}
	for _, v := range [...]int64{w.ErrorCode, w.Duration, w.UpstreamDur, w.RequestBytes, w.ResponseBytes} {
		if v != 0 {
			n++
		}
	}
	if w.Session {
		n++
	}
	if len(w.Arguments) > 0 {
		n++
	}
	if len(w.Result) > 0 {
		n++
	}
	b = appendMapHeader(b, n)
	b = appendInt(appendStr(b, "t"), w.Time)
	b = keyStr(b, "tn", w.Tenant)
	b = keyStr(b, "p", w.Principal)
	b = keyStr(b, "m", w.Method)
	b = keyStr(b, "u", w.Upstream)
	b = keyStr(b, "n", w.Name)
	b = keyStr(b, "o", w.Outcome)
	b = keyInt(b, "ec", w.ErrorCode)
	b = keyInt(b, "d", w.Duration)
	b = keyInt(b, "ud", w.UpstreamDur)
	b = keyInt(b, "rq", w.RequestBytes)
	b = keyInt(b, "rs", w.ResponseBytes)
	b = keyStr(b, "tr", w.TraceID)
	b = keyStr(b, "e", w.EdgeID)
	if w.Session {
		b = append(appendStr(b, "s"), 0xc3)
	}
	b = keyBin(b, "a", w.Arguments)
	b = keyBin(b, "r", w.Result)
	return b
}

func keyStr(b []byte, k, v string) []byte {
	if v == "" {
		return b
	}
	return appendStr(appendStr(b, k), v)
}

func keyInt(b []byte, k string, v int64) []byte {
	if v == 0 {
		return b
	}
	return appendInt(appendStr(b, k), v)
}

func keyBin(b []byte, k string, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	b = appendStr(b, k)
	switch n := len(v); {
	case n < 256:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xc5, byte(n>>8), byte(n))
	default:
		b = append(b, 0xc6, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, v...)
}

func appendMapHeader(b []byte, n int) []byte {
	if n < 16 {
		return append(b, 0x80|byte(n))
	}
	return append(b, 0xde, byte(n>>8), byte(n))
}

func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n < 256:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = append(b, 0xda, byte(n>>8), byte(n))
	default:
		b = append(b, 0xdb, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, s...)
}

func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return append(b, 0xcd, byte(n>>8), byte(n))
	case n <= math.MaxUint32:
		return append(b, 0xce, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(b, 0xcf, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}

func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return append(b, 0xd1, byte(n>>8), byte(n))
	case n >= math.MinInt32:
		return append(b, 0xd2, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	default:
		return append(b, 0xd3, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32),
			byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
}
