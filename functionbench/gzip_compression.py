"""gzip_compression (FunctionBench): gzip a few MiB of file-like data."""

import gzip
import random

from fbserve import serve

SIZE = 4 << 20
rnd = random.Random(19)
WORDS = [bytes(rnd.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randrange(2, 10))) for _ in range(2000)]
DATA = bytearray()
while len(DATA) < SIZE:
    DATA += rnd.choice(WORDS) + b" "
DATA = bytes(DATA[:SIZE])


def work():
    out = gzip.compress(DATA, compresslevel=6)
    return f"gzip_compression in={len(DATA)} out={len(out)}"


serve(work)
