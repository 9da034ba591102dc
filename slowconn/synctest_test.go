package slowconn

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// Inside a synctest bubble time only moves when every goroutine is blocked,
// so the simulator must reproduce its model to the nanosecond.

func TestSynctestGoodputExact(t *testing.T) {
	for _, rate := range []int64{10e6, 100e6, 1e9} {
		for _, writeSize := range []int{64 << 10, 1 << 10} {
			t.Run(fmt.Sprintf("%dMbit/%dB", rate/1e6, writeSize), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					l := Link{Bandwidth: rate, Latency: 5 * time.Millisecond}
					// A quarter of a simulated second.
					total := int(l.Goodput() / 4)
					a, b := Pipe(l)
					defer a.Close()
					defer b.Close()
					res := transfer(t, a, b, total, writeSize)
					if want := modelTime(l, total, writeSize); res.elapsed != want {
						t.Errorf("last byte after %v, model says %v", res.elapsed, want)
					}
					// The configured goodput, with every write ending a packet.
					p := min(writeSize, l.PayloadPerPacket())
					ideal := float64(rate) / 8 * float64(p) / float64(p+l.Overhead())
					got := float64(total) / (res.elapsed - l.Latency).Seconds()
					if e := got/ideal - 1; e < -0.005 || e > 0.0001 {
						t.Errorf("goodput %.0f B/s, want %.0f B/s (error %+.3f%%)", got, ideal, 100*e)
					}
				})
			})
		}
	}
}

func TestSynctestFirstByteLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Mobile()
		l.Jitter, l.Loss = 0, 0
		a, b := Pipe(l)
		defer a.Close()
		defer b.Close()
		start := time.Now()
		if _, err := a.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		want := serialization(l, 1+l.Overhead()) + l.Latency
		if got := time.Since(start); got != want {
			t.Errorf("first byte after %v, want %v", got, want)
		}
	})
}

func TestSynctestPackets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Link{Bandwidth: 10e6, Latency: time.Millisecond, MTU: 1000, PerPacketOverhead: 100}
		a, b := Pipe(l)
		defer a.Close()
		defer b.Close()
		start := time.Now()
		// 2000 bytes leave as packets of 900, 900 and 200 payload bytes.
		if _, err := a.Write(make([]byte, 2000)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4000)
		var wire int
		for _, payload := range []int{900, 900, 200} {
			wire += payload + 100
			n, err := b.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			want := serialization(l, wire) + l.Latency
			if got := time.Since(start); n != payload || got != want {
				t.Errorf("read %d bytes after %v, want %d after %v", n, got, payload, want)
			}
		}
	})
}

func TestSynctestJitter(t *testing.T) {
	const (
		count   = 200
		size    = 16
		spacing = time.Millisecond
	)
	l := Link{Bandwidth: 100e6, Latency: 10 * time.Millisecond, Jitter: 5 * time.Millisecond}
	run := func(seed int64) []time.Duration {
		var delays []time.Duration
		synctest.Test(t, func(t *testing.T) {
			l := l
			l.Seed = seed
			a, b := Pipe(l)
			defer a.Close()
			defer b.Close()
			start := time.Now()
			go func() {
				for i := range count {
					a.Write(message(i, size))
					time.Sleep(spacing)
				}
			}()
			times, msgs := readMessages(t, b, count, size)
			for i := range count {
				if !bytes.Equal(msgs[i], message(i, size)) {
					t.Fatalf("message %d out of order: %x", i, msgs[i])
				}
				sent := start.Add(time.Duration(i) * spacing)
				delays = append(delays, times[i].Sub(sent))
			}
		})
		return delays
	}
	delays := run(1)
	base := l.Latency + serialization(l, size+l.Overhead())
	lo, hi := delays[0], delays[0]
	for _, d := range delays {
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < base || hi > base+l.Jitter {
		t.Errorf("delays in [%v, %v], want within [%v, %v]", lo, hi, base, base+l.Jitter)
	}
	if hi-lo < l.Jitter*8/10 {
		t.Errorf("delays spread over %v, want most of the %v jitter", hi-lo, l.Jitter)
	}
	if again := run(1); fmt.Sprint(again) != fmt.Sprint(delays) {
		t.Errorf("the same seed gave different delays")
	}
	if other := run(2); fmt.Sprint(other) == fmt.Sprint(delays) {
		t.Errorf("another seed gave the same delays")
	}
}

func TestSynctestLoss(t *testing.T) {
	t.Run("EveryPacket", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := Link{Bandwidth: 10e6, Latency: 20 * time.Millisecond, Loss: 1}
			a, b := Pipe(l)
			defer a.Close()
			defer b.Close()
			start := time.Now()
			a.Write([]byte("x"))
			b.Read(make([]byte, 1))
			want := serialization(l, 1+l.Overhead()) + l.Latency + l.RTO()
			if got := time.Since(start); got != want {
				t.Errorf("lost byte arrived after %v, want %v (RTO %v)", got, want, l.RTO())
			}
		})
	})
	t.Run("Some", func(t *testing.T) {
		l := Link{Bandwidth: 100e6, Latency: 2 * time.Millisecond, Loss: 0.01, Seed: 7}
		const total = 2 << 20
		var elapsed []time.Duration
		for range 2 {
			synctest.Test(t, func(t *testing.T) {
				a, b := Pipe(l)
				defer a.Close()
				defer b.Close()
				res := transfer(t, a, b, total, 64<<10) // checks every byte arrived in order
				elapsed = append(elapsed, res.elapsed)
			})
		}
		lossless := modelTime(l, total, 64<<10)
		if elapsed[0] < lossless+l.RTO() {
			t.Errorf("lossy transfer took %v, lossless %v: want at least one RTO (%v) more", elapsed[0], lossless, l.RTO())
		}
		if elapsed[0] != elapsed[1] {
			t.Errorf("the same seed took %v and %v", elapsed[0], elapsed[1])
		}
	})
}

func TestSynctestSendBuffer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Link{Bandwidth: 10e6, Latency: time.Millisecond, SendBuffer: 64 << 10}
		a, b := Pipe(l)
		defer a.Close()
		defer b.Close()
		var written int
		done := make(chan error, 1)
		go func() {
			var err error
			written, err = a.Write(make([]byte, 1<<20))
			done <- err
		}()
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("a 1 MiB Write into a 64 KiB buffer returned %v without a reader", err)
		default:
		}
		// With the reader idle, a deadline ends the Write after what fits:
		// whole packets only, so the packets match an unsplit Write.
		a.SetWriteDeadline(time.Now().Add(time.Second))
		err := <-done
		p := l.PayloadPerPacket()
		if want := l.SendBuffer - l.SendBuffer%p; written != want || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Write = %d, %v; want %d, deadline exceeded", written, err, want)
		}
		// Reading frees room and a blocked Write continues.
		a.SetWriteDeadline(time.Time{})
		go func() {
			_, err := a.Write(make([]byte, 100<<10))
			done <- err
		}()
		if _, err := io.ReadFull(b, make([]byte, written+100<<10)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

func TestSynctestDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(Broadband())
		defer a.Close()
		defer b.Close()
		start := time.Now()
		a.SetReadDeadline(start.Add(50 * time.Millisecond))
		_, err := a.Read(make([]byte, 1))
		var nerr net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &nerr) || !nerr.Timeout() {
			t.Errorf("Read error %v, want a timeout", err)
		}
		if got := time.Since(start); got != 50*time.Millisecond {
			t.Errorf("Read timed out after %v, want 50ms", got)
		}
		// A deadline moved while a Read waits applies to that Read.
		a.SetReadDeadline(time.Time{})
		go func() {
			time.Sleep(10 * time.Millisecond)
			a.SetReadDeadline(time.Now())
		}()
		start = time.Now()
		if _, err := a.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("Read error %v, want deadline exceeded", err)
		}
		if got := time.Since(start); got != 10*time.Millisecond {
			t.Errorf("Read woke after %v, want 10ms", got)
		}
		// Clearing the deadline makes the conn usable again.
		a.SetReadDeadline(time.Time{})
		b.Write([]byte("ok"))
		if _, err := io.ReadFull(a, make([]byte, 2)); err != nil {
			t.Errorf("Read after clearing the deadline: %v", err)
		}
	})
}

func TestSynctestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Satellite()
		a, b := Pipe(l)
		start := time.Now()
		a.Write([]byte("last words"))
		a.Close()
		// Data written before Close still arrives, then io.EOF.
		got, err := io.ReadAll(b)
		if string(got) != "last words" || err != nil {
			t.Errorf("ReadAll = %q, %v; want the data and no error", got, err)
		}
		if since := time.Since(start); since < l.Latency {
			t.Errorf("EOF after %v, before the %v latency", since, l.Latency)
		}
		if _, err := a.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Read after Close: %v, want net.ErrClosed", err)
		}
		if _, err := a.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
			t.Errorf("Write after Close: %v, want net.ErrClosed", err)
		}
		if _, err := b.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("Write to a closed peer: %v, want io.ErrClosedPipe", err)
		}
		if err := a.Close(); !errors.Is(err, net.ErrClosed) {
			t.Errorf("second Close: %v, want net.ErrClosed", err)
		}
		b.Close()
	})
}

func TestSynctestCloseWakesBlockedCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(Link{Bandwidth: 1e6, SendBuffer: 1})
		defer b.Close()
		errs := make(chan error, 2)
		go func() { _, err := a.Read(make([]byte, 1)); errs <- err }()
		go func() { _, err := a.Write(make([]byte, 1<<20)); errs <- err }()
		synctest.Wait()
		a.Close()
		for range 2 {
			if err := <-errs; !errors.Is(err, net.ErrClosed) {
				t.Errorf("blocked call returned %v, want net.ErrClosed", err)
			}
		}
	})
}

func TestSynctestCloseWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(LAN())
		defer a.Close()
		defer b.Close()
		a.Write([]byte("request"))
		a.(closeWriter).CloseWrite()
		got, err := io.ReadAll(b)
		if string(got) != "request" || err != nil {
			t.Fatalf("ReadAll = %q, %v", got, err)
		}
		if _, err := a.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("Write after CloseWrite: %v, want io.ErrClosedPipe", err)
		}
		// The other direction still works.
		b.Write([]byte("response"))
		buf := make([]byte, 8)
		if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "response" {
			t.Errorf("ReadFull = %q, %v", buf, err)
		}
	})
}

func TestSynctestPartialRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := Pipe(LAN())
		defer a.Close()
		defer b.Close()
		a.Write([]byte("0123456789"))
		buf := make([]byte, 4)
		var got []byte
		for len(got) < 10 {
			n, err := b.Read(buf)
			if err != nil || n > 4 {
				t.Fatalf("Read = %d, %v", n, err)
			}
			got = append(got, buf[:n]...)
		}
		if string(got) != "0123456789" {
			t.Errorf("read %q", got)
		}
	})
}

func TestSynctestWrap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Link{Bandwidth: 100e6, Latency: 10 * time.Millisecond}
		ra, rb := net.Pipe()
		a, b := Wrap(ra, l), Wrap(rb, l)
		total := int(l.Goodput() / 4)
		res := transfer(t, a, b, total, 64<<10)
		if want := modelTime(l, total, 64<<10); res.elapsed != want {
			t.Errorf("last byte after %v, model says %v", res.elapsed, want)
		}
		a.Close()
		b.Close()
	})
}
