"""A small Python writer of BMac datagrams (hw/DESIGN.md section 2) for the protocol-processor testbench.

Payloads are described in reconstructed form: a list of raw byte strings and identity ids. `Section.frame()`
strips the identities (leaving locators) and encodes the Ethernet/IPv4/UDP frame.
"""

import hashlib
import struct

UDP_PORT = 7063
T_ID_SYNC, T_HEADER, T_TX, T_METADATA, T_STATE_SYNC, T_POLICY_SYNC = range(6)
K_LOC, K_HASH, K_SIG, K_RD_KEY, K_RD_VER, K_WR_KEY, K_PROBE, K_SYNC_KEY, K_SYNC_VER = range(1, 10)


def ipv4_checksum(h):
    s = sum(struct.unpack(">10H", h))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def frame(section_type, index, block, flags, info, annotations, payload, port=UDP_PORT):
    l7 = struct.pack(">BBHQBBH", 1, section_type, index, block, flags, len(annotations), len(payload))
    body = l7 + bytes(info).ljust(8, b"\0")
    for kind, fl, ns, seq, off, ln in annotations:
        body += struct.pack(">BBBBHH", kind, fl, ns, seq, off, ln)
    body += payload
    udp = struct.pack(">HHHH", port, port, 8 + len(body), 0)
    ip = bytearray(struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + 8 + len(body), 0, 0x4000, 64, 17, 0,
                               bytes([10, 0, 0, 2]), bytes([10, 0, 0, 1])))
    ip[10:12] = struct.pack(">H", ipv4_checksum(bytes(ip)))
    eth = bytes([2, 0x42, 0x4D, 0x41, 0x43, 1, 2, 0x42, 0x4D, 0x41, 0x43, 2, 8, 0])
    return eth + bytes(ip) + udp + body


def beats(fr):
    """AXI-Stream beats (tdata, tkeep, tlast), first byte in lane 0."""
    out = []
    for i in range(0, len(fr), 8):
        chunk = fr[i:i + 8]
        out.append((int.from_bytes(chunk, "little"), (1 << len(chunk)) - 1, int(i + 8 >= len(fr))))
    return out


def der(r, s, trailing=b""):
    def integer(v):
        b = v.to_bytes((v.bit_length() + 7) // 8 or 1, "big")
        if b[0] & 0x80:
            b = b"\0" + b
        return b"\x02" + bytes([len(b)]) + b

    body = integer(r) + integer(s)
    return b"\x30" + bytes([len(body)]) + body + trailing


def version(blk, txn):
    def varint(v):
        out = b""
        while True:
            b = v & 0x7F
            v >>= 7
            out += bytes([b | (0x80 if v else 0)])
            if not v:
                return out

    out = b""
    if blk:
        out += b"\x08" + varint(blk)
    if txn:
        out += b"\x10" + varint(txn)
    return out


class Payload:
    """A reconstructed payload with identity placeholders and named regions."""

    def __init__(self, cache):
        self.cache = cache  # id -> identity bytes
        self.parts = []     # (bytes, id or None, signer slot or None)
        self.pos = 0
        self.regions = {}

    def raw(self, b, name=None):
        if name:
            self.regions[name] = (self.pos, len(b))
        self.parts.append((b, None, None))
        self.pos += len(b)
        return self

    def ident(self, id_, signer=None, name=None):
        b = self.cache[id_]
        if name:
            self.regions[name] = (self.pos, len(b))
        self.parts.append((b, id_, signer))
        self.pos += len(b)
        return self

    def reconstructed(self):
        return b"".join(p[0] for p in self.parts)

    def stripped(self):
        """Wire payload and its locators."""
        out, locs = b"", []
        for b, id_, signer in self.parts:
            if id_ is None:
                out += b
            else:
                locs.append((K_LOC, 1 if signer is not None else 0, signer or 0, 0, len(out), id_))
        return out, locs


def sha(*parts):
    return int.from_bytes(hashlib.sha256(b"".join(parts)).digest(), "big")
