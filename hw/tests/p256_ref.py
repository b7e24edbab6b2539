"""Tiny pure-Python NIST P-256 / ECDSA reference used to create and check test vectors.

Not constant time and not meant for anything but tests. Points are affine
(x, y) tuples; the point at infinity is None.
"""

import hashlib
import random

P = 2**256 - 2**224 + 2**192 + 2**96 - 1
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
B = 0x5AC635D8AA3A93E7B3EBBD55769886BC651D06B0CC53B0F63BCE3C3E27D2604B
G = (
    0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
    0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5,
)
HALF_N = N >> 1


def on_curve(pt):
    x, y = pt
    return 0 <= x < P and 0 <= y < P and (y * y - (x * x * x - 3 * x + B)) % P == 0


def point_add(p1, p2):
    if p1 is None:
        return p2
    if p2 is None:
        return p1
    x1, y1 = p1
    x2, y2 = p2
    if x1 == x2:
        if (y1 + y2) % P == 0:
            return None
        lam = (3 * x1 * x1 - 3) * pow(2 * y1, -1, P) % P
    else:
        lam = (y2 - y1) * pow(x2 - x1, -1, P) % P
    x3 = (lam * lam - x1 - x2) % P
    return (x3, (lam * (x1 - x3) - y1) % P)


def point_mul(k, pt):
    acc = None
    for bit in bin(k % N)[2:] if k % N else "":
        acc = point_add(acc, acc)
        if bit == "1":
            acc = point_add(acc, pt)
    return acc


def neg(pt):
    return None if pt is None else (pt[0], (-pt[1]) % P)


def keypair(rng):
    d = rng.randrange(1, N)
    return d, point_mul(d, G)


def sign(d, e, rng, low_s=True):
    """ECDSA signature (r, s) of hash integer e with private key d."""
    while True:
        k = rng.randrange(1, N)
        r = point_mul(k, G)[0] % N
        if r == 0:
            continue
        s = pow(k, -1, N) * (e + r * d) % N
        if s == 0:
            continue
        if low_s and s > HALF_N:
            s = N - s
        return r, s


def verify(q, e, r, s, require_low_s=True):
    """Reference verdict with the same rules as hw/rtl/ecdsa_engine.sv."""
    if not (0 < r < N and 0 < s < N):
        return False
    if require_low_s and s > HALF_N:
        return False
    if not on_curve(q):
        return False
    w = pow(s, -1, N)
    rp = point_add(point_mul(e * w % N, G), point_mul(r * w % N, q))
    if rp is None:
        return False
    return rp[0] % N == r


def sha256_int(msg: bytes) -> int:
    return int.from_bytes(hashlib.sha256(msg).digest(), "big")


def make_rng(seed):
    return random.Random(seed)
