// Go peer of tests/green/alive.cm: N goroutines (argument 1) each recurse DEPTH levels
// (argument 2), check in under a mutex, call runtime.Gosched until all N have arrived, then
// unwind; main checks every result against id + DEPTH.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

var (
	mu       sync.Mutex
	arrived  int
	nthreads int
)

func down(n, id int) int {
	if n == 0 {
		mu.Lock()
		arrived++
		mu.Unlock()
		for {
			mu.Lock()
			done := arrived >= nthreads
			mu.Unlock()
			if done {
				break
			}
			runtime.Gosched()
		}
		return id
	}
	return down(n-1, id) + 1
}

func main() {
	var err error
	nthreads, err = strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	depth, err := strconv.Atoi(os.Args[2])
	if err != nil {
		panic(err)
	}
	results := make([]int, nthreads)
	var wg sync.WaitGroup
	for i := 0; i < nthreads; i++ {
		wg.Add(1)
		go func(i int) {
			results[i] = down(depth, i)
			wg.Done()
		}(i)
	}
	wg.Wait()
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
