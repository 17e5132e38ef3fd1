package router

import (
	"github.com/switchyard-mcp/switchyard/internal/bus"
	"github.com/switchyard-mcp/switchyard/proto"
)

// place chooses the worker for a call to upstream. See the package doc.
func (s *Service) place(req *proto.Request, upstream string) (string, *proto.Error) {
	all := s.presence.View().ByUpstream[upstream]
	if len(all) == 0 {
		return "", proto.Errorf(proto.CodeNoWorkers, "no worker serves upstream %s", upstream)
	}
	var best *bus.WorkerInfo
	var bestScore uint64
	up := 0
	reason := ""
	for _, w := range all {
		st := w.Upstreams[upstream]
		if !st.Up {
			reason = st.Err
			continue
		}
		up++
		if req.Session == "" {
			continue
		}
		if sc := bus.PlacementScore(req.Edge, req.Session, upstream, w.ID); best == nil || sc > bestScore {
			best, bestScore = w, sc
		}
	}
	if up == 0 {
		// The workers' reason is for operators (it names the upstream's
		// URL, addresses, command): the client gets a fixed phrase for it.
		return "", proto.Errorf(proto.CodeUpstreamUnavailable, "upstream %s is unavailable (%s)", upstream, bus.UnavailableReason(reason))
	}
	if best != nil {
		return best.ID, nil
	}
	n := int(s.rr.Add(1) % uint64(up))
	for _, w := range all {
		if w.Upstreams[upstream].Up {
			if n == 0 {
				return w.ID, nil
			}
			n--
		}
	}
	return "", proto.Errorf(proto.CodeInternal, "placement failed")
}
