// Package heapstat measures the live heap for the memory tests and
// benchmarks of braid's modules.
package heapstat

import "runtime"

// Settled returns the memory statistics after two collections: the second
// empties sync.Pool's victim caches, go-buffer-pool's included, so pooled
// buffers nobody holds don't count, and a collection shrinks the
// goroutine stacks that use little of theirs.
func Settled() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

// Live returns the live heap, settled (see Settled).
func Live() uint64 { return Settled().HeapAlloc }
