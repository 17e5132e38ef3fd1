package bus

import (
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// chunkHeadroom is left free in every chunk for headers and protocol lines.
const chunkHeadroom = 4 << 10

// Respond publishes payload to the reply subject. A payload larger than the
// connection's max payload is split into chunks sent in order, each with a
// [proto.HdrChunk] header; NATS keeps one publisher's messages in order on
// one subject, so the receiver can append them as they come.
func Respond(nc *nats.Conn, reply string, payload []byte) error {
	limit := int(nc.MaxPayload()) - chunkHeadroom
	if limit <= 0 || len(payload) <= limit {
		return nc.Publish(reply, payload)
	}
	n := (len(payload) + limit - 1) / limit
	total := "/" + strconv.Itoa(n)
	for i := 0; i < n; i++ {
		end := min((i+1)*limit, len(payload))
		m := &nats.Msg{Subject: reply, Data: payload[i*limit : end], Header: nats.Header{}}
		m.Header.Set(proto.HdrChunk, strconv.Itoa(i)+total)
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
	}
	return nil
}

// RespondReply encodes r and responds with it, chunking if needed.
func RespondReply(nc *nats.Conn, reply string, r *proto.Reply) error {
	data, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	return Respond(nc, reply, data)
}

// RespondError responds with a reply carrying only err.
func RespondError(nc *nats.Conn, reply string, err *proto.Error) error {
	return RespondReply(nc, reply, &proto.Reply{Error: err})
}

// parseChunk parses "<index>/<count>".
func parseChunk(h string) (idx, n int, ok bool) {
	for i := 0; i < len(h); i++ {
		if h[i] == '/' {
			a, err1 := strconv.Atoi(h[:i])
			b, err2 := strconv.Atoi(h[i+1:])
			if err1 != nil || err2 != nil || b < 1 || a < 0 || a >= b {
				return 0, 0, false
			}
			return a, b, true
		}
	}
	return 0, 0, false
}
