package slowdown

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
)

// The many-sessions workloads: a host with many peers, each on a session
// of its own, all busy at once. With one session, a multiplexer that
// hands work between goroutines (a writer, a read loop) runs its stages
// on the machine's cores side by side; with many, the cores are shared
// among the sessions, and what counts is the CPU a byte or a call costs.

// ManySessions is how many session pairs the many-sessions workloads run
// at once: enough that a 2-core machine's cores are busy with other
// sessions whenever one waits.
const ManySessions = 32

// LoopbackPairs makes n pairs of c, each over a loopback TCP connection
// of its own, for SessionsBulk or SessionsRPC, which close them (or
// ClosePairs); on an error, those made are closed.
func LoopbackPairs(ctx context.Context, c contenders.Contender, n int) ([]*Pair, error) {
	pairs := make([]*Pair, 0, n)
	for range n {
		p, err := LoopbackPair(ctx, c)
		if err != nil {
			ClosePairs(pairs)
			return nil, err
		}
		pairs = append(pairs, p)
	}
	return pairs, nil
}

// ClosePairs closes every pair.
func ClosePairs(pairs []*Pair) {
	for _, p := range pairs {
		p.Close()
	}
}

// SessionsBulk opens a stream on every pair and has every client write
// size bytes on it, in LoopbackWrite writes, while its server reads them,
// all pairs at once. It returns the time from the first write until the
// last server read its last byte, and closes the pairs.
func SessionsBulk(ctx context.Context, pairs []*Pair, size int64) (time.Duration, error) {
	defer ClosePairs(pairs)
	type streams struct{ client, server contenders.Stream }
	open := make([]streams, len(pairs))
	for i, p := range pairs {
		c, s, err := p.OpenPair(ctx)
		if err != nil {
			return 0, err
		}
		open[i] = streams{c, s}
	}
	errc := make(chan error, 2*len(pairs))
	var wg sync.WaitGroup
	start := time.Now()
	for _, st := range open {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if n, err := io.CopyN(io.Discard, st.server, size); err != nil {
				errc <- fmt.Errorf("read %d of %d bytes: %w", n, size, err)
			}
		}()
		go func() {
			defer wg.Done()
			buf := make([]byte, LoopbackWrite)
			for left := size; left > 0; left -= int64(len(buf)) {
				if _, err := st.client.Write(buf[:min(left, int64(len(buf)))]); err != nil {
					errc <- fmt.Errorf("write: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, st := range open {
		st.client.Close()
		st.server.Close()
	}
	close(errc)
	if err := <-errc; err != nil {
		return 0, ctxErr(ctx, err)
	}
	return elapsed, nil
}

// SessionsRPC has every pair's server answer calls (StreamRPC's) and one
// caller on every pair's client make calls calls, all pairs at once. It
// returns the time the calls took, once it has closed the pairs and its
// servers' goroutines have ended.
func SessionsRPC(ctx context.Context, pairs []*Pair, calls int) (time.Duration, error) {
	defer serveRPCUntilClosed(pairs)()
	if len(pairs) == 0 {
		return 0, errors.New("no pairs")
	}
	clients := make([]contenders.Session, len(pairs))
	for i, p := range pairs {
		clients[i] = p.Client
	}
	return runCallers(ctx, clients, calls)
}
