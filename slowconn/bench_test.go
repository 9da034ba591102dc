package slowconn

import (
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"
)

// BenchmarkPipe1Gbit measures the simulator's own cost: the CPU time it
// spends per simulated gigabyte moved over a 1 Gbit/s link in 64 KiB
// writes. CPU time is read from the process, so it includes the writer,
// the reader and the runtime (timers, scheduling) on every core.
func BenchmarkPipe1Gbit(b *testing.B) {
	for _, writeSize := range []int{64 << 10, 1 << 10} {
		b.Run(fmt.Sprintf("write=%d", writeSize), func(b *testing.B) {
			l := Link{Bandwidth: 1e9, Latency: time.Millisecond}
			const total = 16 << 20
			b.SetBytes(total)
			b.ReportAllocs()
			var cpu, wall time.Duration
			for b.Loop() {
				x, y := Pipe(l)
				c0, w0 := processCPU(), time.Now()
				pump(b, x, y, total, writeSize)
				cpu += processCPU() - c0
				wall += time.Since(w0)
				x.Close()
				y.Close()
			}
			gb := float64(b.N) * total / 1e9
			b.ReportMetric(cpu.Seconds()/gb, "cpu-s/GB")
			b.ReportMetric(float64(b.N)*total/wall.Seconds()*8/1e9, "Gbit/s")
			b.ReportMetric(0, "ns/op") // wall time is the link's, not the simulator's
		})
	}
}

// BenchmarkPipeUnlimited measures the cost of a Pipe with no link limits,
// the baseline other packages' CPU-bound measurements pay.
func BenchmarkPipeUnlimited(b *testing.B) {
	const total = 16 << 20
	b.SetBytes(total)
	b.ReportAllocs()
	for b.Loop() {
		x, y := Pipe(Unlimited())
		pump(b, x, y, total, 64<<10)
		x.Close()
		y.Close()
	}
}

// pump writes total bytes into w in writes of writeSize while reading them
// from r.
func pump(tb testing.TB, w io.Writer, r io.Reader, total, writeSize int) {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, writeSize)
		for sent := 0; sent < total; sent += writeSize {
			if _, err := w.Write(buf[:min(writeSize, total-sent)]); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if _, err := io.CopyN(io.Discard, r, int64(total)); err != nil {
		tb.Fatal(err)
	}
	if err := <-done; err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkMaxBandwidthOneCore finds the highest bandwidth the simulator
// holds within 2 % of the model on one core (GOMAXPROCS=1, restored
// afterwards), trying 1, 2, 5, 10, 20 and 40 Gbit/s with 64 KiB writes. It
// reports the highest rate held; it is a benchmark, not a test, because the
// answer depends on the machine.
func BenchmarkMaxBandwidthOneCore(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const writeSize = 64 << 10
	for b.Loop() {
		var held float64
		for _, gbit := range []int64{1, 2, 5, 10, 20, 40} {
			l := Link{Bandwidth: gbit * 1e9, Latency: time.Millisecond}
			total := int(l.Goodput() / 4) // a quarter of a second
			want := modelTime(l, total, writeSize)
			x, y := Pipe(l)
			start := time.Now()
			pump(b, x, y, total, writeSize)
			got := time.Since(start)
			x.Close()
			y.Close()
			b.Logf("%2d Gbit/s: %v for %v of link time (%+.2f%%)", gbit, got.Round(time.Microsecond), want, 100*relErr(got, want))
			if relErr(got, want) > goodputTolerance {
				break
			}
			held = float64(gbit)
		}
		b.ReportMetric(held, "Gbit/s-held")
	}
	b.ReportMetric(0, "ns/op")
}
