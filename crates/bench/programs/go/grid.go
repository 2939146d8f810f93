// Go peer of tests/green/grid.cm: N goroutines (argument 1) each recurse DEPTH levels
// (argument 2) through one of three //go:noinline functions (argument 3: 16, 48 or 256, the
// C-- version's size classes of a level; Go's frames for them are its own), then wait until all
// have arrived (argument 4):
//
//	mutex  parked on a gate mutex that main holds until the last goroutine has arrived;
//	yield  calling runtime.Gosched in a loop until the arrival counter says all have arrived;
//	mixed  parked as with mutex, but one goroutine in a hundred (those whose number is a
//	       multiple of 100) recurses a hundred times deeper.
//
// Then they unwind, each checks its result, and main prints the same line as the C-- version.
// main waits for the last arrival on a mutex the last goroutine to arrive unlocks (a Go mutex
// may be unlocked by another goroutine), not by spinning. Under yield the goroutines first wait
// on a channel main closes once it has created them all: spinning while main still creates them
// made main, preempted, queue behind every spinner at each time slice (quadratic: 90 s at a
// million goroutines); the C-- threads wait there by yielding instead (C-- has no broadcast;
// see tests/green/grid.cm for what a preempted main costs there).
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
)

var (
	nthreads int32
	yielding bool
	mixed    bool
	started  = make(chan struct{})
	arrived  atomic.Int32
	wrong    atomic.Int32
	mu       sync.Mutex
	gate     sync.Mutex
	all      sync.Mutex
)

// waitAll is the bottom of every recursion: count in, wake main when last, wait for the others.
//
//go:noinline
func waitAll(id int) int {
	mu.Lock()
	if arrived.Add(1) == nthreads {
		all.Unlock()
	}
	mu.Unlock()
	if yielding {
		for arrived.Load() < nthreads {
			runtime.Gosched()
		}
	} else {
		gate.Lock()
		gate.Unlock()
	}
	return id
}

//go:noinline
func down16(n int) int {
	if n == 0 {
		return waitAll(0)
	}
	return down16(n-1) + 1
}

//go:noinline
func down48(n, id int) int {
	if n == 0 {
		return waitAll(id)
	}
	return down48(n-1, id) + 1
}

//go:noinline
func down256(n, id int) int {
	var v [48]int32
	if n == 0 {
		return waitAll(id)
	}
	k := n % 48
	v[k] = int32(id + n)
	return down256(n-1, id) + int(v[k]) - id - n + 1
}

func usage() {
	fmt.Println("usage: grid THREADS DEPTH 16|48|256 mutex|yield|mixed")
	os.Exit(2)
}

func main() {
	if len(os.Args) != 5 {
		usage()
	}
	n, err1 := strconv.Atoi(os.Args[1])
	depth, err2 := strconv.Atoi(os.Args[2])
	frame, err3 := strconv.Atoi(os.Args[3])
	yielding = os.Args[4] == "yield"
	mixed = os.Args[4] == "mixed"
	if err1 != nil || err2 != nil || err3 != nil || n < 1 || depth < 0 ||
		(frame != 16 && frame != 48 && frame != 256) ||
		(!yielding && !mixed && os.Args[4] != "mutex") {
		usage()
	}
	nthreads = int32(n)
	var done sync.WaitGroup
	gate.Lock()
	all.Lock()
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(id int) {
			defer done.Done()
			if yielding {
				<-started
			}
			d := depth
			if mixed && id%100 == 0 {
				d = depth * 100
			}
			var r int
			switch frame {
			case 16:
				r = id + down16(d)
			case 48:
				r = down48(d, id)
			default:
				r = down256(d, id)
			}
			if r != id+d {
				wrong.Add(1)
			}
		}(i)
	}
	close(started)
	// Locked until the last goroutine to arrive unlocks it.
	all.Lock()
	all.Unlock()
	gate.Unlock()
	done.Wait()
	fmt.Printf("%d threads arrived %d deep (frame %d, %s), %d results wrong\n", arrived.Load(),
		depth, frame, os.Args[4], wrong.Load())
	if wrong.Load() != 0 {
		os.Exit(1)
	}
}
