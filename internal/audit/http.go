package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-mcp/switchyard/proto"
)

// Searchable is what NewHandler serves: a *Searcher.
type Searchable interface {
	Search(ctx context.Context, q Query) (*Page, error)
}

// NewHandler returns the audit search HTTP API, to mount on an admin
// listener at /audit/ (the paths keep their /audit prefix; a StripPrefix
// mount works too):
//
//	GET /audit/events?tenant=&principal=&upstream=&tool=&method=&outcome=&since=&until=&limit=&cursor=
//
// since and until are RFC 3339 times or durations before now ("15m");
// limit is 1..1000 (default 50); cursor is a previous page's
// next_cursor. The reply is a [Page] as JSON (200), or
// {"error": "..."} with 400 (bad query), 405, 404 (unknown path), 503 (no
// audit stream) or 502 (the stream did not answer). The API reads every
// tenant's events: serve it only where admins alone can reach it.
func NewHandler(s Searchable, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With(proto.LogComponent, "audit-http")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := strings.TrimSuffix(r.URL.Path, "/")
		if path != "/audit/events" && path != "/events" {
			writeJSONError(w, http.StatusNotFound, "not found; GET /audit/events")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSONError(w, http.StatusMethodNotAllowed, "method not allowed")
			return
		}
		q, err := ParseQuery(r.URL.Query(), time.Now())
		if err != nil {
			writeJSONError(w, http.StatusBadRequest, err.Error())
			return
		}
		page, err := s.Search(r.Context(), q)
		switch {
		case errors.Is(err, ErrBadQuery):
			writeJSONError(w, http.StatusBadRequest, err.Error())
			return
		case errors.Is(err, ErrNoStream):
			writeJSONError(w, http.StatusServiceUnavailable, err.Error())
			return
		case err != nil:
			log.Warn("audit search failed", proto.LogErr, err)
			writeJSONError(w, http.StatusBadGateway, "audit stream unavailable")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(page)
	})
}

func writeJSONError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// ParseQuery reads a Query from URL parameters (the names of NewHandler;
// name is an alias of tool). Relative times count back from now. Unknown
// parameters, a parameter given more than once and tool given with name
// are errors wrapping ErrBadQuery (listed in parameter order), so a
// misspelt or ambiguous filter does not silently widen or change a
// search.
func ParseQuery(v url.Values, now time.Time) (Query, error) {
	var q Query
	var errs []error
	if _, ok := v["tool"]; ok {
		if _, ok := v["name"]; ok {
			errs = append(errs, errors.New("tool and name given: name is an alias of tool, give one"))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(v)) {
		vals := v[k]
		if len(vals) != 1 {
			errs = append(errs, fmt.Errorf("%s given %d times", k, len(vals)))
			continue
		}
		val := vals[0]
		switch k {
		case "tenant":
			q.Tenant = val
		case "principal":
			q.Principal = val
		case "upstream":
			q.Upstream = val
		case "tool", "name":
			q.Tool = val
		case "method":
			q.Method = val
		case "outcome":
			q.Outcome = val
		case "since", "until":
			t, err := ParseTime(val, now)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", k, err))
			} else if k == "since" {
				q.Since = t
			} else {
				q.Until = t
			}
		case "limit":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > MaxLimit {
				errs = append(errs, fmt.Errorf("limit: want 1..%d, got %q", MaxLimit, val))
			}
			q.Limit = n
		case "cursor":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("cursor: bad cursor %q", val))
			}
			q.Cursor = n
		default:
			errs = append(errs, fmt.Errorf("unknown parameter %q", k))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Query{}, fmt.Errorf("%w: %v", ErrBadQuery, err)
	}
	return q, nil
}

// ParseTime parses an RFC 3339 time, or a duration ("90m", "24h") meaning
// that long before now.
func ParseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("want an RFC 3339 time or a duration before now, got %q", s)
}
