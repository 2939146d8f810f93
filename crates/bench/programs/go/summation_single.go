// Go peer of thesis listing A.5 (Single Threaded Summation) for the experiment harness
// (crates/bench/src/experiments.rs): the same recursion on the main goroutine's growable stack.
// Prints the same "Data:" line as the C-- program. Usage: <number>
package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

// summation is the thesis's recursion; int32 wraps like the C-- int.
//
//go:noinline
func summation(n int32) int32 {
	if n == 0 {
		return 0
	}
	return n + summation(n-1)
}

func main() {
	if len(os.Args) <= 1 {
		fmt.Println("Usage: <number>")
		os.Exit(1)
	}
	// The default limit (1 GB on 64-bit) is below the thesis's 100-million-deep recursion.
	debug.SetMaxStack(math.MaxInt)
	arg, _ := strconv.Atoi(os.Args[1])
	fmt.Printf("Data: %d %d\n", arg/1000000, summation(int32(arg)))
}
