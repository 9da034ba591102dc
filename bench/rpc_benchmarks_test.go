package bench_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
)

// rpcRequestSize is BenchmarkStreamRPC's request and response: a small
// RPC's, such as a DHT query's or an identify exchange's.
const rpcRequestSize = 64

// rpcCallers are the concurrent callers of BenchmarkStreamRPC: one, for
// the round trip of a stream's life, and 32, for a host serving many
// peers' queries at once.
var rpcCallers = []int{1, 32}

// BenchmarkStreamRPC: the request-response pattern of libp2p's
// protocols, a new stream per call. A caller opens a stream, writes a
// rpcRequestSize request, closes its write side, reads the response to
// the server's FIN and closes the stream; the server reads the request to
// the caller's FIN, writes the response and closes. One op is one call;
// callers run at once, each making its share of b.N calls. Reports calls
// a second (rpc/s), over loopback TCP and TLS, beside go-yamux, smux and
// hashicorp/yamux.
func BenchmarkStreamRPC(b *testing.B) {
	impls := []contenders.Contender{contenders.Braid(true), contenders.Yamux(), contenders.Hashicorp(), contenders.Smux()}
	for _, t := range transports() {
		for _, callers := range rpcCallers {
			for _, c := range impls {
				b.Run(fmt.Sprintf("net=%s/callers=%d/impl=%s", t.name, callers, c.Name), func(b *testing.B) {
					benchStreamRPC(b, t.over(c), callers)
				})
			}
		}
	}
}

func benchStreamRPC(b *testing.B, c contenders.Contender, callers int) {
	p := newPair(b, c)
	served := make(chan error, 1)
	go func() { served <- serveRPC(p.Server) }()
	calls := max(1, b.N/callers)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if err := callRPC(p.Client); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errc)
	for err := range errc {
		b.Fatal(err)
	}
	b.ReportMetric(float64(calls*callers)/elapsed.Seconds(), "rpc/s")
	p.Close()
	<-served // Accept fails once the session is closed
}

// callRPC makes one call on a new stream of s.
func callRPC(s contenders.Session) error {
	st, err := s.Open(context.Background())
	if err != nil {
		return err
	}
	defer st.Close()
	msg := make([]byte, rpcRequestSize)
	if _, err := st.Write(msg); err != nil {
		return err
	}
	if err := st.CloseWrite(); err != nil {
		return err
	}
	if _, err := io.ReadFull(st, msg); err != nil {
		return fmt.Errorf("response: %w", err)
	}
	if n, err := io.Copy(io.Discard, st); err != nil || n != 0 {
		return fmt.Errorf("after the response: %d bytes, %v", n, err)
	}
	return nil
}

// serveRPC answers every stream s accepts until Accept fails, each in a
// goroutine of its own, and returns once they are done.
func serveRPC(s contenders.Session) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := s.Accept()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Close()
			msg := make([]byte, rpcRequestSize)
			if _, err := io.ReadFull(st, msg); err != nil {
				return // the caller fails the benchmark
			}
			if _, err := io.Copy(io.Discard, st); err != nil {
				return
			}
			_, _ = st.Write(msg)
		}()
	}
}
