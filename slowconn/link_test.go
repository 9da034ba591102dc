package slowconn

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestLinkDefaults(t *testing.T) {
	var l Link
	if got := l.PayloadPerPacket(); got != defaultMTU-defaultOverhead {
		t.Errorf("zero Link payload %d, want %d", got, defaultMTU-defaultOverhead)
	}
	if !math.IsInf(l.Goodput(), 1) {
		t.Errorf("zero Link goodput %v, want +Inf", l.Goodput())
	}
	if got := l.sendBuffer(); got != minSendBuffer {
		t.Errorf("zero Link send buffer %d, want %d", got, minSendBuffer)
	}
	l = Link{Bandwidth: 8e6, MTU: 1000, PerPacketOverhead: -1}
	if got, want := l.Goodput(), 1e6; got != want {
		t.Errorf("no-overhead goodput %v, want the full %v", got, want)
	}
	l = Link{Bandwidth: 1e9, MTU: 9000, PerPacketOverhead: 100}
	if got, want := l.Goodput(), 1e9/8*8900/9000; math.Abs(got-want) > 1e-6 {
		t.Errorf("goodput %v, want %v", got, want)
	}
	// The default buffer covers a round trip plus scheduling slack.
	l = Link{Bandwidth: 1e9, Latency: 50 * time.Millisecond}
	if got, want := l.sendBuffer(), int(1e9/8*(0.100+schedulingSlack.Seconds())); got != want {
		t.Errorf("LongFat-like send buffer %d, want %d", got, want)
	}
	// Never less than one packet.
	if got := (Link{SendBuffer: 10}).sendBuffer(); got != defaultMTU-defaultOverhead {
		t.Errorf("tiny send buffer raised to %d, want one packet", got)
	}
	if got, want := (Link{Latency: time.Second, Jitter: time.Second}).RTO(), 3*time.Second+minRTO; got != want {
		t.Errorf("RTO %v, want %v", got, want)
	}
}

func TestProfiles(t *testing.T) {
	want := map[string]Link{
		"Unlimited":   {},
		"LAN":         {Bandwidth: 1e9, Latency: 500 * time.Microsecond},
		"Broadband":   {Bandwidth: 100e6, Latency: 8 * time.Millisecond},
		"Bufferbloat": {Bandwidth: 100e6, Latency: 8 * time.Millisecond, SendBuffer: 2 << 20},
		"Mobile":      {Bandwidth: 10e6, Latency: 30 * time.Millisecond, Jitter: 5 * time.Millisecond, Loss: 0.005},
		"Satellite":   {Bandwidth: 20e6, Latency: 300 * time.Millisecond},
		"LongFat":     {Bandwidth: 1e9, Latency: 50 * time.Millisecond},
	}
	ps := Profiles()
	if len(ps) != len(want) {
		t.Errorf("%d profiles, want %d", len(ps), len(want))
	}
	for _, p := range ps {
		if w, ok := want[p.Name]; !ok || p.Link != w {
			t.Errorf("profile %s = %+v, want %+v", p.Name, p.Link, w)
		}
		if err := p.Link.validate(); err != nil {
			t.Errorf("profile %s invalid: %v", p.Name, err)
		}
	}
	ps[1].Link.Bandwidth = 1
	if Profiles()[1].Link.Bandwidth == 1 {
		t.Error("Profiles returned shared state")
	}
}

func TestInvalidLinkPanics(t *testing.T) {
	for _, l := range []Link{
		{Bandwidth: -1},
		{Latency: -1},
		{Jitter: -1},
		{MTU: 40},
		{MTU: maxMTU + 1},
		{Loss: 1.5},
		{Loss: math.NaN()},
		{SendBuffer: -1},
	} {
		if err := l.Validate(); err == nil || !strings.HasPrefix(err.Error(), "slowconn: invalid Link: ") {
			t.Errorf("%+v.Validate() = %v, want an invalid-Link error", l, err)
		}
		func() {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(r.(error).Error(), "slowconn: invalid Link") {
					t.Errorf("Pipe(%+v) recovered %v, want an invalid-Link panic", l, r)
				}
			}()
			Pipe(l)
		}()
	}
	for _, p := range Profiles() {
		if err := p.Link.Validate(); err != nil {
			t.Errorf("%s.Validate() = %v", p.Name, err)
		}
	}
}

// TestWrapNilPanics: Wrap of a nil conn panics in the caller, not later in
// the goroutine that writes to it.
func TestWrapNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(error).Error(), "nil net.Conn") {
			t.Errorf("Wrap(nil) recovered %v, want a nil-conn panic", r)
		}
	}()
	Wrap(nil, LAN())
}
