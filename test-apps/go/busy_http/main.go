// busy_http: an HTTP server on 127.0.0.1:PORT (argv[1]) whose two other
// goroutines spin without a syscall. In a sandbox without time slices the
// spinners keep the one vCPU and the server never answers
// (runtime-shim/tests/runtimes.rs). `GET /` answers how far the spinners
// got, `GET /quit` answers, then exits.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"time"
)

var spins [2]atomic.Uint64

func main() {
	runtime.GOMAXPROCS(2)
	for i := range spins {
		go func(c *atomic.Uint64) {
			for {
				c.Add(1)
			}
		}(&spins[i])
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/quit" {
			fmt.Fprintln(w, "bye")
			go func() { time.Sleep(10 * time.Millisecond); os.Exit(0) }()
			return
		}
		fmt.Fprintf(w, "hello, spinners running: %v\n", spins[0].Load() > 0 && spins[1].Load() > 0)
	})
	// Listen first, then say so: the test connects once it reads the line.
	ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", os.Args[1])
	if err := http.Serve(ln, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
