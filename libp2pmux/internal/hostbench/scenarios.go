package hostbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/braidmux/braid/internal/appframe"
)

// Sizes of the pullsync messages (bee's pb.Offer, pb.Want, pb.Delivery).
const (
	chunkSize  = 4 * 1024 // a Swarm chunk
	chunkBatch = 25       // chunks per batched delivery message
	addrSize   = 32       // a chunk address
	getSize    = 16       // a Get request: bin, start, end
	chunkEntry = addrSize + chunkSize
)

// runChunks runs s.Warmup untimed and s.Ops timed chunk-delivery ops, one
// after another on one connection, a new stream each.
func runChunks(ctx context.Context, s Spec) (Result, error) {
	ep, err := newEndpoints(ctx, s, func(st stream) error { return serveChunkOp(st, s.N, s.Batched) })
	if err != nil {
		return Result{}, err
	}
	defer ep.close()
	op := func() error {
		if err := chunkOp(ctx, ep, s.N); err != nil {
			return ep.serverError(err)
		}
		return nil
	}
	for range s.Warmup {
		if err := op(); err != nil {
			return Result{}, err
		}
	}
	return measure(s.Ops, func() error {
		for range s.Ops {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	})
}

// chunkOp is the client's side of one op.
func chunkOp(ctx context.Context, ep *endpoints, n int) error {
	st, err := ep.openStream(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Write(appframe.New(getSize)); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	offer, err := appframe.Read(st)
	if err != nil {
		return fmt.Errorf("offer: %w", err)
	}
	if len(offer) != n*addrSize {
		return fmt.Errorf("offer of %d bytes, want %d", len(offer), n*addrSize)
	}
	want := appframe.New((n + 7) / 8)
	for i := appframe.HeaderSize; i < len(want); i++ {
		want[i] = 0xff
	}
	if _, err := st.Write(want); err != nil {
		return fmt.Errorf("want: %w", err)
	}
	for got := 0; got < n; {
		m, err := appframe.Read(st)
		if err != nil {
			return fmt.Errorf("delivery after %d chunks: %w", got, err)
		}
		if len(m) == 0 || len(m)%chunkEntry != 0 {
			return fmt.Errorf("delivery of %d bytes", len(m))
		}
		got += len(m) / chunkEntry
	}
	return nil
}

// serveChunkOp is the server's side of one op.
func serveChunkOp(st stream, n int, batched bool) error {
	if _, err := appframe.Read(st); err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if _, err := st.Write(appframe.New(n * addrSize)); err != nil {
		return err
	}
	if _, err := appframe.Read(st); err != nil {
		return fmt.Errorf("want: %w", err)
	}
	per := 1
	if batched {
		per = chunkBatch
	}
	for i := 0; i < n; i += per {
		k := min(per, n-i)
		// A fresh message per delivery, as marshalling one allocates it.
		if _, err := st.Write(appframe.New(k * chunkEntry)); err != nil {
			return err
		}
	}
	return nil
}

// runNotify opens one stream, waits until the server has it, then writes
// s.Count messages of s.Size bytes at once and times until the server has
// read them all.
func runNotify(ctx context.Context, s Spec) (Result, error) {
	ready := make(chan struct{}, 1)
	done := make(chan error, 1)
	handler := func(st stream) error {
		if _, err := appframe.Read(st); err != nil {
			return fmt.Errorf("hello: %w", err)
		}
		ready <- struct{}{}
		for i := range s.Count {
			m, err := appframe.Read(st)
			if err == nil && len(m) != s.Size {
				err = fmt.Errorf("message of %d bytes, want %d", len(m), s.Size)
			}
			if err != nil {
				err = fmt.Errorf("message %d: %w", i, err)
				done <- err
				return err
			}
		}
		done <- nil
		return nil
	}
	ep, st, closeAll, err := oneStream(ctx, s, handler)
	if err != nil {
		return Result{}, err
	}
	defer closeAll()
	if _, err := st.Write(appframe.New(0)); err != nil {
		return Result{}, fmt.Errorf("hello: %w", err)
	}
	select {
	case <-ready:
	case <-ctx.Done():
		return Result{}, ep.serverError(context.Cause(ctx))
	}
	msg := appframe.New(s.Size)
	return measure(s.Count, func() error {
		for i := range s.Count {
			if _, err := st.Write(msg); err != nil {
				return ep.serverError(fmt.Errorf("message %d: %w", i, err))
			}
		}
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return errors.Join(context.Cause(ctx), ep.serverError(errors.New("server had not read every message")))
		}
	})
}

// The first byte of each of the ping's streams tells the server what the
// stream is.
const (
	rolePing byte = 'p'
	roleBulk byte = 'b'
)

// runPing opens one stream, makes s.Warmup untimed round trips of s.Size
// bytes each way and then s.Count timed ones, and reports their median
// and 99th percentile beside the total; s.Bulk bulk streams write
// throughout.
func runPing(ctx context.Context, s Spec) (Result, error) {
	serve := func(st stream) error {
		role := make([]byte, 1)
		if _, err := io.ReadFull(st, role); err != nil {
			return fmt.Errorf("role: %w", err)
		}
		if role[0] == roleBulk {
			return discardBulk(st)
		}
		return echoPings(st, s.Size)
	}
	ep, st, closeAll, err := oneStream(ctx, s, serve)
	if err != nil {
		return Result{}, err
	}
	var bulk *bulkWriters
	defer func() {
		closeAll() // first: it ends a bulk Write blocked on a server that stopped reading
		if bulk != nil {
			_ = bulk.stop()
		}
	}()
	if _, err := st.Write([]byte{rolePing}); err != nil {
		return Result{}, ep.serverError(fmt.Errorf("role: %w", err))
	}
	if bulk, err = startBulk(ctx, ep, s.Bulk); err != nil {
		return Result{}, err
	}
	select {
	case <-bulk.flowing: // or a writer failed: stop says how
	case <-ctx.Done():
		return Result{}, ep.serverError(context.Cause(ctx))
	}
	msg := make([]byte, s.Size)
	roundTrip := func(i int) error {
		msg[0] = byte(i)
		if _, err := st.Write(msg); err != nil {
			return ep.serverError(fmt.Errorf("round trip %d: %w", i, err))
		}
		if _, err := io.ReadFull(st, msg); err != nil {
			return ep.serverError(fmt.Errorf("round trip %d: %w", i, err))
		}
		if msg[0] != byte(i) {
			return fmt.Errorf("round trip %d: echoed %d", i, msg[0])
		}
		return nil
	}
	for i := range s.Warmup {
		if err := roundTrip(i); err != nil {
			return Result{}, err
		}
	}
	rtts := make([]time.Duration, 0, s.Count)
	bulkBefore := bulk.written.Load()
	r, err := measure(s.Count, func() error {
		first := time.Now()
		for i := 0; i < s.Count || s.Bulk > 0 && time.Since(first) < minBulkWindow; i++ {
			start := time.Now()
			if err := roundTrip(i); err != nil {
				return err
			}
			rtts = append(rtts, time.Since(start))
		}
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	r.Ops = len(rtts)
	r.BulkBytes = bulk.written.Load() - bulkBefore
	if err := bulk.stop(); err != nil {
		return Result{}, ep.serverError(err)
	}
	slices.Sort(rtts)
	r.P50, r.P99 = rtts[len(rtts)/2], rtts[min(len(rtts)*99/100, len(rtts)-1)]
	return r, nil
}

// echoPings sends back every size bytes it reads until the client's end.
func echoPings(st stream, size int) error {
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(st, buf); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("ping: %w", err)
		}
		if _, err := st.Write(buf); err != nil {
			return fmt.Errorf("pong: %w", err)
		}
	}
}

// discardBulk reads a bulk stream to its end.
func discardBulk(st stream) error {
	if _, err := io.Copy(io.Discard, st); err != nil {
		return fmt.Errorf("bulk: %w", err)
	}
	return nil
}

// bulkWriters are the ping's bulk streams, each written by a goroutine of
// its own (write, which owns its stream and closes it) until stop. The
// goroutine that started them calls stop, and alone reads stopped and
// stopErr; stop closes quit, and errs once every writer is done.
type bulkWriters struct {
	written atomic.Int64 // bytes written by all of them so far
	// flowing is closed once (flowOnce) by the writer whose write brings
	// written to flowAt, a message per stream, or that fails first; by
	// startBulk when there is no writer. runPing waits on it.
	flowing  chan struct{}
	flowAt   int64
	flowOnce sync.Once
	quit     chan struct{}
	wg       sync.WaitGroup
	errs     chan error // one slot per writer: a writer's error
	stopped  bool
	stopErr  error
}

// startBulk opens n bulk streams and starts writing on each. It returns
// the writers started even with an error: the caller stops them, after
// closing the endpoints.
func startBulk(ctx context.Context, ep *endpoints, n int) (*bulkWriters, error) {
	b := &bulkWriters{flowing: make(chan struct{}), flowAt: int64(n) * BulkMessage,
		quit: make(chan struct{}), errs: make(chan error, n)}
	if n == 0 {
		close(b.flowing) // nothing to wait for
	}
	for range n {
		st, err := ep.openStream(ctx)
		if err != nil {
			return b, ep.serverError(fmt.Errorf("bulk stream: %w", err))
		}
		if _, err := st.Write([]byte{roleBulk}); err != nil {
			st.Close()
			return b, ep.serverError(fmt.Errorf("bulk stream: %w", err))
		}
		b.wg.Add(1)
		go b.write(st)
	}
	return b, nil
}

// write sends BulkMessage bytes at a time on st until stop, then closes
// st, its write side first so that the server reads to the end.
func (b *bulkWriters) write(st stream) {
	defer b.wg.Done()
	defer st.Close()
	msg := make([]byte, BulkMessage)
	for {
		select {
		case <-b.quit:
			if err := st.CloseWrite(); err != nil {
				b.errs <- fmt.Errorf("bulk close: %w", err)
			}
			return
		default:
		}
		n, err := st.Write(msg)
		if b.written.Add(int64(n)) >= b.flowAt {
			b.flowOnce.Do(func() { close(b.flowing) })
		}
		if err != nil {
			b.errs <- fmt.Errorf("bulk write: %w", err)
			b.flowOnce.Do(func() { close(b.flowing) })
			return
		}
	}
}

// stop ends the writers and returns the first error one met; later calls
// return the same.
func (b *bulkWriters) stop() error {
	if b.stopped {
		return b.stopErr
	}
	b.stopped = true
	close(b.quit)
	b.wg.Wait()
	close(b.errs)
	b.stopErr = <-b.errs
	return b.stopErr
}

// oneStream connects endpoints as s asks, handler serving the server's
// streams, and opens the one stream a scenario uses; done closes the
// stream, then the endpoints.
func oneStream(ctx context.Context, s Spec, handler func(stream) error) (ep *endpoints, st stream, done func(), err error) {
	if ep, err = newEndpoints(ctx, s, handler); err != nil {
		return nil, nil, nil, err
	}
	if st, err = ep.openStream(ctx); err != nil {
		ep.close()
		return nil, nil, nil, err
	}
	return ep, st, func() { st.Close(); ep.close() }, nil
}
