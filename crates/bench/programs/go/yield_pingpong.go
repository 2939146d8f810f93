// Go peer of tests/green/yield_pingpong.cm: two goroutines calling runtime.Gosched N times
// each (argument 1), run with GOMAXPROCS=1 by the harness so every call switches.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	total := make([]int, 2)
	for k := 0; k < 2; k++ {
		wg.Add(1)
		go func(k int) {
			for i := 0; i < n; i++ {
				runtime.Gosched()
			}
			total[k] = n
			wg.Done()
		}(k)
	}
	wg.Wait()
	fmt.Printf("%d yields\n", total[0]+total[1])
}
