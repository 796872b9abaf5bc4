"""matmul (FunctionBench): numpy product of two random n x n matrices."""

import numpy as np

from fbserve import serve

N = 512
rng = np.random.default_rng(19)


def work():
    a = rng.random((N, N))
    b = rng.random((N, N))
    c = np.matmul(a, b)
    return f"matmul n={N} trace={float(np.trace(c)):.3f}"


serve(work)
