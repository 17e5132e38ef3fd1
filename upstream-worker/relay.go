package worker

import (
	"context"
	"log/slog"

	"github.com/nats-io/nats.go"

	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/upstream-worker/internal/upstream"
)

// natsRelay carries upstream messages to a client through its edge
// (upstream.Relay): on a call's reply subject, or for a client session
// (session set) on proto.EdgeMsgSubject with proto.HdrSession. Messages
// go out on the worker's connection, the one its replies use, so that
// NATS delivers a call's messages before its reply.
type natsRelay struct {
	nc      *nats.Conn
	log     *slog.Logger
	subject string
	session string // "" for a call's messages
}

func (r *natsRelay) msg(data []byte) *nats.Msg {
	h := nats.Header{proto.HdrMessage: []string{"1"}}
	if r.session != "" {
		h[proto.HdrSession] = []string{r.session}
	}
	return &nats.Msg{Subject: r.subject, Header: h, Data: data}
}

// Notify publishes a notification; a failure (a message over the max
// payload, a closed connection) is logged and the message dropped.
func (r *natsRelay) Notify(data []byte) {
	if err := r.nc.PublishMsg(r.msg(data)); err != nil {
		r.log.Debug("upstream message not relayed", proto.LogSubject, r.subject, proto.LogErr, err)
	}
}

// Ask publishes a request with a reply inbox and waits for the edge to
// publish the client's response there (or for ctx to end; no responders
// when the edge is gone).
func (r *natsRelay) Ask(ctx context.Context, data []byte) ([]byte, error) {
	resp, err := r.nc.RequestMsgWithContext(ctx, r.msg(data))
	if err != nil {
		return nil, err
	}
	return resp.Data, nil
}

// callRelay is the relay of a call answered on subject to.
func (s *Service) callRelay(to string) upstream.Relay {
	return &natsRelay{nc: s.nc, log: s.log, subject: to}
}

// sessionRelay is the relay of the session-level messages of a client
// session on edge (nil when edge is not a valid subject token).
func (s *Service) sessionRelay(edge, session string) upstream.Relay {
	subj, err := proto.EdgeMsgSubject(edge)
	if err != nil || session == "" {
		return nil
	}
	return &natsRelay{nc: s.nc, log: s.log, subject: subj, session: session}
}
