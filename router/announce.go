package router

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/internal/policy"
	"github.com/switchyard-mcp/switchyard/internal/tenancy"
	"github.com/switchyard-mcp/switchyard/proto"
	"github.com/switchyard-mcp/switchyard/router/internal/catalog"
)

// wake asks the announcer to compare the current snapshots with those it
// last announced. It never blocks: a pending wake-up covers this one.
func (s *Service) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// announcer publishes list_changed events until ctx ends: on a wake-up
// (a catalog rebuild, a tenancy watcher's new snapshot) and every
// TenancyPoll (a Source given in the Config has no way to tell).
func (s *Service) announcer(ctx context.Context) {
	tick := time.NewTicker(s.cfg.TenancyPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-tick.C:
		}
		s.announceChanges()
	}
}

// announceChanges publishes, for each tenant and list kind, one
// proto.ListChanged naming the upstreams whose items in that tenant's
// view changed since the last announcement: by a catalog change (items,
// an upstream up or down, an upstream's own list_changed) or by a tenancy
// change (the tenant's policy edited, the tenant added). A tenant whose
// policy is unchanged is only checked on the upstreams whose catalog lists
// changed, so a catalog change costs O(tenants × changed items) and a
// tenancy change O(tenants) plus the changed tenants' lists. It also drops
// the cached views of policies no longer current.
func (s *Service) announceChanges() {
	if !s.ready.Load() {
		return // the catalog is not loaded: nothing to compare yet
	}
	cat, ten := s.snap.Load(), s.tenancy.Current()
	oldCat, oldTen := s.annCat, s.annTen
	if cat == oldCat && ten == oldTen {
		return
	}
	// Route grants were made from the old snapshots: every edge drops
	// them before it hears of list changes.
	if err := s.nc.Publish(proto.SubjEvtRoutes, nil); err != nil {
		s.log.Warn("route grants not revoked", proto.LogErr, err)
	}
	if ten != oldTen {
		s.views.purge(func(k viewKey) bool {
			_, p, ok := ten.Tenant(k.tenant)
			return !ok || p != k.pol
		})
	}
	events := tenantChanges(oldCat, cat, oldTen, ten)
	s.annCat, s.annTen = cat, ten
	for _, ev := range events {
		s.publishChanged(ev)
	}
}

// tenantChanges returns the list_changed events between (oldCat, oldTen)
// and (cat, ten); oldCat and oldTen may be nil (nothing announced yet).
// Tenants that left ten get none: nobody is left to tell.
func tenantChanges(oldCat, cat *catalog.Snapshot, oldTen, ten *tenancy.Snapshot) []*proto.ListChanged {
	var changed [len(listKinds)][]string // upstreams whose catalog list changed, per kind
	for i, kind := range listKinds {
		changed[i] = catalog.ChangedKind(kind, oldCat, cat)
	}
	var all []string // every upstream of either catalog, for tenants whose policy changed
	allDone := false
	var events []*proto.ListChanged
	for t, pol := range ten.All() {
		var oldPol *policy.Policy
		if oldTen != nil {
			_, oldPol, _ = oldTen.Tenant(t.Name)
		}
		for i, kind := range listKinds {
			candidates := changed[i]
			if oldPol != pol {
				if !allDone {
					all, allDone = upstreamsOf(oldCat, cat), true
				}
				candidates = all
			}
			var ups []string
			for _, u := range candidates {
				if !pol.Upstream(u) && !oldPol.Upstream(u) {
					continue
				}
				if !sameVisible(kind, u, oldCat, oldPol, cat, pol) {
					ups = append(ups, u)
				}
			}
			if len(ups) > 0 {
				events = append(events, &proto.ListChanged{Tenant: t.Name, Kind: kind, Upstreams: ups})
			}
		}
	}
	slices.SortFunc(events, func(a, b *proto.ListChanged) int {
		return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.Kind, b.Kind))
	})
	return events
}

// listKinds are the list kinds, in announcement order.
var listKinds = [...]string{proto.KindTools, proto.KindPrompts, proto.KindResources, proto.KindResourceTemplates}

// upstreamsOf returns every upstream of a and b (a may be nil), sorted.
func upstreamsOf(a, b *catalog.Snapshot) []string {
	out := make([]string, 0, len(b.Upstreams))
	for u := range b.Upstreams {
		out = append(out, u)
	}
	if a != nil {
		for u := range a.Upstreams {
			if !b.Upstreams[u] {
				out = append(out, u)
			}
		}
	}
	slices.Sort(out)
	return out
}

// sameVisible reports whether upstream u's items of kind that policy pa
// allows in catalog a are those pb allows in b: the same names, subjects
// and objects, in order; and, if the tenant sees any of them, no new
// list_changed of the upstream in between. a and pa may be nil. It
// allocates nothing.
func sameVisible(kind, u string, a *catalog.Snapshot, pa *policy.Policy, b *catalog.Snapshot, pb *policy.Policy) bool {
	var la, lb []*catalog.Entry
	var na, nb int64
	if a != nil {
		if v := a.List(kind, u); v != nil {
			la, na = v.Listed(), v.Notified()
		}
	}
	if v := b.List(kind, u); v != nil {
		lb, nb = v.Listed(), v.Notified()
	}
	pk := policy.Kind(kind)
	i, j, seen := 0, 0, false
	for {
		for i < len(la) && !pa.Allowed(pk, u, la[i].Subject) {
			i++
		}
		for j < len(lb) && !pb.Allowed(pk, u, lb[j].Subject) {
			j++
		}
		if i == len(la) || j == len(lb) {
			return i == len(la) && j == len(lb) && (na == nb || !seen)
		}
		ea, eb := la[i], lb[j]
		if ea.Name != eb.Name || ea.Subject != eb.Subject || !bytes.Equal(ea.JSON, eb.JSON) {
			return false
		}
		seen = true
		i++
		j++
	}
}

func (s *Service) publishChanged(ev *proto.ListChanged) {
	subj, err := proto.EvtListChangedSubject(ev.Tenant)
	var data []byte
	if err == nil {
		data, err = proto.Marshal(ev)
	}
	if err == nil {
		err = s.nc.Publish(subj, data)
	}
	if err != nil {
		s.log.Warn("list_changed not published", proto.LogTenant, ev.Tenant, proto.LogErr, err)
	}
}
