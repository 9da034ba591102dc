package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

// rpcCell is the request-response pattern of libp2p's protocols, a new
// stream per call (slowdown.StreamRPC), with callers callers at once, over
// t at GOMAXPROCS procs. No issue names it, so the verdict holds it to
// go-yamux. Raw TCP does not apply (see na).
func rpcCell(p plan, t transport, procs, callers int) cell {
	each := max(1, p.RPCCalls/callers)
	id, title := atProcs(fmt.Sprintf("rpc%s/c%d", t.id, callers), fmt.Sprintf(
		"Request-response: %d calls by %s at once, each on a new stream (open, %d B request, CloseWrite, %d B response to the FIN, Close), %s",
		each*callers, callersLabel(strconv.Itoa(callers)), slowdown.RPCSize, slowdown.RPCSize, t.where), procs)
	return cell{
		ID: id, Workload: wRPC, Groups: []string{wRPC},
		Title:   title,
		Params:  map[string]string{"callers": strconv.Itoa(callers), "calls": strconv.Itoa(each * callers), "transport": t.name()},
		Metrics: []metric{{Key: mCallsps, Unit: "calls/s", Higher: true}},
		Procs:   procs,
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			d, err := slowdown.StreamRPC(ctx, t.over(e), callers, each)
			if err != nil {
				return nil, err
			}
			return sample{mCallsps: float64(callers*each) / d.Seconds()}, nil
		},
		na: func(e entry) string {
			if e.raw {
				return "its streams are connections of their own: a connection per call, each left in TIME_WAIT, exhausts the loopback port range"
			}
			return ""
		},
	}
}

// callersLabel is n callers in words: "1 caller", "32 callers".
func callersLabel(n string) string {
	if n == "1" {
		return "1 caller"
	}
	return n + " callers"
}
