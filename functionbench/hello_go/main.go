// hello_go: the paper's Go hello-world function, an HTTP server answering a
// constant on 127.0.0.1:PORT (argv[1], else $PORT, else 8080). Standard
// library only; built static (CGO_ENABLED=0) by scripts/functionbench-image.sh.
// `GET /quit` answers, then exits.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

func main() {
	port := os.Getenv("PORT")
	if len(os.Args) > 1 {
		port = os.Args[1]
	}
	if port == "" {
		port = "8080"
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		if r.URL.Path == "/quit" {
			fmt.Fprintln(w, "bye")
			go func() { time.Sleep(10 * time.Millisecond); os.Exit(0) }()
			return
		}
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "hello in %.3f ms\n", float64(time.Since(t0).Microseconds())/1e3)
	})
	fmt.Printf("listening on %s\n", port)
	log.Fatal(http.ListenAndServe("127.0.0.1:"+port, nil))
}
