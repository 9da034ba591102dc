// Package interop holds braid's interoperability tests against the other
// yamux and mplex implementations a libp2p node meets: go-yamux, go-mplex,
// hashicorp/yamux, js-libp2p (yamux, mplex) and rust-yamux. Each peer runs
// for real, in process (Go) or as a child process (Node.js, Rust).
//
// It is a module of its own (github.com/braidmux/braid/interop) so that a
// program importing braid does not inherit the peers' module graphs.
package interop
