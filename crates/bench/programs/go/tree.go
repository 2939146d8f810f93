// Go peer of thesis listings A.7 and A.8 (Unbalanced Binary Tree): the same tree, the same
// searches (glibc's rand_r reimplemented, so every search goes where the C-- program's goes),
// one goroutine per thread. Usage: <balanced> <unbalanced> <spike fraction> <searches>
// [<threads> [stacksize, ignored]]; without <threads> it is the single-threaded program and
// prints "Data: <searches>", with it "Data: <threads>", as the C-- programs do.
package main

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
)

type node struct {
	left, right *node
	value       int32
}

func createBalanced(l, r int32) *node {
	if l > r {
		return nil
	}
	m := (l + r) / 2
	return &node{value: m, left: createBalanced(l, m-1), right: createBalanced(m+1, r)}
}

//go:noinline
func search(n *node, val int32) int32 {
	if n == nil {
		return 0
	}
	if val == n.value {
		return 1
	}
	if val < n.value {
		return search(n.left, val)
	}
	return search(n.right, val)
}

// randR is glibc's rand_r.
func randR(seed *uint32) int32 {
	next := *seed
	next *= 1103515245
	next += 12345
	result := (next / 65536) % 2048
	next *= 1103515245
	next += 12345
	result <<= 10
	result ^= (next / 65536) % 1024
	next *= 1103515245
	next += 12345
	result <<= 10
	result ^= (next / 65536) % 1024
	*seed = next
	return int32(result)
}

func searches(root *node, count int, balanced, unbalanced int32, spike float64) {
	seed := uint32(128191227)
	const randMax = 2147483647.0
	for i := 0; i < count; i++ {
		r := float64(randR(&seed)) / randMax
		if r < spike {
			search(root, balanced+unbalanced)
		} else {
			r = float64(randR(&seed)) / randMax * float64(balanced)
			search(root, int32(r))
		}
	}
}

func main() {
	if len(os.Args) < 5 {
		fmt.Println("Usage: <balanced_size> <unbalanced_size> <percent_spike> <searches> [threads [stacksize]]")
		os.Exit(1)
	}
	debug.SetMaxStack(math.MaxInt)
	balanced, _ := strconv.Atoi(os.Args[1])
	unbalanced, _ := strconv.Atoi(os.Args[2])
	spike, _ := strconv.ParseFloat(os.Args[3], 64)
	count, _ := strconv.Atoi(os.Args[4])
	root := createBalanced(0, int32(balanced))
	max := root
	for max.right != nil {
		max = max.right
	}
	for i := 0; i < unbalanced; i++ {
		max.right = &node{value: int32(i + balanced + 1)}
		max = max.right
	}
	if len(os.Args) == 5 {
		searches(root, count, int32(balanced), int32(unbalanced), spike)
		fmt.Printf("Data: %d\n", count)
		return
	}
	threads, _ := strconv.Atoi(os.Args[5])
	var wg sync.WaitGroup
	for i := 0; i < threads; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			searches(root, count, int32(balanced), int32(unbalanced), spike)
		}()
	}
	wg.Wait()
	fmt.Printf("Data: %d\n", threads)
}
