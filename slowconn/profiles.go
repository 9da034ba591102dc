package slowconn

import "time"

// Profile is a named Link, for tables of test cases and reports.
type Profile struct {
	Name string
	Link Link
}

// Unlimited returns the zero Link: no bandwidth limit, latency, jitter or
// loss. It stands for an in-memory pipe and measures the CPU-bound limit of
// whatever runs over it.
func Unlimited() Link { return Link{} }

// LAN returns a 1 Gbit/s link with 0.5 ms one-way latency: a wired office
// or data-centre network, one switch between the hosts.
func LAN() Link {
	return Link{Bandwidth: 1e9, Latency: 500 * time.Microsecond}
}

// Broadband returns a 100 Mbit/s link with 8 ms one-way latency: a home
// fibre or cable connection to a server in the same region.
func Broadband() Link {
	return Link{Bandwidth: 100e6, Latency: 8 * time.Millisecond}
}

// Bufferbloat returns Broadband behind a 2 MiB buffer (bloatedSendBuffer):
// a home router's deep queue, where Broadband's default buffer holds the
// path's bandwidth-delay product and 10 ms. A sender whose congestion
// control fills the buffer (CUBIC does) keeps 170 ms of data queued ahead
// of anything it sends next.
func Bufferbloat() Link {
	l := Broadband()
	l.SendBuffer = bloatedSendBuffer
	return l
}

// bloatedSendBuffer is Bufferbloat's buffer: 2 MiB, 170 ms at 100
// Mbit/s, a deep queue of the kind a home router without active queue
// management keeps, against the default's 26 ms (16 ms round trip and
// 10 ms of slack).
const bloatedSendBuffer = 2 << 20

// Mobile returns a 10 Mbit/s link with 30 ms one-way latency, up to 5 ms of
// jitter and 0.5 % packet loss: a phone on a 4G network.
func Mobile() Link {
	return Link{
		Bandwidth: 10e6,
		Latency:   30 * time.Millisecond,
		Jitter:    5 * time.Millisecond,
		Loss:      0.005,
	}
}

// Satellite returns a 20 Mbit/s link with 300 ms one-way latency: a
// geostationary satellite hop (about 36,000 km up and down again).
func Satellite() Link {
	return Link{Bandwidth: 20e6, Latency: 300 * time.Millisecond}
}

// LongFat returns a 1 Gbit/s link with 50 ms one-way latency: a "long fat
// network" such as a transcontinental backbone path, whose large
// bandwidth-delay product exposes too-small flow-control windows.
func LongFat() Link {
	return Link{Bandwidth: 1e9, Latency: 50 * time.Millisecond}
}

// Profiles returns every named profile, Unlimited first, in a fresh slice
// the caller may modify.
func Profiles() []Profile {
	return []Profile{
		{"Unlimited", Unlimited()},
		{"LAN", LAN()},
		{"Broadband", Broadband()},
		{"Bufferbloat", Bufferbloat()},
		{"Mobile", Mobile()},
		{"Satellite", Satellite()},
		{"LongFat", LongFat()},
	}
}
