package braid_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

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
	cfg := &braid.Config{DisableKeepAlive: true} // no pings among the frames
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
	// The frames queued while the conn was busy went out coalesced,
	// hundreds per conn write (and writes queued behind their stream's
	// last frame joined it: a few frames of up to 1 KiB).
	fmt.Println("conn writes: under 100:", stats.Writes < 100)
	// Output:
	// bytes: 4000
	// conn writes: under 100: true
}

// A reset aborts both directions and carries an error code to the peer;
// both sides' calls then fail with a *StreamError.
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
		fmt.Println("peer: code", se.ErrorCode, "remote", se.Remote, "is a reset:", errors.Is(err, braid.ErrStreamReset))
	}
	_, err = st.Write([]byte("y"))
	if errors.As(err, &se) {
		fmt.Println("local: code", se.ErrorCode, "remote", se.Remote)
	}
	// Output:
	// peer: code 7 remote true is a reset: true
	// local: code 7 remote false
}

// The zero Config is the default configuration: set only what you change.
// Session.Config shows the values in effect.
func ExampleConfig() {
	c1, c2 := net.Pipe()
	client, err := braid.Client(c1, &braid.Config{MaxStreamWindow: 4 << 20})
	if err != nil {
		fmt.Println(err)
		return
	}
	server, _ := braid.Server(c2, nil) // nil: the defaults too
	defer client.Close()
	defer server.Close()

	cfg := client.Config()
	fmt.Println("protocol:", cfg.Protocol)
	fmt.Println("coalescing:", !cfg.DisableCoalescing, "keep-alive:", !cfg.DisableKeepAlive, cfg.KeepAliveInterval)
	fmt.Println("max window:", cfg.MaxStreamWindow>>20, "MiB, server's:", server.Config().MaxStreamWindow>>20, "MiB")
	fmt.Println("same as DefaultConfig:", *server.Config() == *braid.DefaultConfig())
	// Output:
	// protocol: /yamux/1.0.0
	// coalescing: true keep-alive: true 30s
	// max window: 4 MiB, server's: 16 MiB
	// same as DefaultConfig: true
}

// Validate reports a field out of its bounds as a *ConfigError; Client and
// Server refuse such a Config the same way.
func ExampleConfig_Validate() {
	cfg := &braid.Config{MaxBatchBytes: 1024}
	err := cfg.Validate()
	var ce *braid.ConfigError
	if errors.As(err, &ce) {
		fmt.Println(ce.Field)
	}
	fmt.Println(err)
	// Output:
	// MaxBatchBytes
	// braid: invalid Config.MaxBatchBytes: must be between 4 KiB and 16 MiB, or 0 for the default (64 KiB)
}

// CloseWrite ends one direction: the peer reads io.EOF after the last
// byte, and the stream still carries the answer the other way.
func ExampleStream_CloseWrite() {
	c1, c2 := net.Pipe()
	client, _ := braid.Client(c1, nil)
	server, _ := braid.Server(c2, nil)
	defer client.Close()
	defer server.Close()

	st, _ := client.OpenStream(context.Background())
	st.Write([]byte("ping"))
	st.CloseWrite()
	_, err := st.Write([]byte("more"))
	fmt.Println("write after CloseWrite:", errors.Is(err, braid.ErrStreamClosed))

	peer, _ := server.AcceptStream()
	req, err := io.ReadAll(peer) // ends with the client's CloseWrite
	fmt.Printf("server read %q, err %v\n", req, err)
	peer.Write([]byte("pong"))
	peer.Close()

	reply, err := io.ReadAll(st)
	fmt.Printf("client read %q, err %v\n", reply, err)
	// Output:
	// write after CloseWrite: true
	// server read "ping", err <nil>
	// client read "pong", err <nil>
}

// A session closed with a go-away code ends the peer's session with a
// *GoAwayError carrying the code. The streams it cuts fail with an error
// that matches ErrStreamReset and ErrSessionClosed, never io.EOF, so
// truncated data can't pass for a complete stream.
func ExampleGoAwayError() {
	c1, c2 := net.Pipe()
	client, _ := braid.Client(c1, nil)
	server, _ := braid.Server(c2, nil)
	defer client.Close()

	st, _ := client.OpenStream(context.Background())
	peer, _ := server.AcceptStream()
	server.CloseWithError(42)

	_, err := io.ReadAll(st)
	var ga *braid.GoAwayError
	if errors.As(err, &ga) {
		fmt.Println("client: code", ga.ErrorCode, "remote", ga.Remote)
	}
	fmt.Println("reset:", errors.Is(err, braid.ErrStreamReset),
		"session closed:", errors.Is(err, braid.ErrSessionClosed),
		"EOF:", errors.Is(err, io.EOF))

	_, err = peer.Write([]byte("late"))
	if errors.As(err, &ga) {
		fmt.Println("server: code", ga.ErrorCode, "remote", ga.Remote)
	}
	_, err = client.OpenStream(context.Background())
	fmt.Println("open after the go-away:", errors.Is(err, braid.ErrSessionClosed))
	// Output:
	// client: code 42 remote true
	// reset: true session closed: true EOF: false
	// server: code 42 remote false
	// open after the go-away: true
}

// A deadline wakes a Read that is waiting, and later calls, with
// os.ErrDeadlineExceeded (a net.Error whose Timeout is true), as on any
// net.Conn; the stream stays usable once the deadline is moved.
func ExampleStream_SetReadDeadline() {
	c1, c2 := net.Pipe()
	client, _ := braid.Client(c1, nil)
	server, _ := braid.Server(c2, nil)
	defer client.Close()
	defer server.Close()

	st, _ := client.OpenStream(context.Background())
	peer, _ := server.AcceptStream()

	st.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, err := st.Read(make([]byte, 10)) // nothing comes
	var ne net.Error
	fmt.Println("deadline:", errors.Is(err, os.ErrDeadlineExceeded), "timeout:", errors.As(err, &ne) && ne.Timeout())

	st.SetReadDeadline(time.Time{}) // no deadline
	peer.Write([]byte("hi"))
	buf := make([]byte, 10)
	n, err := st.Read(buf)
	fmt.Printf("read %q, err %v\n", buf[:n], err)
	// Output:
	// deadline: true timeout: true
	// read "hi", err <nil>
}
