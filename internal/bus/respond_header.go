package bus

import (
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
)

// RespondReplyHeader is [RespondReply] with headers on the reply (on its
// last chunk when it is chunked, so they arrive with the complete reply).
// hdr may be nil.
func RespondReplyHeader(nc *nats.Conn, reply string, r *proto.Reply, hdr nats.Header) error {
	if hdr == nil {
		return RespondReply(nc, reply, r)
	}
	data, err := proto.Marshal(r)
	if err != nil {
		return err
	}
	limit := int(nc.MaxPayload()) - chunkHeadroom
	if limit <= 0 || len(data) <= limit {
		return nc.PublishMsg(&nats.Msg{Subject: reply, Data: data, Header: hdr})
	}
	n := (len(data) + limit - 1) / limit
	total := "/" + strconv.Itoa(n)
	for i := 0; i < n; i++ {
		h := nats.Header{}
		if i == n-1 {
			h = hdr
		}
		h.Set(proto.HdrChunk, strconv.Itoa(i)+total)
		m := &nats.Msg{Subject: reply, Data: data[i*limit : min((i+1)*limit, len(data))], Header: h}
		if err := nc.PublishMsg(m); err != nil {
			return err
		}
	}
	return nil
}
