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

// Stacks returns the bytes of goroutine stacks in use after the same two
// collections (a collection shrinks the stacks that use little of
// theirs): what goroutines cost beside the heap, since an idle
// goroutine's stack is not heap.
func Stacks() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.StackInuse
}
