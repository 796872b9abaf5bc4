"""float_operation (FunctionBench): sin, cos and sqrt of N floats."""

import math

from fbserve import serve

N = 200_000


def work():
    acc = 0.0
    for i in range(N):
        x = float(i)
        acc += math.sin(x) + math.cos(x) + math.sqrt(x)
    return f"float_operation n={N} sum={acc:.3f}"


serve(work)
