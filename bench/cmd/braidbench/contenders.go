package main

import (
	"github.com/braidmux/braid"
	"github.com/braidmux/braid/bench/internal/contenders"
	yamux "github.com/libp2p/go-yamux/v5"
)

// Names of the two reference contenders every figure is compared with.
const (
	rawName   = "tcp"
	yamuxName = "yamux"
)

// entry is one contender of the report.
type entry struct {
	Name string `json:"name"`
	Desc string `json:"description"`
	// c is the contender with its default config.
	c contenders.Contender
	// many allows the streams of the idle-stream workload; nil means c has
	// no stream limit.
	many func(streams int) contenders.Contender
	// raw marks the raw-TCP limit: over a link it is a raw conn, and it has
	// no streams to hold idle.
	raw bool
}

// allEntries returns every contender, the raw limit first.
func allEntries() []entry {
	return []entry{
		{Name: rawName, Desc: "raw TCP, one connection per stream (the limit)", c: contenders.RawTCP(), raw: true},
		{Name: "braid", Desc: "braid, write coalescing on (default config)", c: contenders.Braid(true),
			many: func(n int) contenders.Contender {
				return contenders.BraidConfig("braid", func(c *braid.Config) { c.MaxIncomingStreams = n })
			}},
		{Name: "braid-nocoalesce", Desc: "braid, write coalescing off", c: contenders.Braid(false),
			many: func(n int) contenders.Contender {
				return contenders.BraidConfig("braid-nocoalesce", func(c *braid.Config) {
					c.DisableCoalescing = true
					c.MaxIncomingStreams = n
				})
			}},
		{Name: yamuxName, Desc: "go-yamux v5 (go-libp2p's default muxer)", c: contenders.Yamux(),
			many: func(n int) contenders.Contender {
				return contenders.YamuxConfig(yamuxName, func(c *yamux.Config) { c.MaxIncomingStreams = uint32(n) })
			}},
		{Name: "mplex", Desc: "go-mplex v0.7.0", c: contenders.Mplex()},
		{Name: "smux", Desc: "xtaci/smux v1.5 (protocol 1, keep-alive off)", c: contenders.Smux()},
		{Name: "hashicorp", Desc: "hashicorp/yamux v0.1 (logging off)", c: contenders.Hashicorp()},
	}
}

// contenderNames lists every contender's name.
func contenderNames() []string {
	var names []string
	for _, e := range allEntries() {
		names = append(names, e.Name)
	}
	return names
}

// forIdle returns the contender that may hold n streams.
func (e entry) forIdle(n int) contenders.Contender {
	if e.many == nil {
		return e.c
	}
	return e.many(n)
}
