// Go peer of tests/green/blocking.cm: THREADS goroutines each make ROUNDS calls of MODE:
// sleep (a nanosleep system call of USEC microseconds, argument 4, default 1000), pipe (pairs
// pass a byte back and forth through two pipes with read and write system calls) or abs (a
// short function call). The system calls are made directly (package syscall), as a C library
// makes them: the goroutine blocks its OS thread, and the runtime hands its processor to
// another thread (entersyscall/sysmon), which is what the C-- runtime's hand-off does. Go's own
// time.Sleep and os.Pipe would instead park the goroutine on a timer or the network poller.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
)

//go:noinline
func abs(x int32) int32 {
	if x < 0 {
		return -x
	}
	return x
}

func main() {
	if len(os.Args) < 4 {
		fmt.Println("usage: blocking THREADS ROUNDS sleep|pipe|abs [USEC]")
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Args[1])
	rounds, _ := strconv.Atoi(os.Args[2])
	mode := os.Args[3]
	usec := 1000
	if len(os.Args) > 4 {
		usec, _ = strconv.Atoi(os.Args[4])
	}
	sums := make([]int64, n)
	fds := make([]int, 2*n)
	if mode == "pipe" {
		for k := 0; k < n/2; k++ {
			var p [2]int
			if err := syscall.Pipe(p[:]); err != nil {
				panic(err)
			}
			fds[4*k], fds[4*k+1] = p[0], p[1]
			if err := syscall.Pipe(p[:]); err != nil {
				panic(err)
			}
			fds[4*k+2], fds[4*k+3] = p[0], p[1]
		}
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(me int) {
			defer wg.Done()
			buf := []byte{'x'}
			k := me / 2
			for r := 0; r < rounds; r++ {
				switch mode {
				case "sleep":
					ts := syscall.NsecToTimespec(int64(usec) * 1000)
					syscall.Nanosleep(&ts, nil)
					sums[me]++
				case "pipe":
					if me%2 == 0 {
						syscall.Write(fds[4*k+1], buf)
						syscall.Read(fds[4*k+2], buf)
					} else {
						syscall.Read(fds[4*k], buf)
						syscall.Write(fds[4*k+3], buf)
					}
					sums[me]++
				default:
					sums[me] = (sums[me] + int64(abs(int32(me-r)))) % 1000000007
				}
			}
		}(i)
	}
	wg.Wait()
	var total int64
	for i := 0; i < n; i++ {
		total = (total + sums[i]) % 1000000007
	}
	fmt.Printf("%d threads, %d rounds, %s: checksum %d\n", n, rounds, mode, total)
}
