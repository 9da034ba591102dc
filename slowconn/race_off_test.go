//go:build !race

package slowconn

// raceEnabled reports whether the race detector is on; it slows the
// simulator's CPU work about tenfold, which matters at 1 Gbit/s.
const raceEnabled = false
