package slowconn

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// transferResult describes one bulk transfer.
type transferResult struct {
	elapsed time.Duration // from the first Write to the last byte read
	sent    [sha256.Size]byte
	got     [sha256.Size]byte
	n       int
}

// transfer writes total pseudo-random bytes into w in writes of writeSize,
// reads them from r, and times it from just before the first Write to the
// moment the last byte was read.
func transfer(t testing.TB, w, r net.Conn, total, writeSize int) transferResult {
	t.Helper()
	data := make([]byte, total)
	var seed [32]byte
	seed[0], seed[1] = byte(total), byte(writeSize)
	rand.NewChaCha8(seed).Read(data)
	res := transferResult{sent: sha256.Sum256(data)}
	werr := make(chan error, 1)
	start := time.Now()
	go func() {
		for off := 0; off < total; off += writeSize {
			if _, err := w.Write(data[off:min(off+writeSize, total)]); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	h := sha256.New()
	buf := make([]byte, 64<<10)
	var last time.Time
	for res.n < total {
		n, err := r.Read(buf[:min(len(buf), total-res.n)])
		if n > 0 {
			h.Write(buf[:n])
			res.n += n
			last = time.Now()
		}
		if err != nil {
			t.Fatalf("Read after %d bytes: %v", res.n, err)
		}
	}
	if err := <-werr; err != nil {
		t.Fatalf("Write: %v", err)
	}
	res.elapsed = last.Sub(start)
	copy(res.got[:], h.Sum(nil))
	if res.n != total || res.got != res.sent {
		t.Fatalf("received %d bytes (SHA-256 %x), want %d bytes (%x)", res.n, res.got[:4], total, res.sent[:4])
	}
	return res
}

// wireBytes returns the link capacity, in bytes, that writing total bytes in
// writes of writeSize uses: every write ends a packet, and each packet costs
// its payload plus the overhead.
func wireBytes(l Link, total, writeSize int) int64 {
	p, o := l.PayloadPerPacket(), l.Overhead()
	packets := func(n int) int { return (n + p - 1) / p }
	full, rest := total/writeSize, total%writeSize
	n := int64(full) * int64(writeSize+packets(writeSize)*o)
	if rest > 0 {
		n += int64(rest + packets(rest)*o)
	}
	return n
}

// modelTime returns when the last byte of such a transfer arrives on an
// otherwise idle link without jitter or loss: the serialization of every
// packet back to back, then one latency.
func modelTime(l Link, total, writeSize int) time.Duration {
	bits := wireBytes(l, total, writeSize) * 8
	return time.Duration(bits*int64(time.Second)/l.Bandwidth) + l.Latency
}

// serialization returns how long n bytes of link capacity take to send.
func serialization(l Link, n int) time.Duration {
	return time.Duration(int64(n) * 8 * int64(time.Second) / l.Bandwidth)
}

// readMessages reads count messages of size bytes from r and returns when
// each was complete.
func readMessages(t testing.TB, r io.Reader, count, size int) ([]time.Time, [][]byte) {
	t.Helper()
	times := make([]time.Time, count)
	msgs := make([][]byte, count)
	for i := range count {
		msgs[i] = make([]byte, size)
		if _, err := io.ReadFull(r, msgs[i]); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		times[i] = time.Now()
	}
	return times, msgs
}

// message returns the i-th test message of size bytes.
func message(i, size int) []byte {
	return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2)
}
