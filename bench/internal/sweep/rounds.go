package sweep

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// minSlice is the shortest slice interleaved rounds may cut a side's
// measured time into: shorter, the calls straddling a slice's ends (not
// counted) and the pause between slices weigh on the rate.
const minSlice = 100 * time.Millisecond

// interleave measures stages sts, the direct stage first (then, say,
// the proxy and the gateway stage), in rounds of one slice of
// sts[0].Duration/rounds per stage, in the order given (direct, proxy,
// gateway, direct, ...), so that every side sees the host's load drift
// alike. Each side dials its sessions once and keeps them open (idle while
// the other sides run); each slice is preceded by the side's warmup
// (discarded). The results are in the order of sts, each stage after the
// first with its per-round retention against the first.
func interleave(ctx context.Context, sts []Stage, rounds int, procs Procs, progress io.Writer) ([]StageResult, error) {
	slice := sts[0].Duration / time.Duration(rounds)
	var rs []*runner
	defer func() {
		for _, r := range rs {
			r.close()
		}
	}()
	for _, st := range sts {
		st.Duration = slice * time.Duration(rounds)
		r, err := openRunner(ctx, st)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	wins := make([][]window, len(rs))
	for round := range rounds {
		for i, r := range rs {
			// Every slice starts from idle sessions: without a warmup of
			// its own, the calls of its first moments would end past a
			// short slice, and for calls of a second or more (a 1,020-tool
			// listing at 64 connections) the slice would count almost
			// none.
			warmup := r.st.Warmup
			label := stageLabel(r.st, fmt.Sprintf("round %d/%d", round+1, rounds))
			w, err := r.window(ctx, warmup, slice, label, procs, progress)
			if err != nil {
				return nil, err
			}
			wins[i] = append(wins[i], w)
		}
	}
	out := make([]StageResult, len(rs))
	for i, r := range rs {
		out[i] = r.result(wins[i])
		out[i].Rounds = rounds
		for _, w := range wins[i] {
			out[i].RoundRequests = append(out[i].RoundRequests, w.requests)
		}
	}
	for i := 1; i < len(out); i++ {
		setRetention(&out[i], out[0].RoundRequests)
	}
	return out, nil
}

// setRetention sets stage res's per-round retention against the direct
// slices' request counts (the slices are equally long, so the ratio of
// counts is that of rates; 0 when direct counted none), and their median
// and extremes.
func setRetention(res *StageResult, direct []int) {
	res.RoundRetention = make([]float64, len(direct))
	for i, n := range direct {
		if n > 0 {
			res.RoundRetention[i] = float64(res.RoundRequests[i]) / float64(n)
		}
	}
	res.Retention = median(res.RoundRetention)
	res.RetentionMin, res.RetentionMax = slices.Min(res.RoundRetention), slices.Max(res.RoundRetention)
}

// median returns the median of vs (the mean of the middle two for an even
// count), which must not be empty; vs is not changed.
func median(vs []float64) float64 {
	s := slices.Sorted(slices.Values(vs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
