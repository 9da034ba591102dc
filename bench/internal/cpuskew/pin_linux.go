package cpuskew

import (
	"syscall"
	"unsafe"
)

// cpuSet is the kernel's cpu_set_t: 1,024 CPUs, one bit each.
type cpuSet [1024 / 64]uint64

// allowedCPUs returns the CPUs the calling thread may run on, and a func
// that gives the thread that set back. The thread must be locked.
func allowedCPUs() ([]int, func() error, error) {
	var set cpuSet
	if err := schedAffinity(syscall.SYS_SCHED_GETAFFINITY, &set); err != nil {
		return nil, nil, err
	}
	var cpus []int
	for i := range len(set) * 64 {
		if set[i/64]&(1<<(i%64)) != 0 {
			cpus = append(cpus, i)
		}
	}
	restore := func() error { return schedAffinity(syscall.SYS_SCHED_SETAFFINITY, &set) }
	return cpus, restore, nil
}

// pin keeps the calling (locked) thread on cpu.
func pin(cpu int) error {
	var set cpuSet
	set[cpu/64] = 1 << (cpu % 64)
	return schedAffinity(syscall.SYS_SCHED_SETAFFINITY, &set)
}

// schedAffinity gets or sets the calling thread's CPU set (pid 0).
func schedAffinity(trap uintptr, set *cpuSet) error {
	_, _, errno := syscall.RawSyscall(trap, 0, unsafe.Sizeof(*set), uintptr(unsafe.Pointer(set)))
	if errno != 0 {
		return errno
	}
	return nil
}
