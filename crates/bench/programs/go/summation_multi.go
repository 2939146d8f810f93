// Go peer of thesis listing A.6 (Multi-Threaded Summation): one goroutine per thread, each
// summing 1..n recursively on its own growable stack. Usage: <threads> <n> [stacksize, ignored]
package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
)

//go:noinline
func summation(n int32) int32 {
	if n == 0 {
		return 0
	}
	return n + summation(n-1)
}

func main() {
	if len(os.Args) != 3 && len(os.Args) != 4 {
		fmt.Print("Usage: <numthreads> <summation> [stacksize]")
		os.Exit(1)
	}
	debug.SetMaxStack(math.MaxInt)
	threads, _ := strconv.Atoi(os.Args[1])
	n, _ := strconv.Atoi(os.Args[2])
	var wg sync.WaitGroup
	results := make([]int32, threads)
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i] = summation(int32(n))
		}(i)
	}
	wg.Wait()
	fmt.Printf("Data: %d\n", threads)
}
