package main

import (
	"bufio"
	"os"
	"runtime"
	"strings"
	"time"
)

// machine describes where the run ran.
type machine struct {
	CPU        string    `json:"cpu"`
	Cores      int       `json:"cores"`
	GOOS       string    `json:"goos"`
	GOARCH     string    `json:"goarch"`
	GoVersion  string    `json:"go_version"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	Date       time.Time `json:"date"`
}

// cpuInfo is where Linux names the CPU.
const cpuInfo = "/proc/cpuinfo"

func readMachine() machine {
	return machine{
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		GoVersion:  runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Date:       time.Now(),
	}
}

// cpuModel returns the CPU's model name, or "unknown".
func cpuModel() string {
	f, err := os.Open(cpuInfo)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
