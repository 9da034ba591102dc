package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// progress reports on stderr what is running, how far the run is and the
// time left: one line rewritten in place on a terminal, plain log lines
// otherwise. It is safe for concurrent use.
type progress struct {
	w   io.Writer
	tty bool

	mu      sync.Mutex
	total   int
	done    int
	started time.Time
	running map[jobKey]string
	last    int // length of the last line written on a terminal
}

// jobKey names one contender in one cell.
type jobKey struct{ cell, contender string }

// newProgress reports to w; tty makes it rewrite one line.
func newProgress(w io.Writer, tty bool) *progress {
	return &progress{w: w, tty: tty, running: map[jobKey]string{}}
}

func (p *progress) start(total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total, p.started = total, time.Now()
}

// begin notes that job started.
func (p *progress) begin(job jobKey, label string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[job] = label
	p.show(label)
}

// end notes that job ended.
func (p *progress) end(job jobKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, job)
	p.done++
}

// skip counts a job that won't run (its contender failed earlier).
func (p *progress) skip() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
}

// logf prints a message on a line of its own.
func (p *progress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	fmt.Fprintf(p.w, "braidbench: "+format+"\n", args...)
}

// finish ends the progress line.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// show writes the progress line for label; p.mu is held.
func (p *progress) show(label string) {
	elapsed := time.Since(p.started)
	line := fmt.Sprintf("[%d/%d] %s · %s elapsed, %s left", p.done+1, p.total, label,
		elapsed.Round(time.Second), p.left(elapsed).Round(time.Second))
	if !p.tty {
		fmt.Fprintln(p.w, line)
		return
	}
	pad := ""
	if n := p.last - len(line); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprint(p.w, "\r"+line+pad)
	p.last = len(line)
}

// clear erases the progress line on a terminal; p.mu is held.
func (p *progress) clear() {
	if p.tty && p.last > 0 {
		fmt.Fprint(p.w, "\r"+strings.Repeat(" ", p.last)+"\r")
		p.last = 0
	}
}

// left estimates the time left: the jobs not yet done, at the mean pace
// so far.
func (p *progress) left(elapsed time.Duration) time.Duration {
	if p.done == 0 {
		return 0
	}
	perJob := elapsed / time.Duration(p.done)
	return perJob * time.Duration(p.total-p.done)
}
