// Package slowconn simulates a network link between two net.Conn ends, so
// tests and benchmarks can run a protocol over a link with a known
// bandwidth, latency, jitter, packet size and loss, in real time or inside a
// testing/synctest bubble.
//
// # The model
//
// Each direction of a link is modelled on its own, as TCP over a single
// bottleneck sees it:
//
//   - The bytes of one Write leave as packets of at most
//     [Link.PayloadPerPacket] bytes, and every Write ends a packet, as with
//     TCP_NODELAY (which Go sets on every TCP connection). Each packet costs
//     its payload plus [Link.PerPacketOverhead] bytes of link capacity.
//   - Serialization first, then propagation: a packet departs (its last bit
//     is on the wire) at max(now, previous departure) + (payload+overhead)*8
//     / Bandwidth, and arrives at departure + Latency + a uniform random
//     delay in [0, Jitter]. Arrivals never come earlier than the previous
//     arrival, so bytes are never reordered.
//   - Loss is modelled as TCP experiences it: with probability Loss a packet
//     is retransmitted after a timeout, so it (and, through the ordering
//     rule, everything behind it) arrives one retransmission timeout later.
//     Nothing is ever dropped or corrupted. The timeout is
//     2*Latency + Jitter + 200 ms, a round trip plus Linux's minimum RTO,
//     which is what Linux computes on a steady path.
//   - Write blocks like a socket write: bytes count against the
//     [Link.SendBuffer] from the moment they are written until the peer's
//     Read consumes them (for [Wrap]: until they are handed to the wrapped
//     conn). This is the combined send and receive buffer of a socket pair,
//     so a peer that stops reading stops the writer, as TCP flow control
//     would.
//
// Close behaves like a TCP close: data already written is still delivered,
// then the peer reads io.EOF. Like *net.TCPConn, the conns have a
// CloseWrite() error method that does the same for one direction only.
//
// # Cost and accuracy
//
// Departure and arrival times are computed arithmetically when a Write is
// queued; nothing sleeps per packet. A reader looks at the head of its
// queue: everything whose arrival time has passed is delivered at once, and
// otherwise it waits with one reusable timer for the head's arrival. Go may
// wake such a timer up to about a millisecond late, but because delivery is
// decided by comparing arrival times with the clock, a late wake-up delays a
// Read, never the model: sustained goodput stays within a fraction of a
// percent of [Link.Goodput]. A [Pipe] has no goroutines at all; a [Wrap]ped
// conn has one, which delivers due bytes to the real conn.
//
// # Simulated time
//
// Pipe uses only time.Now, timers, channels and mutexes, so it works inside
// a testing/synctest bubble, where its timing is exact and deterministic
// (for a given Seed) and tests take no real time. Create the pipe inside the
// bubble that uses it.
package slowconn
