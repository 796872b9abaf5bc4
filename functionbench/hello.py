"""hello: the smallest function, an HTTP server answering a constant."""

from fbserve import serve

serve(lambda: "hello")
