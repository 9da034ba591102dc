//go:build !unix

package slowconn

import "time"

// processCPU is unavailable here; cpu-s/GB reports 0.
func processCPU() time.Duration { return 0 }
