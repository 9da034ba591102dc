package cpuskew

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestMeasureEveryCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		_, err := Measure(time.Millisecond)
		if err != ErrUnsupported {
			t.Fatalf("Measure off Linux: err %v, want ErrUnsupported", err)
		}
		return
	}
	cpus, restore, err := func() ([]int, func() error, error) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		return allowedCPUs()
	}()
	if err != nil {
		t.Fatal(err)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	s, err := Measure(20 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rates) != len(cpus) {
		t.Fatalf("%d rates for %d CPUs (%v)", len(s.Rates), len(cpus), cpus)
	}
	for i, r := range s.Rates {
		if r.CPU != cpus[i] || r.MBPerSec <= 0 {
			t.Errorf("rate %d: %+v, want CPU %d and a positive rate", i, r, cpus[i])
		}
	}
	if q := s.Ratio(); q <= 0 || q > 1 {
		t.Errorf("Ratio %v, want (0, 1]", q)
	}
}

// TestMeasureGivesTheCPUSetBack: the thread that measured runs where it
// could before (it was pinned to one CPU at a time meanwhile), and says
// so, so that Measure may unlock it.
func TestMeasureGivesTheCPUSetBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		return // TestMeasureEveryCPU checks ErrUnsupported there
	}
	keepsThreadCPUs(t, "measuring", func() {
		// The work Measure runs on its own locked thread, here on this one.
		_, restored, err := measureLocked(time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if !restored {
			t.Fatal("measureLocked did not report the CPU set given back")
		}
	})
}

// TestMeasureLeavesTheCallerAlone: Measure pins a thread of its own, never
// the caller's.
func TestMeasureLeavesTheCallerAlone(t *testing.T) {
	if runtime.GOOS != "linux" {
		return
	}
	keepsThreadCPUs(t, "Measure", func() {
		if _, err := Measure(time.Millisecond); err != nil {
			t.Fatal(err)
		}
	})
}

// keepsThreadCPUs runs f on the test's thread, locked, and fails the test
// if the thread's CPU set after f is not the one before.
func keepsThreadCPUs(t *testing.T, what string, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before, _, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	f()
	after, _, err := allowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, before) {
		t.Fatalf("the thread's CPU set after %s %v, before %v", what, after, before)
	}
}

func TestRatio(t *testing.T) {
	for _, c := range []struct {
		rates []float64
		want  float64
	}{
		{nil, 0},
		{[]float64{5000}, 1},
		{[]float64{5000, 5000}, 1},
		{[]float64{5500, 3667}, 3667.0 / 5500},
		{[]float64{3667, 5500, 4000}, 3667.0 / 5500},
		{[]float64{0, 0}, 0},
	} {
		var s Sample
		for i, r := range c.rates {
			s.Rates = append(s.Rates, Rate{CPU: i, MBPerSec: r})
		}
		if got := s.Ratio(); got != c.want {
			t.Errorf("Ratio of %v = %v, want %v", c.rates, got, c.want)
		}
	}
}
