// Go peer of tests/green/alive.cm: N goroutines (argument 1) each recurse DEPTH levels
// (argument 2), check in under a mutex, wait at a barrier until all N have arrived, then unwind;
// main checks every result against id + DEPTH.
//
// The barrier is a WaitGroup the goroutines arrive at and a channel main closes once it has
// seen all N: waiting goroutines are parked, not spinning. (Spinning on runtime.Gosched until
// all had arrived made every arrival rescan every spinner: quadratic in N.)
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

var (
	mu      sync.Mutex
	arrived int
	arrival sync.WaitGroup
	release = make(chan struct{})
)

func down(n, id int) int {
	if n == 0 {
		mu.Lock()
		arrived++
		mu.Unlock()
		arrival.Done()
		<-release
		return id
	}
	return down(n-1, id) + 1
}

func main() {
	nthreads, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	depth, err := strconv.Atoi(os.Args[2])
	if err != nil {
		panic(err)
	}
	results := make([]int, nthreads)
	var done sync.WaitGroup
	arrival.Add(nthreads)
	for i := 0; i < nthreads; i++ {
		done.Add(1)
		go func(i int) {
			results[i] = down(depth, i)
			done.Done()
		}(i)
	}
	arrival.Wait()
	close(release)
	done.Wait()
	wrong := 0
	for i, r := range results {
		if r != i+depth {
			wrong++
		}
	}
	fmt.Printf("%d threads arrived, %d results wrong\n", arrived, wrong)
	if wrong != 0 {
		os.Exit(1)
	}
}
