// Package bench holds braid's benchmarks and slowdown tests: braid beside
// raw TCP, go-yamux, go-mplex, smux and hashicorp/yamux, on loopback, over
// TLS 1.3 and over simulated links (slowconn).
//
// It is a module of its own (github.com/braidmux/braid/bench) so that a
// program importing braid does not inherit the other muxers' module graphs.
// The report tool is in cmd/braidbench:
//
//	go run ./bench/cmd/braidbench
package bench
