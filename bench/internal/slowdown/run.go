package slowdown

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"runtime"
	"sync"
	"time"

	"github.com/braidmux/braid/bench/internal/contenders"
	"github.com/braidmux/braid/slowconn"
)

// Result is one timed run.
type Result struct {
	Time   time.Duration
	Writes uint64 // conn writes of the sending side
}

// runTimeout bounds one run: a stuck run fails instead of hanging a test.
const runTimeout = 60 * time.Second

// Raw sends w's messages through one raw conn over link, one write per
// message (streams interleaved as they would be by one application thread
// per stream), and returns the time until the last byte was read.
func Raw(link slowconn.Link, w Workload) (Result, error) {
	a, b := slowconn.Pipe(link)
	defer a.Close()
	defer b.Close()
	sizes := w.sizes()
	total := w.Payload()
	buf := make([]byte, w.MaxSize)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := io.CopyN(io.Discard, b, total)
		done <- err
	}()
	var writes uint64
	writeErr := make(chan error, 1)
	go func() {
		// Round-robin over streams, one message each, like concurrent
		// writers on one socket; linear workloads go stream by stream.
		if w.Linear {
			for _, s := range sizes {
				for _, m := range s {
					if _, err := a.Write(buf[:m]); err != nil {
						writeErr <- err
						return
					}
					writes++
				}
			}
		} else {
			for j := 0; j < w.Messages; j++ {
				for i := range sizes {
					if _, err := a.Write(buf[:sizes[i][j]]); err != nil {
						writeErr <- err
						return
					}
					writes++
				}
			}
		}
		writeErr <- nil
	}()
	if err := waitBoth(done, writeErr); err != nil {
		return Result{}, fmt.Errorf("raw: %w", err)
	}
	return Result{Time: time.Since(start), Writes: writes}, nil
}

// Mux sends w through contender c over link and returns the time from the
// first write to the last byte read. Streams are opened and accepted first:
// setting up is not part of the workload.
func Mux(link slowconn.Link, c contenders.Contender, w Workload) (Result, error) {
	c1, c2 := slowconn.Pipe(link)
	client, server, err := c.New(c1, c2)
	if err != nil {
		return Result{}, err
	}
	defer server.Close()
	defer client.Close()
	sizes := w.sizes()
	send, recv, err := openStreams(client, server, w.Streams)
	if err != nil {
		return Result{}, err
	}
	buf := make([]byte, w.MaxSize)
	writes0 := client.Writes()
	start := time.Now()
	readDone := make(chan error, w.Streams)
	for i := range recv {
		var n int64
		for _, m := range sizes[i] {
			n += int64(m)
		}
		go func(s contenders.Stream, n int64) {
			_, err := io.CopyN(io.Discard, s, n)
			readDone <- err
		}(recv[i], n)
	}
	writeDone := make(chan error, w.Streams)
	if w.Linear {
		go func() {
			for i, s := range send {
				for _, m := range sizes[i] {
					if _, err := s.Write(buf[:m]); err != nil {
						writeDone <- err
						return
					}
				}
			}
			writeDone <- nil
		}()
	} else {
		for i, s := range send {
			go func(s contenders.Stream, sizes []int) {
				for _, m := range sizes {
					if _, err := s.Write(buf[:m]); err != nil {
						writeDone <- err
						return
					}
				}
				writeDone <- nil
			}(s, sizes[i])
		}
	}
	writers := w.Streams
	if w.Linear {
		writers = 1
	}
	timeout := time.NewTimer(runTimeout)
	defer timeout.Stop()
	for pending := writers + w.Streams; pending > 0; pending-- {
		select {
		case err := <-writeDone:
			if err != nil {
				return Result{}, fmt.Errorf("%s write: %w", c.Name, err)
			}
		case err := <-readDone:
			if err != nil {
				return Result{}, fmt.Errorf("%s read: %w", c.Name, err)
			}
		case <-timeout.C:
			return Result{}, fmt.Errorf("%s: run took over %v", c.Name, runTimeout)
		}
	}
	return Result{Time: time.Since(start), Writes: client.Writes() - writes0}, nil
}

// openStreams opens n streams on client and accepts them on server,
// paired by a two-byte hello carrying the stream's index. All opens go out
// at once, so setting up costs about one round trip, not n.
func openStreams(client, server contenders.Session, n int) (send, recv []contenders.Stream, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	send = make([]contenders.Stream, n)
	recv = make([]contenders.Stream, n)
	accepted := make(chan error, 1)
	go func() {
		for range n {
			s, err := server.Accept()
			if err != nil {
				accepted <- err
				return
			}
			var hello [2]byte
			if _, err := io.ReadFull(s, hello[:]); err != nil {
				accepted <- err
				return
			}
			i := int(binary.BigEndian.Uint16(hello[:]))
			if i >= n || recv[i] != nil {
				accepted <- errors.New("bad hello")
				return
			}
			recv[i] = s
		}
		accepted <- nil
	}()
	for i := range send {
		if send[i], err = client.Open(ctx); err != nil {
			return nil, nil, err
		}
		// The hello makes every muxer announce the stream.
		var hello [2]byte
		binary.BigEndian.PutUint16(hello[:], uint16(i))
		if _, err = send[i].Write(hello[:]); err != nil {
			return nil, nil, err
		}
	}
	if err := <-accepted; err != nil {
		return nil, nil, err
	}
	return send, recv, nil
}

// waitBoth waits for two results, the first error winning, within
// runTimeout.
func waitBoth(a, b <-chan error) error {
	t := time.NewTimer(runTimeout)
	defer t.Stop()
	for range 2 {
		select {
		case err := <-a:
			if err != nil {
				return err
			}
		case err := <-b:
			if err != nil {
				return err
			}
		case <-t.C:
			return fmt.Errorf("run took over %v", runTimeout)
		}
	}
	return nil
}

// Best runs f n times at GOMAXPROCS procs (restored afterwards) and
// returns the fastest result. f gets the repetition's number, to seed the
// link's jitter and loss: repetitions differ, contenders see the same.
func Best(n, procs int, f func(rep int) (Result, error)) (Result, error) {
	prev := runtime.GOMAXPROCS(procs)
	defer runtime.GOMAXPROCS(prev)
	var best Result
	for i := 0; i < n; i++ {
		r, err := f(i)
		if err != nil {
			return Result{}, err
		}
		if i == 0 || r.Time < best.Time {
			best = r
		}
	}
	return best, nil
}

// Ideal is the physical limit: the payload over the link's goodput with
// full packets, plus one latency.
func Ideal(link slowconn.Link, payload int64) time.Duration {
	g := link.Goodput()
	if g <= 0 || link.Bandwidth == 0 {
		return link.Latency
	}
	return link.Latency + time.Duration(float64(payload)/g*float64(time.Second))
}

// EchoRTT measures the mean round trip of n 64-byte request/replies on one
// stream of c over link.
func EchoRTT(link slowconn.Link, c contenders.Contender, n int) (time.Duration, error) {
	samples, err := EchoRTTs(link, c, n)
	if err != nil {
		return 0, err
	}
	var sum time.Duration
	for _, s := range samples {
		sum += s
	}
	return sum / time.Duration(n), nil
}

// EchoRTTs measures n 64-byte request/replies on one stream of c over link
// and returns each round trip.
func EchoRTTs(link slowconn.Link, c contenders.Contender, n int) ([]time.Duration, error) {
	c1, c2 := slowconn.Pipe(link)
	client, server, err := c.New(c1, c2)
	if err != nil {
		return nil, err
	}
	defer server.Close()
	defer client.Close()
	send, recv, err := openStreams(client, server, 1)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, EchoSize)
		for {
			if _, err := io.ReadFull(recv[0], buf); err != nil {
				return
			}
			if _, err := recv[0].Write(buf); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, EchoSize)
	samples := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := send[0].Write(buf); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(send[0], buf); err != nil {
			return nil, err
		}
		samples = append(samples, time.Since(start))
	}
	client.Close()
	server.Close()
	wg.Wait()
	return samples, nil
}

// EchoSize is the request and reply size of EchoRTT and EchoRTTs.
const EchoSize = 64

// Ramp transfers bytes on one stream of c over link for d and returns the
// goodput (bytes/s) of each interval of the transfer, in order.
func Ramp(link slowconn.Link, c contenders.Contender, d, interval time.Duration) ([]float64, error) {
	c1, c2 := slowconn.Pipe(link)
	client, server, err := c.New(c1, c2)
	if err != nil {
		return nil, err
	}
	defer server.Close()
	defer client.Close()
	send, recv, err := openStreams(client, server, 1)
	if err != nil {
		return nil, err
	}
	writeDone := make(chan struct{})
	go func() {
		defer close(writeDone)
		buf := make([]byte, bulkWrite)
		for {
			if _, err := send[0].Write(buf); err != nil {
				return // the sessions were closed: the ramp is over
			}
		}
	}()
	var rates []float64
	buf := make([]byte, 4*bulkWrite)
	var got, mark int64
	start := time.Now()
	next := start.Add(interval)
	for {
		n, err := recv[0].Read(buf)
		got += int64(n)
		if err != nil {
			return nil, err
		}
		if now := time.Now(); !now.Before(next) {
			rates = append(rates, float64(got-mark)/(interval+now.Sub(next)).Seconds())
			mark = got
			next = now.Add(interval)
			if now.Sub(start) >= d {
				break
			}
		}
	}
	client.Close()
	server.Close()
	<-writeDone
	return rates, nil
}
