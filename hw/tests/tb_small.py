"""cocotb tests of the small RTL blocks: ends_policy_evaluator (programs of the policy table), der_parser and
version_parser."""

import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge, Timer

import bmac_wire as bw
from bmac_policy import POL_GATES, POL_IDS, POL_LEAVES, evaluate, out_of, program, table


def random_program(rng):
    """A random program, out-of-range orgs and role bits, gate masks pointing upwards and large thresholds
    included: the evaluator must follow the program semantics for any bytes."""
    leaves = [(rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 7, 9, 200]), rng.choice([0, 1, 2, 3, 4, 4, 5, 7]))
              for _ in range(rng.randint(0, POL_LEAVES))]
    gates = [(rng.choice([0, 1, 1, 2, 2, 3, 4, 9]), rng.getrandbits(8) & ((1 << len(leaves)) - 1), rng.getrandbits(8))
             for _ in range(rng.randint(1, POL_GATES))]
    return program(leaves, gates)


@cocotb.test()
async def policy_evaluator_runs_loaded_programs(dut):
    """A table of random programs (and empty entries): every id, on random and structured per-org bits, against the
    program semantics (bmac_policy.evaluate, the same as ferrofabric-bmac's PolicyProgram::evaluate)."""
    rng = random.Random(3)
    programs = {pid: random_program(rng) for pid in range(1, POL_IDS) if pid % 7 != 3}
    programs[1] = out_of(2, [(1, "peer"), (2, "peer")])
    programs[2] = out_of(1, [(0, "member")])
    dut.policies.value = table(programs)
    vectors = [0, (1 << 40) - 1] + [1 << b for b in range(40)] + [rng.getrandbits(40) for _ in range(60)]
    seen = set()
    for pid in list(range(POL_IDS)) + [200]:
        for sat in vectors:
            dut.policy_id.value = pid
            dut.sat.value = sat
            await Timer(1, "ns")
            want = evaluate(programs[pid], sat) if pid in programs else False
            assert int(dut.satisfied.value) == int(want), f"policy {pid} sat {sat:#x}"
            seen.add(want)
    assert seen == {False, True}


def der_reference(sig):
    """The hardware subset of Go's encoding/asn1 (crates/bmac-sim/src/model.rs der_signature): (r, s) or None."""
    if len(sig) < 2 or sig[0] != 0x30:
        return None
    if sig[1] < 0x80:
        ln, hdr = sig[1], 2
    elif sig[1] == 0x81:
        if len(sig) < 3 or sig[2] < 0x80:
            return None
        ln, hdr = sig[2], 3
    elif sig[1] == 0x82:
        if len(sig) < 4 or sig[2] == 0:
            return None
        ln, hdr = (sig[2] << 8) | sig[3], 4
    else:
        return None
    if ln > len(sig) - hdr:
        return None
    body = sig[hdr:hdr + ln]

    def integer(b):
        if len(b) < 2 or b[0] != 0x02:
            return None
        n = b[1]
        if n == 0 or n > 33 or n + 2 > len(b):
            return None
        c = b[2:2 + n]
        if len(c) > 1 and ((c[0] == 0 and c[1] < 0x80) or (c[0] == 0xFF and c[1] >= 0x80)):
            return None
        if c[0] & 0x80 or (n == 33 and c[0] != 0):
            return None
        return int.from_bytes(c, "big"), 2 + n

    r = integer(body)
    if r is None:
        return None
    s = integer(body[r[1]:])
    if s is None:
        return None
    return r[0], s[0]


def der_vectors(rng):
    out = []
    for _ in range(30):
        r, s = rng.getrandbits(rng.choice([8, 200, 255, 256])), rng.getrandbits(256)
        out.append(bw.der(r or 1, s or 1))
    good = bw.der(0x80 << 248, 0x1234)
    body = good[2:]
    out += [
        good + b"\xde\xad",                                                  # trailing bytes: ignored
        b"\x30" + bytes([len(body) + 2]) + body + b"\x05\x00",               # extra element inside
        b"\x30\x81" + bytes([len(body) + 130]) + body + b"\x04\x7e" + bytes(126),  # long form, >= 128
        b"\x30\x81" + bytes([len(body)]) + body,                             # long form below 128
        b"\x30\x82\x00" + bytes([len(body)]) + body,                         # leading zero length octet
        b"\x30\x80" + body,                                                  # indefinite
        b"\x31" + good[1:],                                                  # SET, not SEQUENCE
        good[:-1],                                                           # truncated
        b"\x30\x06\x02\x01\x00\x02\x01\x02",                                 # r = 0 (passes the parser)
        b"\x30\x06\x02\x01\x81\x02\x01\x02",                                 # negative
        b"\x30\x07\x02\x02\x00\x01\x02\x01\x02",                             # non-minimal
        b"\x30\x07\x02\x02\xff\x81\x02\x01\x02",                             # non-minimal negative
        b"\x30\x05\x02\x00\x02\x01\x02",                                     # empty integer
        b"\x30\x03\x02\x01\x01",                                             # s missing
        b"\x30\x06\x02\x01\x01\x03\x01\x02",                                 # wrong tag for s
        b"\x30\x26\x02\x21\x00" + bytes([0x80]) + bytes(31) + b"\x02\x01\x01",  # 33 bytes, leading zero
        b"\x30\x26\x02\x21\x01" + bytes(32) + b"\x02\x01\x01",                # 33 bytes of magnitude
        b"\x30\x06\x02\x01\x01\x02\x05\x01",                                 # s runs past the sequence
        b"\x30",
    ]
    return out


async def feed(dut, data):
    for i, b in enumerate(data):
        dut.in_valid.value = 1
        dut.first.value = int(i == 0)
        dut.last.value = int(i == len(data) - 1)
        dut.in_byte.value = b
        if hasattr(dut, "region_len"):
            dut.region_len.value = len(data)
        await RisingEdge(dut.clk)
    dut.in_valid.value = 0
    await ReadOnly()
    assert int(dut.done.value) == 1
    await RisingEdge(dut.clk)


async def start(dut):
    cocotb.start_soon(Clock(dut.clk, 10, units="ns").start())
    dut.in_valid.value = 0
    dut.rst_n.value = 0
    await RisingEdge(dut.clk)
    await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    await RisingEdge(dut.clk)


@cocotb.test()
async def der_parser_follows_go_rules(dut):
    """Valid, lenient (trailing data, extra elements, long form) and malformed DER signatures."""
    if not hasattr(dut, "region_len"):
        return
    await start(dut)
    rng = random.Random(7)
    for sig in der_vectors(rng):
        await feed(dut, sig)
        want = der_reference(sig)
        got_ok = int(dut.ok.value)
        assert got_ok == int(want is not None), f"{sig.hex()}: ok={got_ok}, reference {want}"
        if want:
            assert (int(dut.r.value), int(dut.s.value)) == want, sig.hex()


@cocotb.test()
async def version_parser_decodes_varints(dut):
    """kvrwset.Version encodings: both fields, one field, large values, and a bad field."""
    if hasattr(dut, "region_len"):
        return
    await start(dut)
    for blk, txn in [(1, 0), (0, 7), (5, 3), (300, 70000), (2**63 + 5, 2**40)]:
        await feed(dut, bw.version(blk, txn))
        assert int(dut.ok.value) == 1
        assert (int(dut.blk.value), int(dut.txn.value)) == (blk, txn)
    await feed(dut, b"\x18\x01")
    assert int(dut.ok.value) == 0
    await feed(dut, b"\x08\x81")
    assert int(dut.ok.value) == 0
