package router

import (
	"bytes"
	"encoding/json"

	"github.com/switchyard-mcp/switchyard/internal/fields"
	"github.com/switchyard-mcp/switchyard/internal/jsonscan"
	"github.com/switchyard-mcp/switchyard/proto"
)

// The router reads a few members of a request's params itself (a list's
// cursor, a completion's ref, a tool's arguments for its parameter
// headers); everything else it routes by comes from the edge
// (proto.Request.Name). It reads them as the edge and the worker do: in
// place, member names matched exactly, and a member the gateway decides
// on that is given twice (package fields) refused with -32600, so that no
// decoder further on reads another value than the one routed by. The edge
// refuses such requests first; this holds for whatever reaches the bus.

// clashError is the answer to params that give a member twice.
func clashError(c fields.Clash) *proto.Error {
	return &proto.Error{Code: proto.CodeInvalidRequest, Msg: c.Message()}
}

// paramMembers reads the params object raw: fn gets the index in
// fields.Params and the value of each member that is one of them. It
// answers params that are not an object (absent and null ones are none),
// and params that give a member twice.
func paramMembers(raw []byte, fn func(i int, v []byte)) *proto.Error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	if !json.Valid(raw) {
		return proto.Errorf(proto.CodeInvalidParams, "invalid params: not JSON")
	}
	sc := fields.Params.Scan()
	if !jsonscan.Members(raw, func(k, v []byte) {
		if i := sc.Key(k); i >= 0 {
			fn(i, v)
		}
	}) {
		return proto.Errorf(proto.CodeInvalidParams, "invalid params: not an object")
	}
	if name, dup := sc.Clash(); dup {
		return clashError(fields.Clash("params." + name))
	}
	return nil
}

// completeRef is the ref of completion/complete params.
type completeRef struct {
	typ, name, uri string
}

// completionRef reads the ref of completion/complete params: its type,
// name (ref/prompt) and uri (ref/resource), each a string when present.
func completionRef(params []byte) (completeRef, *proto.Error) {
	var ref completeRef
	var raw []byte
	if perr := paramMembers(params, func(i int, v []byte) {
		if i == fields.ParamRef {
			raw = v
		}
	}); perr != nil {
		return ref, perr
	}
	if raw == nil || string(raw) == "null" {
		return ref, nil // no type: an unknown reference type
	}
	if raw[0] != '{' {
		return ref, proto.Errorf(proto.CodeInvalidParams, "invalid params: ref is not an object")
	}
	sc := fields.Ref.Scan()
	var bad string
	jsonscan.Members(raw, func(k, v []byte) {
		i := sc.Key(k)
		if i < 0 || string(v) == "null" {
			return
		}
		if v[0] != '"' {
			if bad == "" {
				bad = fields.Ref.Name(i)
			}
			return
		}
		switch i {
		case fields.RefType:
			ref.typ = jsonscan.Unquote(v)
		case fields.RefName:
			ref.name = jsonscan.Unquote(v)
		case fields.RefURI:
			ref.uri = jsonscan.Unquote(v)
		}
	})
	if name, dup := sc.Clash(); dup {
		return ref, clashError(fields.Clash("params.ref." + name))
	}
	if bad != "" {
		return ref, proto.Errorf(proto.CodeInvalidParams, "invalid params: ref.%s is not a string", bad)
	}
	return ref, nil
}
