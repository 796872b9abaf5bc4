"""linpack (FunctionBench): solve a random dense n x n system with numpy
(LU), report MFLOPS as LINPACK counts them."""

import time

import numpy as np

from fbserve import serve

N = 500
rng = np.random.default_rng(19)


def work():
    a = rng.random((N, N)) - 0.5
    b = a.sum(axis=1)
    t0 = time.perf_counter()
    x = np.linalg.solve(a, b)
    t = time.perf_counter() - t0
    flops = 2.0 * N**3 / 3.0 + 2.0 * N**2
    err = float(np.abs(x - 1.0).max())
    return f"linpack n={N} mflops={flops / t / 1e6:.1f} err={err:.2e}"


serve(work)
