"""Real P-256 keys and Fabric-style (low-S) signatures for the block-processor testbenches."""

import hashlib

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


class Key:
    """A signer: `job(msg)` gives the sig_job_t fields (qx, qy, e, r, s) of a valid signature over msg."""

    def __init__(self, seed: int):
        self.priv = ec.derive_private_key(seed, ec.SECP256R1())
        nums = self.priv.public_key().public_numbers()
        self.qx, self.qy = nums.x, nums.y

    def job(self, msg: bytes, corrupt=False):
        r, s = decode_dss_signature(self.priv.sign(msg, ec.ECDSA(hashes.SHA256())))
        if s > N // 2:
            s = N - s
        e = int.from_bytes(hashlib.sha256(msg).digest(), "big")
        if corrupt:
            e ^= 1
        return dict(qx=self.qx, qy=self.qy, e=e, r=r, s=s)
