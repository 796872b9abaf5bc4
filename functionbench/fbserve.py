"""The HTTP function wrapper shared by the FunctionBench workloads.

`serve(work)` listens on 127.0.0.1:PORT (argv[1], else $PORT, else 8080)
with the standard library's single-threaded `HTTPServer` (threads do not
run in every sandbox yet) and answers:

- `GET /`: runs `work()` once and returns its result (a short text line)
  with the time it took, as `<result> in <ms> ms`;
- `GET /quit`: answers, then the server exits.

A workload module loads its libraries and inputs at import time (the cold
start) and does the measured work per request.
"""

import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


def _port():
    if len(sys.argv) > 1:
        return int(sys.argv[1])
    return int(os.environ.get("PORT", "8080"))


def serve(work):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            quit_after = self.path == "/quit"
            if quit_after:
                body = "bye"
                status = 200
            elif self.path == "/" or self.path.startswith("/?"):
                t0 = time.perf_counter()
                try:
                    result = work()
                    status = 200
                except Exception as e:  # the reason goes back to the client
                    result = f"error: {type(e).__name__}: {e}"
                    status = 500
                body = f"{result} in {(time.perf_counter() - t0) * 1e3:.3f} ms"
            else:
                body, status = "not found", 404
            data = (body + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            if quit_after:
                self.server.quit = True

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", _port()), Handler)
    server.quit = False
    print(f"listening on {server.server_address[1]}", flush=True)
    while not server.quit:
        server.handle_request()
    server.server_close()
