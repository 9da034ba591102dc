package braid_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/braidmux/braid"
)

// Two sessions over one connection: the client opens a stream, sends a
// request and half-closes; the server answers on the same stream.
func Example() {
	c1, c2 := net.Pipe()
	client, _ := braid.Client(c1, nil)
	server, _ := braid.Server(c2, nil)
	defer client.Close()
	defer server.Close()

	go func() {
		st, err := server.AcceptStream()
		if err != nil {
			return
		}
		req, _ := io.ReadAll(st)
		fmt.Fprintf(st, "hello, %s", req)
		st.Close()
	}()

	st, err := client.OpenStream(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	st.Write([]byte("braid"))
	st.CloseWrite()
	reply, _ := io.ReadAll(st)
	fmt.Println(string(reply))
	// Output: hello, braid
}

// Coalescing is on by default: frames queued while the conn is busy share
// the next write, and Stats shows it. Here the conn is busy until the
// server starts reading it: the client's first write (its RTT ping) waits
// for the server, so the 1000 small Writes made meanwhile are queued and
// leave together, in one write or two. An idle conn would have carried
// each frame at once, in a write of its own.
func ExampleSession_Stats() {
	c1, c2 := net.Pipe()
	cfg := braid.DefaultConfig()
	cfg.EnableKeepAlive = false
	client, _ := braid.Client(c1, cfg)

	st, _ := client.OpenStream(context.Background())
	for i := 0; i < 1000; i++ {
		st.Write([]byte("tick")) // queued: returns at once
	}
	st.CloseWrite()

	server, _ := braid.Server(c2, cfg)
	defer server.Close()
	peer, _ := server.AcceptStream()
	n, _ := io.Copy(io.Discard, peer)
	fmt.Println("bytes:", n)

	client.Close() // the counters are final once the session is closed
	stats := client.Stats()
	fmt.Println("frames sent: over 1000:", stats.FramesSent > 1000)
	fmt.Println("frames per write: over 100:", stats.FramesSent > 100*stats.Writes)
	// Output:
	// bytes: 4000
	// frames sent: over 1000: true
	// frames per write: over 100: true
}

// A reset carries an error code to the peer.
func ExampleStream_ResetWithError() {
	c1, c2 := net.Pipe()
	client, _ := braid.Client(c1, nil)
	server, _ := braid.Server(c2, nil)
	defer client.Close()
	defer server.Close()

	st, _ := client.OpenStream(context.Background())
	st.Write([]byte("x"))
	peer, _ := server.AcceptStream()
	st.ResetWithError(7)

	_, err := io.ReadAll(peer)
	var se *braid.StreamError
	if errors.As(err, &se) {
		fmt.Println("code", se.ErrorCode, "remote", se.Remote)
	}
	// Output: code 7 remote true
}
