"""ECDSA vectors taken from the real Fabric 2.5 fixture ledger.

Walks orderer-blocks.bin (records of [u64 LE length][common.Block]) with a
minimal protobuf reader and yields, for endorser transactions, each
endorsement as (public key, SHA-256 digest, r, s): the endorser signs
proposal_response_payload || endorser (a marshaled SerializedIdentity whose
id_bytes is a PEM certificate). Creator signatures over Envelope.payload are
available too. Python's `cryptography` decides the expected verdict, so a
signature the ledger holds in altered form shows up as an invalid vector.
"""

import hashlib
import os
import struct
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

HDR_ENDORSER_TRANSACTION = 3


def fixture_dir() -> Path:
    """fabric-2.5 fixture directory: $FERROFABRIC_FIXTURES or the repo's sibling shared/."""
    env = os.environ.get("FERROFABRIC_FIXTURES")
    root = Path(env) if env else Path(__file__).resolve().parents[3] / "shared" / "fixtures"
    for cand in (root / "fabric-2.5", root):
        if (cand / "orderer-blocks.bin").is_file():
            return cand
    raise FileNotFoundError(f"Fabric 2.5 fixtures not found under {root} (set FERROFABRIC_FIXTURES)")


def _varint(buf, i):
    val = shift = 0
    while True:
        b = buf[i]
        i += 1
        val |= (b & 0x7F) << shift
        if b < 0x80:
            return val, i
        shift += 7


def fields(buf):
    """Yield (field number, wire type, value) of one protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            val, i = _varint(buf, i)
        elif wt == 2:
            ln, i = _varint(buf, i)
            val = bytes(buf[i : i + ln])
            i += ln
        elif wt == 1:
            val = bytes(buf[i : i + 8])
            i += 8
        elif wt == 5:
            val = bytes(buf[i : i + 4])
            i += 4
        else:
            raise ValueError(f"unsupported wire type {wt}")
        yield num, wt, val


def field(buf, num, default=b""):
    for n, _, v in fields(buf):
        if n == num:
            return v
    return default


def repeated(buf, num):
    return [v for n, _, v in fields(buf) if n == num]


def blocks(path):
    data = Path(path).read_bytes()
    i = 0
    while i < len(data):
        (ln,) = struct.unpack_from("<Q", data, i)
        i += 8
        yield data[i : i + ln]
        i += ln


def _pubkey_from_identity(serialized_identity):
    pem = field(serialized_identity, 2)  # SerializedIdentity.id_bytes
    cert = x509.load_pem_x509_certificate(pem)
    return cert.public_key()


def _vector(pub, signed_bytes, der_sig, origin):
    nums = pub.public_numbers()
    r, s = decode_dss_signature(der_sig)
    try:
        pub.verify(der_sig, signed_bytes, ec.ECDSA(hashes.SHA256()))
        ok = True
    except InvalidSignature:
        ok = False
    e = int.from_bytes(hashlib.sha256(signed_bytes).digest(), "big")
    return {"qx": nums.x, "qy": nums.y, "e": e, "r": r, "s": s, "ok": ok, "origin": origin}


def endorsement_vectors(path=None):
    """All endorsement signatures of ENDORSER_TRANSACTION envelopes, in ledger order."""
    path = path or fixture_dir() / "orderer-blocks.bin"
    out = []
    for bno, blk in enumerate(blocks(path)):
        for tno, env in enumerate(repeated(field(blk, 2), 1)):  # Block.data.data
            payload = field(env, 1)
            header = field(payload, 1)
            chdr = field(header, 1)
            if field(chdr, 1, 0) != HDR_ENDORSER_TRANSACTION:
                continue
            try:
                tx = field(payload, 2)
                for action in repeated(tx, 1):  # Transaction.actions
                    cap = field(action, 2)  # ChaincodeActionPayload
                    cea = field(cap, 2)  # ChaincodeEndorsedAction
                    prp = field(cea, 1)
                    for endo in repeated(cea, 2):
                        endorser = field(endo, 1)
                        sig = field(endo, 2)
                        pub = _pubkey_from_identity(endorser)
                        out.append(_vector(pub, prp + endorser, sig, f"block {bno} tx {tno} endorsement"))
            except (ValueError, IndexError):
                continue  # deliberately malformed transaction in the fixture
    return out


def creator_vectors(path=None):
    """Creator signatures (Envelope.signature over Envelope.payload)."""
    path = path or fixture_dir() / "orderer-blocks.bin"
    out = []
    for bno, blk in enumerate(blocks(path)):
        for tno, env in enumerate(repeated(field(blk, 2), 1)):
            payload = field(env, 1)
            sig = field(env, 2)
            shdr = field(field(payload, 1), 2)  # Header.signature_header
            creator = field(shdr, 1)
            try:
                pub = _pubkey_from_identity(creator)
            except ValueError:
                continue
            out.append(_vector(pub, payload, sig, f"block {bno} tx {tno} creator"))
    return out


if __name__ == "__main__":
    ev = endorsement_vectors()
    cv = creator_vectors()
    print(len(ev), "endorsements,", sum(not v["ok"] for v in ev), "invalid")
    print(len(cv), "creator signatures,", sum(not v["ok"] for v in cv), "invalid")
    for v in ev:
        if not v["ok"]:
            print("invalid:", v["origin"])
