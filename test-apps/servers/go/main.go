// The counting hello server (../README.md) on Go's net/http, built with
// CGO_ENABLED=0.
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"
)

const mod = 2147483647

var (
	mu    sync.Mutex
	count uint64
	hash  uint64
	hit   = regexp.MustCompile(`^/r/([0-9]{1,6})$`)
)

func answer(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func main() {
	port := os.Args[1]
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if m := hit.FindStringSubmatch(r.URL.Path); m != nil {
			k, _ := strconv.ParseUint(m[1], 10, 64)
			mu.Lock()
			count++
			hash = (hash*1000003 + k) % mod
			body := fmt.Sprintf("hello %d #%d\n", k, count)
			mu.Unlock()
			answer(w, 200, body)
			return
		}
		switch r.URL.Path {
		case "/sum":
			mu.Lock()
			body := fmt.Sprintf("count %d hash %d\n", count, hash)
			mu.Unlock()
			answer(w, 200, body)
		case "/quit":
			answer(w, 200, "bye\n")
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			go func() { time.Sleep(10 * time.Millisecond); os.Exit(0) }()
		default:
			answer(w, 404, "not found\n")
		}
	})
	ln := "127.0.0.1:" + port
	srv := &http.Server{Addr: ln}
	l, err := net.Listen("tcp", ln)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", port)
	fmt.Fprintln(os.Stderr, srv.Serve(l))
	os.Exit(1)
}
