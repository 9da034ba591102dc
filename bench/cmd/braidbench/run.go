package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// report is everything one run measured.
type report struct {
	Machine    machine       `json:"machine"`
	Options    options       `json:"options"`
	Started    time.Time     `json:"started"`
	Duration   time.Duration `json:"duration_ns"`
	Complete   bool          `json:"complete"` // false if interrupted
	Contenders []entry       `json:"contenders"`
	Cells      []cellResult  `json:"cells"`
}

// cellResult is a cell with every contender's samples.
type cellResult struct {
	cell
	Results []contenderResult `json:"results"`
	// Skew is, per round, the CPUs' slowest seal rate over their fastest
	// just before the cell ran (skew.go); 0 where it was not measured.
	Skew []float64 `json:"vcpu_skew,omitempty"`
}

// contenderResult is one contender's samples of one cell.
type contenderResult struct {
	Contender     string             `json:"contender"`
	Samples       []sample           `json:"samples"`
	Failed        string             `json:"failed,omitempty"`
	NotApplicable string             `json:"not_applicable,omitempty"`
	Summary       map[string]summary `json:"summary,omitempty"`
}

// ok tells whether r has figures to show.
func (r *contenderResult) ok() bool {
	return r.Failed == "" && r.NotApplicable == "" && len(r.Samples) > 0
}

// run measures every cell of opts for every contender, interleaved: each
// round runs every cell, each cell every contender in turn. A contender
// that fails a cell is marked failed there and skipped in later rounds.
// When ctx is done, run stops and returns what was measured.
func run(ctx context.Context, opts options, prog *progress) (*report, error) {
	rep := &report{Machine: readMachine(), Options: opts, Started: time.Now(), Contenders: selectEntries(opts.Only)}
	cells := buildCells(opts)
	if len(cells) == 0 {
		return nil, errors.New("no workload selected")
	}
	for _, c := range cells {
		cr := cellResult{cell: c}
		for _, e := range rep.Contenders {
			r := contenderResult{Contender: e.Name}
			if c.na != nil {
				r.NotApplicable = c.na(e)
			}
			cr.Results = append(cr.Results, r)
		}
		rep.Cells = append(rep.Cells, cr)
	}
	defer stopCells(rep)
	startCells(ctx, rep, prog)
	prog.start(opts.Rounds * jobsPerRound(rep))
	for round := 0; round < opts.Rounds && ctx.Err() == nil; round++ {
		for i := range rep.Cells {
			if ctx.Err() != nil {
				break
			}
			runCell(ctx, opts, rep, &rep.Cells[i], round, prog)
		}
	}
	prog.finish()
	rep.Complete = ctx.Err() == nil
	rep.Duration = time.Since(rep.Started)
	summarize(rep)
	return rep, nil
}

// startCells runs every cell's start; a cell whose start fails is failed
// for every contender.
func startCells(ctx context.Context, rep *report, prog *progress) {
	for i := range rep.Cells {
		c := &rep.Cells[i]
		if c.start == nil {
			continue
		}
		if err := c.start(ctx); err != nil {
			prog.logf("%s: %v", c.ID, err)
			for j := range c.Results {
				if c.Results[j].NotApplicable == "" {
					c.Results[j].Failed = err.Error()
				}
			}
		}
	}
}

// stopCells runs every cell's stop.
func stopCells(rep *report) {
	for _, c := range rep.Cells {
		if c.stop != nil {
			c.stop()
		}
	}
}

// jobsPerRound counts the measurements of one round.
func jobsPerRound(rep *report) int {
	n := 0
	for _, c := range rep.Cells {
		for _, r := range c.Results {
			if r.NotApplicable == "" {
				n++
			}
		}
	}
	return n
}

// runCell runs one round of cell c: its contenders in turn, or side by
// side.
func runCell(ctx context.Context, opts options, rep *report, c *cellResult, round int, prog *progress) {
	c.Skew = append(c.Skew, sampleSkew())
	if c.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.Procs))
	}
	var wg sync.WaitGroup
	for i, e := range rep.Contenders {
		r := &c.Results[i]
		if r.NotApplicable != "" {
			continue
		}
		job := jobKey{cell: c.ID, contender: e.Name}
		label := fmt.Sprintf("round %d/%d · %s · %s", round+1, opts.Rounds, c.ID, e.Name)
		if r.Failed != "" {
			prog.skip()
			continue
		}
		one := func() {
			prog.begin(job, label)
			s, err := measureOne(ctx, c.measure, e, round, opts.Timeout)
			prog.end(job)
			switch {
			case ctx.Err() != nil:
				// Interrupted: the run stops; this sample is not a failure.
			case err != nil:
				r.Failed = err.Error()
				prog.logf("%s: %s failed: %v", c.ID, e.Name, err)
			default:
				r.Samples = append(r.Samples, s)
			}
		}
		if c.Side {
			wg.Add(1)
			go func() {
				defer wg.Done()
				one()
			}()
		} else {
			one()
		}
	}
	wg.Wait()
}

// measureOne runs f with a timeout. A measurement that does not return
// within it is abandoned: its goroutine can't be killed, but its sessions
// are closed through the context, which ends most hangs.
func measureOne(ctx context.Context, f measureFunc, e entry, round int, timeout time.Duration) (sample, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("timed out after %v", timeout))
	defer cancel()
	type result struct {
		s   sample
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- result{err: fmt.Errorf("panic: %v\n%s", p, debug.Stack())}
			}
		}()
		s, err := f(ctx, e, round)
		ch <- result{s, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return r.s, r.err
		}
		return checkSample(r.s)
	case <-ctx.Done():
		// Give the measurement a moment to notice its closed sessions.
		select {
		case r := <-ch:
			if r.err == nil {
				return checkSample(r.s)
			}
		case <-time.After(abandonGrace):
		}
		return nil, context.Cause(ctx)
	}
}

// checkSample returns s, or an error if any of its figures is not
// positive (zero, negative or NaN): no measurement yields such a figure.
func checkSample(s sample) (sample, error) {
	for k, v := range s {
		if !(v > 0) {
			return nil, fmt.Errorf("measured %s = %v", k, v)
		}
	}
	return s, nil
}

// abandonGrace is how long a timed-out measurement may take to return
// after its sessions were closed before it is abandoned.
const abandonGrace = 2 * time.Second

// ctxErr prefers ctx's cause to err once ctx is done: the sessions were
// closed then, and the error a contender returns says less than why.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	return err
}
