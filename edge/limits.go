package edge

import (
	"net/http"
	"strconv"

	"github.com/switchyard-mcp/switchyard/internal/limit"
	"github.com/switchyard-mcp/switchyard/proto"
)

// admit holds preq's tenant and principal to the tenant's limits
// (internal/limit, this edge's share of them in the fleet): every request
// that goes on the bus for a client takes a ticket, ended by done when
// its answer is in. Over a limit, it returns the proto.CodeLimited error
// to answer with; nothing is queued.
func (s *Service) admit(preq *proto.Request) (done func(), perr *proto.Error) {
	t, _, ok := s.tenancy.Current().Tenant(preq.Tenant)
	if !ok {
		// Deleted since the request authenticated: the router refuses it.
		return func() {}, nil
	}
	tk, perr := s.limits.Admit(preq.Tenant, t.Limits, preq.Principal)
	if perr != nil {
		s.noteLimited(perr)
		return nil, perr
	}
	return tk.Done, nil
}

// setRetryAfter sets the HTTP Retry-After header (whole seconds, at least
// 1) for a limit refusal, where the edge writes the response itself.
func setRetryAfter(w http.ResponseWriter, err error) {
	pe, ok := err.(*proto.Error)
	if !ok {
		return
	}
	if r, ok := limit.Refused(pe); ok {
		secs := (r.RetryAfter().Milliseconds() + 999) / 1000
		w.Header().Set("Retry-After", strconv.FormatInt(max(secs, 1), 10))
	}
}
