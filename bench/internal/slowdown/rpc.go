package slowdown

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
)

// RPCSize is StreamRPC's request and response: a small RPC's, such as a
// DHT query's or an identify exchange's.
const RPCSize = 64

// StreamRPC runs the request-response pattern of libp2p's protocols, a
// new stream per call, on a session pair of c over loopback TCP: callers
// callers at once each make calls calls, and it returns the time all of
// them took. A call opens a stream, writes an RPCSize request, closes its
// write side, reads the response to the server's FIN and closes the
// stream; the server reads the request to the caller's FIN, writes the
// response and closes its stream.
func StreamRPC(ctx context.Context, c contenders.Contender, callers, calls int) (time.Duration, error) {
	p, err := LoopbackPair(ctx, c)
	if err != nil {
		return 0, err
	}
	defer serveRPCUntilClosed([]*Pair{p})()
	clients := make([]contenders.Session, callers)
	for i := range clients {
		clients[i] = p.Client
	}
	return runCallers(ctx, clients, calls)
}

// serveRPCUntilClosed answers calls on every pair's server, a goroutine
// each, and returns the function that ends them: it closes the pairs (the
// servers' Accept fails then) and waits for the goroutines.
func serveRPCUntilClosed(pairs []*Pair) (closeAndWait func()) {
	var wg sync.WaitGroup
	for _, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveRPC(p.Server)
		}()
	}
	return func() {
		ClosePairs(pairs)
		wg.Wait()
	}
}

// runCallers runs a caller for each of clients at once, each making calls
// calls on its session, and returns the time all of them took.
func runCallers(ctx context.Context, clients []contenders.Session, calls int) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	errc := make(chan error, len(clients))
	for _, s := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if err := callRPC(ctx, s); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errc)
	if err := <-errc; err != nil {
		return 0, ctxErr(ctx, err)
	}
	return elapsed, nil
}

// callRPC makes one call on a new stream of s.
func callRPC(ctx context.Context, s contenders.Session) error {
	st, err := s.Open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	msg := make([]byte, RPCSize)
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
// goroutine of its own, and returns once they are done. A call that
// fails is the caller's to report.
func serveRPC(s contenders.Session) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := s.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Close()
			msg := make([]byte, RPCSize)
			if _, err := io.ReadFull(st, msg); err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, st); err != nil {
				return
			}
			_, _ = st.Write(msg)
		}()
	}
}
