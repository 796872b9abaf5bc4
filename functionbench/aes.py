"""pyaes (FunctionBench): AES-CTR encryption and decryption of a message
in pure Python, repeated."""

import pyaes

from fbserve import serve

LENGTH = 1000
ITERATIONS = 20
KEY = b"\xa1\xf6%\x8c\x87}_\xcd\x89dHE8\xbf\xc9,"
MESSAGE = ("FunctionBench " * (LENGTH // 14 + 1))[:LENGTH].encode()


def work():
    for _ in range(ITERATIONS):
        ct = pyaes.AESModeOfOperationCTR(KEY).encrypt(MESSAGE)
        pt = pyaes.AESModeOfOperationCTR(KEY).decrypt(ct)
    if pt != MESSAGE:
        raise ValueError("round trip differs")
    return f"pyaes length={LENGTH} iterations={ITERATIONS}"


serve(work)
