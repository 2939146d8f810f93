// Go peer of tests/green/churn.cm: rounds (argument 1) of creating 8 goroutines that return at
// once and joining each in turn, as the C-- program's sthread_join does: every goroutine has
// its own WaitGroup (no allocation per goroutine, like a join). One WaitGroup for all eight is
// a cheaper pattern than eight joins (main parks at most once a round): on 2026-11-26 it ran
// churn 1.6-1.9x faster than this peer on x86-64, so it is not the same program.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Println("usage: churn ROUNDS")
		os.Exit(2)
	}
	rounds, err := strconv.Atoi(os.Args[1])
	if err != nil || rounds < 0 {
		fmt.Println("usage: churn ROUNDS")
		os.Exit(2)
	}
	var wg [8]sync.WaitGroup
	for r := 0; r < rounds; r++ {
		for i := 0; i < 8; i++ {
			wg[i].Add(1)
			go func(w *sync.WaitGroup) {
				w.Done()
			}(&wg[i])
		}
		for i := 0; i < 8; i++ {
			wg[i].Wait()
		}
	}
	fmt.Printf("%d rounds\n", rounds)
}
