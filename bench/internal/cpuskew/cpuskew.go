// Package cpuskew measures how fast each CPU of the machine runs the work
// that bounds a muxer over TLS: AES-128-GCM sealing, one CPU at a time, on
// a thread pinned to it.
//
// On a virtual machine the CPUs need not be equal. On the 2-vCPU machines
// braid is measured on, one vCPU at times runs AES-GCM a third slower than
// the other for seconds to minutes (the host runs something beside it),
// and the loaded ping over TLS at two P changes mode with it
// (docs/measurements.md, session 42). A benchmark round taken while the
// CPUs are skewed is not the same experiment as one taken while they are
// even; Sample says which one a round was.
package cpuskew

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// recordSize is what each seal covers: one full TLS record.
const recordSize = 16 * 1024

// sealsPerClockRead amortizes the clock: 16 records (256 KiB, about 50
// µs at the rates seen) between reads of time.Now.
const sealsPerClockRead = 16

// ErrUnsupported is returned where a thread cannot be pinned to one CPU
// (every system but Linux).
var ErrUnsupported = errors.New("cpuskew: pinning a thread to a CPU is not supported here")

// Rate is one CPU's AES-128-GCM seal rate.
type Rate struct {
	CPU      int     `json:"cpu"`
	MBPerSec float64 `json:"mb_per_sec"`
}

// Sample is every CPU's rate, measured one after the other.
type Sample struct {
	Rates []Rate `json:"rates"`
}

// Ratio is the slowest CPU's rate over the fastest's: 1 when the CPUs are
// even, 0 for an empty sample.
func (s Sample) Ratio() float64 {
	if len(s.Rates) == 0 {
		return 0
	}
	lo, hi := s.Rates[0].MBPerSec, s.Rates[0].MBPerSec
	for _, r := range s.Rates[1:] {
		lo, hi = min(lo, r.MBPerSec), max(hi, r.MBPerSec)
	}
	if hi <= 0 {
		return 0
	}
	return lo / hi
}

// Measure seals on each CPU the process may run on for d, one CPU at a
// time, and returns the rates. The other goroutines keep running
// meanwhile, so measure while nothing else is busy.
//
// The work runs on a goroutine of its own, locked to its thread, which it
// pins to each CPU in turn and then gives its former CPU set back. Only
// when that succeeds does it unlock the thread; otherwise it ends locked,
// and the runtime discards the thread rather than run other goroutines on
// one pinned CPU. Measure waits for it.
func Measure(d time.Duration) (Sample, error) {
	type result struct {
		s   Sample
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		s, restored, err := measureLocked(d)
		if restored {
			runtime.UnlockOSThread()
		}
		done <- result{s, err}
	}()
	r := <-done
	return r.s, r.err
}

// measureLocked is Measure's work on the calling, locked thread; restored
// tells whether the thread has its former CPU set back (so it may be
// unlocked).
func measureLocked(d time.Duration) (s Sample, restored bool, err error) {
	cpus, restore, err := allowedCPUs()
	if err != nil {
		return Sample{}, true, err // nothing was changed
	}
	defer func() {
		rerr := restore()
		restored = rerr == nil
		if err == nil && rerr != nil {
			err = fmt.Errorf("cpuskew: giving the thread its CPUs back: %w", rerr)
		}
	}()
	for _, cpu := range cpus {
		if err := pin(cpu); err != nil {
			return Sample{}, false, err
		}
		rate, err := sealRate(d)
		if err != nil {
			return Sample{}, false, err
		}
		s.Rates = append(s.Rates, Rate{CPU: cpu, MBPerSec: rate})
	}
	return s, false, nil
}

// sealRate seals records for d on the calling thread and returns MB/s.
// Its errors are the cipher's, which a 16-byte key and AES's 16-byte block
// never give; they are returned, not assumed away.
func sealRate(d time.Duration) (float64, error) {
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		return 0, fmt.Errorf("cpuskew: AES: %w", err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return 0, fmt.Errorf("cpuskew: GCM: %w", err)
	}
	nonce := make([]byte, gcm.NonceSize())
	src := make([]byte, recordSize)
	dst := make([]byte, 0, recordSize+gcm.Overhead())
	sealed := 0
	start := time.Now()
	var took time.Duration
	for took < d {
		for range sealsPerClockRead {
			dst = gcm.Seal(dst[:0], nonce, src, nil)
		}
		sealed += sealsPerClockRead * recordSize
		took = time.Since(start)
	}
	return float64(sealed) / took.Seconds() / 1e6, nil
}
