// Go peer of tests/green/park.cm: N goroutines (argument 1) each recurse DEPTH levels
// (argument 2) through frames of three locals, check in under a mutex, then wait on a gate
// mutex that main holds until all N have arrived (a WaitGroup tells main, without spinning);
// then they unwind and main checks every result against id + DEPTH.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

var (
	mu      sync.Mutex
	gate    sync.Mutex
	arrived int
	arrival sync.WaitGroup
)

//go:noinline
func down(n, id int) int {
	if n == 0 {
		mu.Lock()
		arrived++
		mu.Unlock()
		arrival.Done()
		gate.Lock()
		gate.Unlock()
		return id
	}
	a := id + n
	b := a * 2
	c := down(n-1, id)
	return c + b - a - a + 1
}

func main() {
	if len(os.Args) != 3 {
		fmt.Println("usage: park THREADS DEPTH")
		os.Exit(2)
	}
	nthreads, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	depth, err := strconv.Atoi(os.Args[2])
	if err != nil {
		panic(err)
	}
	wrong := 0
	var done sync.WaitGroup
	gate.Lock()
	arrival.Add(nthreads)
	for i := 0; i < nthreads; i++ {
		done.Add(1)
		go func(i int) {
			if down(depth, i) != i+depth {
				mu.Lock()
				wrong++
				mu.Unlock()
			}
			done.Done()
		}(i)
	}
	arrival.Wait()
	gate.Unlock()
	done.Wait()
	fmt.Printf("%d threads arrived, %d results wrong\n", arrived, wrong)
	if wrong != 0 {
		os.Exit(1)
	}
}
