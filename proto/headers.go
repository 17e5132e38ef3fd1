package proto

// NATS header names. Headers carry routing facts that a hop must read
// without decoding the body.
const (
	// HdrPlaced is set on the note a router sends to the edge's reply subject
	// before it forwards a call: the worker that owns the call. The edge uses
	// it to fail the call at once if that worker goes away, and to send
	// cancellations to it. The note of a tools/call may carry a
	// [RouteGrant] as its body.
	HdrPlaced = "Sy-Placed"
	// HdrRelay names, on an answer forwarded between edges
	// ([EdgeAnswerSubject]), the relay id the client answered.
	HdrRelay = "Sy-Relay"
	// HdrReplyTo is set by the router on a forwarded call: the edge's reply
	// subject, where the worker answers. The message's own reply subject is
	// the router's, so that NATS's no-responders status for a worker that is
	// gone comes back to the router, which tells the edge the call was not
	// delivered.
	HdrReplyTo = "Sy-Reply-To"
	// HdrChunk marks one part of a chunked reply: "<index>/<count>", 0-based.
	HdrChunk = "Sy-Chunk"
	// HdrMessage ("1") marks a message for the client that is not the
	// reply: a JSON-RPC notification or request the upstream sent while
	// serving the call (progress, logging, sampling, elicitation, roots),
	// as raw JSON in the body, progress tokens already restored to the
	// client's. Workers publish it on the call's reply subject, so it
	// arrives in order before the reply; session-level messages (not tied to
	// a call) go to [EdgeMsgSubject] with [HdrSession]. A request carries a
	// NATS reply subject: the edge publishes the client's JSON-RPC response
	// object there (raw JSON; its "id" is ignored, the worker answers the
	// upstream with the upstream's id).
	HdrMessage = "Sy-Msg"
	// HdrSSEOwner carries, on a legacy SSE POST sent to the edge holding
	// the session ([SSEPostSubject]), what the sending edge authenticated:
	// the view key and the identity's user, NUL-separated.
	HdrSSEOwner = "Sy-Sse-Owner"
	// HdrHTTPStatus is the HTTP status of a reply to an HTTP request
	// carried over the bus ([SSEPostSubject]), in decimal.
	HdrHTTPStatus = "Sy-Http-Status"
	// HdrSession names the client session of a session-level message.
	HdrSession = "Sy-Session"
	// HdrAuthorization carries the client's Authorization header value on
	// a route message, set by the edge only when the catalog has an
	// upstream with [UpstreamAuth].Passthrough. The router copies it onto
	// the forwarded call only when the call's upstream is such an
	// upstream, and strips it otherwise; the worker sends it upstream as
	// the Authorization header of that call's HTTP requests.
	HdrAuthorization = "Sy-Authorization"
)
