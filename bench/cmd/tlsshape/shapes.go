package main

import (
	"errors"
	"io"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/braidmux/braid/bench/internal/slowdown"
	"github.com/braidmux/braid/internal/tlstest"
)

const (
	messageSize = 64 * 1024 // one Write, as the Bulk benchmark's
	readSize    = 8 * 1024  // io.Discard's reads, as the Bulk benchmark's reader
	reverseSize = 12        // a yamux header: a window update or a pong
	relayDepth  = 16        // messages the relay's reader may hold ahead of its consumer
	// lowWater is the low-water shapes' TCP_NOTSENT_LOWAT, braid's
	// (notSentLowat in coalesce.go): two whole TLS records.
	lowWater = 32 * 1024
)

// shape is one way of moving the messages over a TLS conn.
type shape struct {
	name    string
	handoff bool // the writer's side writes through a writer goroutine
	relay   bool // the reader's side reads through a reader goroutine and a copy
	reverse bool // the reader writes reverseSize bytes back every message
	queued  bool // with reverse: through a writer goroutine of the reader's side, as a muxer's window updates and pongs
	corked  bool // the writer's TCP socket is corked for the whole transfer (Linux): its records leave as full segments
	// idleUncork: with corked and handoff, the writer goroutine takes the
	// cork off whenever it finds no message waiting, and puts it back on
	// for the next, as braid's writer does before it parks (cork.go):
	// nothing it holds may wait for a message that may never come.
	idleUncork bool
	// lowWater: the writer's TCP socket has TCP_NOTSENT_LOWAT of lowWater
	// (Linux): a write waits while more unsent bytes than that wait in
	// the kernel, so the writer hands the core to the reader sooner, in
	// turns of what the receiver's window holds, not of the send buffer's
	// megabytes.
	lowWater bool
}

// shapes are what run measures, raw first (the ratios' base); the corked
// and low-water shapes only where their socket options are known
// (socketOptions).
var shapes = slices.DeleteFunc([]shape{
	{name: "raw"},
	{name: "reverse", reverse: true},
	{name: "handoff", handoff: true},
	{name: "relay", relay: true},
	{name: "relay+handoff", relay: true, handoff: true},
	{name: "relay+handoff+reverse", relay: true, handoff: true, reverse: true},
	{name: "relay+handoff+queued reverse", relay: true, handoff: true, reverse: true, queued: true},
	{name: "corked", corked: true},
	{name: "corked muxer", corked: true, relay: true, handoff: true, reverse: true, queued: true},
	{name: "corked muxer, uncorked idle", corked: true, idleUncork: true, relay: true, handoff: true, reverse: true, queued: true},
	{name: "low-water", lowWater: true},
	{name: "low-water muxer", lowWater: true, relay: true, handoff: true, reverse: true, queued: true},
}, func(s shape) bool { return (s.corked || s.lowWater) && !socketOptions })

// run moves messages of messageSize over a fresh loopback TLS conn in s's
// shape and returns the rate in MB/s, from the first write to the last
// byte read.
func (s shape) run(messages int) (float64, error) {
	w, r, err := tlsPair()
	if err != nil {
		return 0, err
	}
	defer w.Close()
	defer r.Close()
	total := int64(messages) * messageSize
	var wg sync.WaitGroup
	if s.reverse {
		wg.Add(1)
		go func() { // the writer's side reads what comes back, until the conn closes
			defer wg.Done()
			_, _ = io.Copy(io.Discard, w)
		}()
	}
	done := make(chan error, 1)
	go func() {
		err := s.receive(r, total)
		if err != nil {
			w.Close() // a writer blocked on a full conn returns
		}
		done <- err
	}()
	start := time.Now()
	werr := s.send(w, messages)
	rerr := <-done
	elapsed := time.Since(start)
	w.Close()
	r.Close()
	wg.Wait()
	if err := errors.Join(werr, rerr); err != nil {
		return 0, err
	}
	return float64(total) / elapsed.Seconds() / 1e6, nil
}

// send writes the messages to w, itself or through a writer goroutine.
func (s shape) send(w net.Conn, messages int) (err error) {
	msg := make([]byte, messageSize)
	if s.lowWater {
		if err := setLowWater(w, lowWater); err != nil {
			return err
		}
	}
	if s.corked {
		if err := setCork(w, true); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, setCork(w, false)) }() // sends the last partial segment
	}
	if !s.handoff {
		for range messages {
			if _, err := w.Write(msg); err != nil {
				return err
			}
		}
		return nil
	}
	req := make(chan []byte)
	written := make(chan error)
	go func() { // the writer goroutine: one message at a time, as a by-reference Write
		corked := s.corked
		for {
			var b []byte
			var ok bool
			select {
			case b, ok = <-req:
			default:
				if s.idleUncork && corked {
					_ = setCork(w, false) // a failure shows as a lower rate
					corked = false
				}
				b, ok = <-req
			}
			if !ok {
				return
			}
			if s.corked && !corked {
				_ = setCork(w, true)
				corked = true
			}
			_, err := w.Write(b)
			written <- err
		}
	}()
	defer close(req)
	for range messages {
		req <- msg
		if err := <-written; err != nil {
			return err
		}
	}
	return nil
}

// receive reads total bytes from r, itself or through a relay, writing
// reverseSize bytes back every message in the reverse shapes.
func (s shape) receive(r net.Conn, total int64) error {
	back := make([]byte, reverseSize)
	if !s.relay {
		buf := make([]byte, readSize)
		next := int64(messageSize)
		for got := int64(0); got < total; {
			n, err := r.Read(buf)
			got += int64(n)
			if err != nil {
				return err
			}
			if s.reverse && got >= next {
				if _, err := r.Write(back); err != nil {
					return err
				}
				next += messageSize
			}
		}
		return nil
	}
	var backs chan struct{}
	if s.queued {
		backs = make(chan struct{}, relayDepth)
		backErr := make(chan error, 1)
		go func() { // the reader's side's writer: coalesces what is queued while it writes
			var err error
			for range backs {
				if err == nil {
					_, err = r.Write(back)
				}
			}
			backErr <- err
		}()
		defer func() { <-backErr }()
		defer close(backs)
	}
	full := make(chan []byte, relayDepth)
	free := make(chan []byte, relayDepth+2)
	for range cap(free) {
		free <- make([]byte, messageSize)
	}
	readErr := make(chan error, 1)
	go func() { // the relay's reader: whole messages, as a muxer's read loop
		defer close(full)
		for got := int64(0); got < total; got += messageSize {
			b := <-free
			if _, err := io.ReadFull(r, b); err != nil {
				readErr <- err
				return
			}
			full <- b
			if s.queued {
				backs <- struct{}{}
			} else if s.reverse {
				if _, err := r.Write(back); err != nil {
					readErr <- err
					return
				}
			}
		}
		readErr <- nil
	}()
	out := make([]byte, readSize)
	for b := range full { // the consumer: a stream's Reads, copying out
		for p := b; len(p) > 0; {
			p = p[copy(out, p):]
		}
		free <- b
	}
	return <-readErr
}

// tlsPair connects two loopback TCP conns (the harness's TCPPair) and
// secures them with TLS 1.3.
func tlsPair() (w, r net.Conn, err error) {
	c1, c2, err := slowdown.TCPPair()
	if err != nil {
		return nil, nil, err
	}
	return tlstest.Secure(c1, c2)
}
