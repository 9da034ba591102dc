// Package heapstat measures the live heap for the memory tests and
// benchmarks of braid's modules.
package heapstat

import "runtime"

// Live returns the live heap after two collections: the second empties
// sync.Pool's victim caches, go-buffer-pool's included, so pooled buffers
// nobody holds don't count.
func Live() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
