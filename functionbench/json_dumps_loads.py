"""json_dumps_loads (FunctionBench): parse and serialize a JSON document
(generated at start: the benchmark's own input is downloaded, this one is
made offline with a similar shape, ~1 MB)."""

import json
import random

from fbserve import serve

rnd = random.Random(19)
DOC = json.dumps(
    [
        {
            "id": i,
            "name": f"user{i}",
            "email": f"user{i}@example.org",
            "score": rnd.random(),
            "tags": [rnd.choice("abcdefgh") * 3 for _ in range(5)],
            "address": {"street": f"{i} Main St", "zip": f"{rnd.randrange(10**5):05d}"},
        }
        for i in range(5000)
    ]
)


def work():
    doc = json.loads(DOC)
    text = json.dumps(doc)
    return f"json_dumps_loads items={len(doc)} bytes={len(text)}"


serve(work)
