package slowconn

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Link describes one direction of a simulated network link; [Pipe] uses the
// same Link for both directions. The zero Link is an unlimited link: no
// bandwidth limit, no latency, no jitter and no loss.
type Link struct {
	// Bandwidth is the link capacity in bits per second; 0 means unlimited.
	Bandwidth int64
	// Latency is the one-way propagation delay added to every packet.
	Latency time.Duration
	// Jitter is the upper bound of an extra, uniformly random one-way delay
	// in [0, Jitter]. Jitter never reorders bytes: a packet never arrives
	// before the one sent ahead of it.
	Jitter time.Duration
	// MTU is the largest packet, overhead included, at most 1 MiB; 0 means
	// 1500.
	MTU int
	// PerPacketOverhead is the link capacity each packet costs beyond its
	// payload (headers, framing); 0 means 40 (IPv4 + TCP headers) and a
	// negative value means none.
	PerPacketOverhead int
	// Loss is the probability, in [0, 1], that a packet needs a
	// retransmission. A lost packet is delayed by one retransmission
	// timeout (2*Latency + Jitter + 200 ms), never dropped.
	Loss float64
	// SendBuffer bounds the bytes written but not yet read by the peer
	// (for Wrap: not yet handed to the wrapped conn); Write blocks while
	// it is full, and a larger Write proceeds in pieces of whole packets.
	// 0 means the bandwidth-delay product of 2*Latency + Jitter + 10 ms
	// (slack for a reader that runs late), at least 64 KiB. It is never
	// less than one packet's payload.
	SendBuffer int
	// Seed makes jitter and loss reproducible: the same Link and the same
	// sequence of writes give the same arrival times.
	Seed int64
}

const (
	// defaultMTU is Ethernet's MTU.
	defaultMTU = 1500
	// defaultOverhead is an IPv4 header (20 bytes) plus a TCP header
	// without options (20 bytes).
	defaultOverhead = 40
	// maxMTU keeps the serialization arithmetic (bytes * 8e9) far from
	// int64 overflow; no real link has larger packets.
	maxMTU = 1 << 20
	// minSendBuffer is the smallest default send buffer, about what a
	// Linux socket starts with.
	minSendBuffer = 64 << 10
	// schedulingSlack is added to the round trip when sizing the default
	// send buffer. Bytes leave the buffer only when the peer reads them,
	// and a reader may run late: Go can wake a timer about a millisecond
	// late, and on a loaded machine a runnable goroutine can wait several
	// milliseconds for a CPU. Without slack, the reader's scheduling, not
	// the link, would limit goodput. (Linux's socket buffers are larger
	// still: several MiB once autotuned.)
	schedulingSlack = 10 * time.Millisecond
	// minRTO is Linux's minimum retransmission timeout (TCP_RTO_MIN).
	minRTO = 200 * time.Millisecond
)

// mtu returns the packet size l uses, with the default applied.
func (l Link) mtu() int {
	if l.MTU == 0 {
		return defaultMTU
	}
	return l.MTU
}

// Overhead returns the per-packet overhead l uses, with the default applied.
func (l Link) Overhead() int {
	switch {
	case l.PerPacketOverhead == 0:
		return defaultOverhead
	case l.PerPacketOverhead < 0:
		return 0
	}
	return l.PerPacketOverhead
}

// PayloadPerPacket returns the most payload bytes one packet carries: the
// MTU minus the per-packet overhead, defaults applied.
func (l Link) PayloadPerPacket() int {
	return l.mtu() - l.Overhead()
}

// Goodput returns the payload bytes per second l carries when every packet
// is full: Bandwidth/8 * payload/(payload+overhead). It returns +Inf for an
// unlimited link. Use it to compute the ideal time of a transfer.
func (l Link) Goodput() float64 {
	if l.Bandwidth == 0 {
		return math.Inf(1)
	}
	p := float64(l.PayloadPerPacket())
	return float64(l.Bandwidth) / 8 * p / (p + float64(l.Overhead()))
}

// RTO returns the retransmission timeout a lost packet is delayed by: one
// round trip (2*Latency + Jitter) plus Linux's 200 ms minimum RTO.
func (l Link) RTO() time.Duration {
	return 2*l.Latency + l.Jitter + minRTO
}

// sendBuffer returns the send buffer l uses, with the default applied (see
// [Link.SendBuffer]).
func (l Link) sendBuffer() int {
	b := l.SendBuffer
	if b == 0 {
		rtt := 2*l.Latency + l.Jitter + schedulingSlack
		bdp := float64(l.Bandwidth) / 8 * rtt.Seconds()
		b = max(int(math.Ceil(bdp)), minSendBuffer)
	}
	return max(b, l.PayloadPerPacket())
}

// Validate reports the first field of l that makes no sense: a negative
// Bandwidth, Latency, Jitter or SendBuffer, a negative MTU, an MTU above
// 1 MiB or without room for a byte of payload after the overhead, or a
// Loss outside [0, 1].
// Pipe and Wrap panic with this error, so check a Link built from input
// first.
func (l Link) Validate() error {
	if err := l.validate(); err != nil {
		return errors.New("slowconn: invalid Link: " + err.Error())
	}
	return nil
}

// validate reports the first field of l that makes no sense.
func (l Link) validate() error {
	switch {
	case l.Bandwidth < 0:
		return fmt.Errorf("negative Bandwidth %d", l.Bandwidth)
	case l.Latency < 0:
		return fmt.Errorf("negative Latency %v", l.Latency)
	case l.Jitter < 0:
		return fmt.Errorf("negative Jitter %v", l.Jitter)
	case l.MTU < 0 || l.MTU > maxMTU:
		return fmt.Errorf("an MTU of %d is outside [0, %d]", l.MTU, maxMTU)
	case l.PayloadPerPacket() < 1:
		return fmt.Errorf("an MTU of %d leaves no payload after %d bytes of overhead", l.mtu(), l.Overhead())
	case !(l.Loss >= 0 && l.Loss <= 1):
		return fmt.Errorf("a Loss of %v is outside [0, 1]", l.Loss)
	case l.SendBuffer < 0:
		return fmt.Errorf("negative SendBuffer %d", l.SendBuffer)
	}
	return nil
}

// mustValidate panics with a clear message if l is invalid: a bad Link is a
// programming error in the test that built it.
func (l Link) mustValidate() {
	if err := l.Validate(); err != nil {
		panic(err)
	}
}
