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

// Coalescing is on by default; Stats shows how many frames shared a write.
func ExampleSession_Stats() {
	c1, c2 := net.Pipe()
	cfg := braid.DefaultConfig()
	cfg.DisableKeepAlive = true
	client, _ := braid.Client(c1, cfg)
	server, _ := braid.Server(c2, cfg)
	defer client.Close()
	defer server.Close()

	st, _ := client.OpenStream(context.Background())
	peer, _ := server.AcceptStream()
	done := make(chan int64)
	go func() {
		n, _ := io.Copy(io.Discard, peer)
		done <- n
	}()
	for i := 0; i < 1000; i++ {
		st.Write([]byte("tick"))
	}
	st.CloseWrite()
	fmt.Println("bytes:", <-done)
	stats := client.Stats()
	fmt.Println("fewer writes than frames:", stats.Writes < stats.FramesSent)
	// Output:
	// bytes: 4000
	// fewer writes than frames: true
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
