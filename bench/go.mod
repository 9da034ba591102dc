module github.com/braidmux/braid/bench

go 1.26.0

require (
	github.com/braidmux/braid v0.2.0
	github.com/hashicorp/yamux v0.1.2
	github.com/libp2p/go-libp2p-testing v0.12.0
	github.com/libp2p/go-mplex v0.7.0
	github.com/libp2p/go-yamux/v5 v5.1.0
	github.com/xtaci/smux v1.5.58
	go.uber.org/goleak v1.3.0
)

require (
	github.com/aclements/go-moremath v0.0.0-20210112150236-f10218a38794 // indirect
	github.com/ipfs/go-log/v2 v2.5.1 // indirect
	github.com/libp2p/go-buffer-pool v0.1.0 // indirect
	github.com/mattn/go-isatty v0.0.16 // indirect
	github.com/multiformats/go-varint v0.1.0 // indirect
	go.uber.org/multierr v1.11.0 // indirect
	go.uber.org/zap v1.28.0 // indirect
	golang.org/x/perf v0.0.0-20260908200009-22c9c6c9d4da // indirect
	golang.org/x/sys v0.50.0 // indirect
)

tool golang.org/x/perf/cmd/benchstat

replace github.com/braidmux/braid => ../
