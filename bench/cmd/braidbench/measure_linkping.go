package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
)

// The ping beside bulk streams over a simulated link (slowdown.PingPongLink):
// where the link, not the CPU, is the bottleneck, a small message waits
// behind what the sender keeps in flight beyond the path's bandwidth-delay
// product, queued in the link's buffer. No issue names it: the verdict
// holds braid's p50 to go-yamux's, and its bulk to go-yamux's within
// linkBulkShare.

// linkPingMax bounds one run's round trips on a link: go-yamux's round
// trip beside bulk on Broadband is about 200 ms, so a second gives every
// contender a few, after the bulk streams' 16 MiB warm-up.
const linkPingMax = time.Second

// linkBulkShare is the least share of go-yamux's bulk rate braid's bulk
// streams keep beside the ping on a link: the link's goodput bounds every
// contender's, so a lower rate is braid's budget keeping the link idle.
// 0.95 is beyond the rounds' spread (bulk 119.2-121.6 MB/s on LAN in
// session 44's rounds, 99 % of the goodput).
const linkBulkShare = 0.95

// linkPingLinks are the links of the link ping rows: a data-centre LAN,
// home broadband, and the same behind a router's deep buffer, whose
// buffers hold many round trips of a muxer that keeps no bound of its own.
func linkPingLinks() []string { return []string{"LAN", "Broadband", "Bufferbloat"} }

// linkPingCell is the ping beside p.PingNeighbours bulk streams over the
// link named linkName, at the process's GOMAXPROCS.
func linkPingCell(p plan, linkName string) cell {
	link, _ := linkByName(linkName)
	return cell{
		ID: "ping-link/" + linkName, Workload: wPingLink, Groups: []string{wPing},
		Title: fmt.Sprintf("Ping-pong over a link: %d B round trips on one stream beside %d bulk streams, %s (%s; up to %d or %v)",
			slowdown.PingPongSize, p.PingNeighbours, linkName, describeLink(link), p.PingCount, linkPingMax),
		Params:  map[string]string{"neighbours": strconv.Itoa(p.PingNeighbours), "count": strconv.Itoa(p.PingCount), "link": linkName},
		Metrics: pingMetrics(true),
		Note:    fmt.Sprintf("the link's goodput, the most the bulk streams can move: %.1f MB/s", link.Goodput()/1e6),
		measure: func(ctx context.Context, e entry, _ int) (sample, error) {
			r, err := slowdown.PingPongLink(ctx, e.c, link, p.PingCount, p.PingNeighbours, linkPingMax)
			if err != nil {
				return nil, err
			}
			return pingSample(r, true), nil
		},
		na: func(e entry) string {
			if e.raw {
				return "raw TCP gives each stream a loopback connection of its own, off the link"
			}
			return ""
		},
	}
}
