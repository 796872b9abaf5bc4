"""The counting hello server (README.md) on Python's ThreadingHTTPServer."""
import http.server
import os
import sys
import threading

MOD = 2147483647
lock = threading.Lock()
state = {"count": 0, "hash": 0}


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        status, body = 200, None
        if self.path.startswith("/r/") and self.path[3:].isdigit() and int(self.path[3:]) < 1000000:
            k = int(self.path[3:])
            with lock:
                state["count"] += 1
                state["hash"] = (state["hash"] * 1000003 + k) % MOD
                body = "hello %d #%d\n" % (k, state["count"])
        elif self.path == "/sum":
            with lock:
                body = "count %d hash %d\n" % (state["count"], state["hash"])
        elif self.path == "/quit":
            body = "bye\n"
        else:
            status, body = 404, "not found\n"
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        if self.path == "/quit":
            os._exit(0)

    def log_message(self, *args):
        pass


port = int(sys.argv[1])
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
print("listening on", port, flush=True)
server.serve_forever()
