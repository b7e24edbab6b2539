"""cocotb tests of hw/rtl/tx_mvcc_commit.sv (with kv_store) against a Python model of hw/DESIGN.md section 3."""

import random

import cocotb
from cocotb.triggers import ClockCycles, with_timeout

import axis_util as ax
from bmac_regs import (
    CODE_DUPLICATE_TXID, CODE_ENDORSEMENT_POLICY_FAILURE, CODE_MVCC_READ_CONFLICT, CODE_PHANTOM_READ_CONFLICT,
    CODE_VALID,
)
from bmac_types import PROBE_DELETED, PROBE_NOT_PUT, PROBE_UNTOUCHED, RD_REC, RES_REC, TX_META, WR_REC


class Model:
    """The MVCC rules of the RTL (same as crates/bmac-sim/src/model.rs)."""

    def __init__(self):
        self.kv = {}

    def sync(self, ns, key, blk, txn, delete):
        self.kv[(ns, key)] = (blk, txn, delete)

    def tx(self, blk, idx, code, block_ok, reads, writes, dup_tag, phantom_seq, seen):
        if code == CODE_VALID and dup_tag:
            if dup_tag in seen:
                code = CODE_DUPLICATE_TXID
            else:
                seen.add(dup_tag)
        if code == CODE_VALID:
            fail = None
            if phantom_seq != 0xFF:
                fail = (phantom_seq, CODE_PHANTOM_READ_CONFLICT)
            for r in reads:
                e = self.kv.get((r["ns"], r["key"]))
                in_block = e is not None and e[0] == blk
                if r["kind"] == 0:
                    if in_block:
                        bad = True
                    elif e is not None and not e[2]:
                        bad = not (r["has_ver"] and (r["ver_blk"], r["ver_tx"]) == (e[0], e[1]))
                    else:
                        bad = bool(r["has_ver"])
                    c = CODE_MVCC_READ_CONFLICT
                else:
                    deleted = in_block and e[2]
                    put = in_block and not e[2]
                    bad = {
                        PROBE_UNTOUCHED: in_block,
                        PROBE_DELETED: not deleted,
                        PROBE_NOT_PUT: put,
                    }[r["req"]]
                    c = CODE_PHANTOM_READ_CONFLICT
                if bad and (fail is None or r["seq"] < fail[0]):
                    fail = (r["seq"], c)
            if fail:
                code = fail[1]
        if code == CODE_VALID and block_ok:
            for w in writes:
                self.kv[(w["ns"], w["key"])] = (blk, idx, w["del_"])
        return code


def collide(i):
    """Keys sharing their low 6 bits, so that they collide in a 64-entry table."""
    return (i << 64) | 0x2A


async def run_blocks(dut, blocks, syncs_before, seed, stall=0.0):
    """Feeds blocks: each is (blk, ok, [tx dict]); `syncs_before[b]` are sync entries sent before block b."""
    model = Model()
    metas, codes, rds, wrs, verdicts, expect = [], [], [], [], [], []
    gseq = 0
    for b, (blk, ok, txs) in enumerate(blocks):
        for s in syncs_before.get(b, []):
            wrs.append(WR_REC.pack(sync=1, del_=s["del_"], ns=s["ns"], ver_blk=s["blk"], ver_tx=s["txn"], key=s["key"]))
            model.sync(s["ns"], s["key"], s["blk"], s["txn"], s["del_"])
        seen = set()
        verdicts.append(1 if ok else 0)
        for i, t in enumerate(txs):
            last = i == len(txs) - 1
            metas.append(TX_META.pack(gseq=gseq, blk=blk, tx_idx=i, last=int(last), dup_tag=t.get("dup", 0),
                                      phantom_seq=t.get("phantom", 0xFF), n_rd=len(t["reads"]), n_wr=len(t["writes"])))
            codes.append(t.get("code", CODE_VALID))
            gseq += 1
            for r in t["reads"]:
                rds.append(RD_REC.pack(**r))
            for w in t["writes"]:
                wrs.append(WR_REC.pack(sync=0, del_=w["del_"], ns=w["ns"], key=w["key"]))
            code = model.tx(blk, i, t.get("code", CODE_VALID), ok, t["reads"], t["writes"], t.get("dup", 0),
                            t.get("phantom", 0xFF), seen)
            expect.append((blk, i, code, int(last), int(ok)))

    # The protocol processor writes rd/wr records well before the transaction results arrive.
    async def txs():
        for m, c in zip(metas, codes):
            dut.in_code.value = c
            await ax.send(dut.clk, dut.in_valid, dut.in_ready, dut.in_meta, m)

    cocotb.start_soon(ax.send_all(dut.clk, dut.rd_valid, dut.rd_ready, dut.rd, rds, seed, 0.2))
    cocotb.start_soon(ax.send_all(dut.clk, dut.wr_valid, dut.wr_ready, dut.wr, wrs, seed + 1, 0.2))
    cocotb.start_soon(ax.send_all(dut.clk, dut.bv_valid, dut.bv_ready, dut.bv_ok, verdicts))
    await ClockCycles(dut.clk, 20)
    cocotb.start_soon(txs())
    got = []
    await with_timeout(ax.collect(dut.clk, dut.res_valid, dut.res_ready, dut.res, len(expect), got, seed, stall),
                       200_000, "ns")
    got = [RES_REC.unpack(v) for v in got]
    got = [(g["blk"], g["tx_idx"], g["code"], g["last"], g["block_valid"]) for g in got]
    for g, e in zip(got, expect):
        assert g == e, f"(blk, tx, code, last, block_valid): got {g}, expected {e}"
    assert int(dut.overflow.value) == 0
    return got


def rd(ns, key, seq, ver=None, kind=0, req=0):
    return dict(kind=kind, req=req, seq=seq, ns=ns, has_ver=int(ver is not None), ver_blk=(ver or (0, 0))[0],
                ver_tx=(ver or (0, 0))[1], key=key)


def wr(ns, key, delete=0):
    return dict(ns=ns, key=key, del_=delete)


@cocotb.test()
async def scripted_conflicts_probes_duplicates(dut):
    """Each MVCC rule once: stale and in-block reads, probes, static phantoms, seq order, duplicates, bad block."""
    await ax.reset(dut)
    A, B, C, D, X = collide(1), collide(2), collide(3), collide(4), collide(5)
    syncs = {0: [dict(ns=1, key=A, blk=3, txn=1, del_=0), dict(ns=1, key=B, blk=3, txn=2, del_=0),
                 dict(ns=1, key=C, blk=3, txn=4, del_=1)],
             1: [dict(ns=1, key=D, blk=5, txn=7, del_=0)]}
    block5 = [
        dict(reads=[rd(1, A, 0, (3, 1)), rd(1, B, 1, (3, 2))], writes=[wr(1, A)]),           # VALID
        dict(reads=[rd(1, A, 0, (3, 1))], writes=[wr(1, B)]),                                # MVCC (A in block)
        dict(reads=[rd(1, B, 0, (3, 2))], writes=[wr(1, C)]),                                # VALID
        dict(reads=[rd(1, C, 2), rd(1, D, 0, kind=1, req=PROBE_NOT_PUT),
                    rd(1, A, 1, kind=1, req=PROBE_UNTOUCHED), rd(1, X, 3, (1, 1))], writes=[]),  # PHANTOM (A, seq 1)
        dict(code=CODE_ENDORSEMENT_POLICY_FAILURE, reads=[rd(1, A, 0, (9, 9))], writes=[wr(1, X)]),  # EPF passes
        dict(dup=1, reads=[], writes=[wr(2, A)]),                                            # VALID
        dict(dup=1, reads=[], writes=[wr(2, B)]),                                            # DUPLICATE
        dict(phantom=4, reads=[rd(1, X, 5, (1, 1))], writes=[]),                             # PHANTOM (seq 4 < 5)
        dict(reads=[rd(1, C, 0, kind=1, req=PROBE_DELETED)], writes=[wr(1, C, 1)]),          # PHANTOM (C was put)
        dict(reads=[rd(2, A, 0)], writes=[]),                                                # MVCC (ns 2 A in block)
    ]
    block6 = [
        dict(reads=[rd(1, A, 0, (5, 0)), rd(1, D, 1, (5, 7))], writes=[wr(1, D, 1)]),        # VALID, not applied
        dict(reads=[rd(1, D, 0, (5, 7))], writes=[]),                                        # VALID (D untouched)
    ]
    block7 = [
        dict(reads=[rd(1, D, 0, (5, 7))], writes=[wr(1, D, 1)]),                             # VALID, D deleted
        dict(reads=[rd(1, D, 0, kind=1, req=PROBE_DELETED), rd(1, B, 1, kind=1, req=PROBE_NOT_PUT)], writes=[]),
    ]
    got = await run_blocks(dut, [(5, True, block5), (6, False, block6), (7, True, block7)], syncs, 11)
    codes = [g[2] for g in got]
    assert codes[:10] == [
        CODE_VALID, CODE_MVCC_READ_CONFLICT, CODE_VALID, CODE_PHANTOM_READ_CONFLICT, CODE_ENDORSEMENT_POLICY_FAILURE,
        CODE_VALID, CODE_DUPLICATE_TXID, CODE_PHANTOM_READ_CONFLICT, CODE_PHANTOM_READ_CONFLICT, CODE_MVCC_READ_CONFLICT,
    ], codes
    assert codes[10:] == [CODE_VALID, CODE_VALID, CODE_VALID, CODE_VALID], codes


@cocotb.test()
async def random_blocks_against_the_model(dut):
    """Random reads, probes, writes, deletes, duplicates and verdicts over colliding keys, with back-pressure."""
    await ax.reset(dut)
    rng = random.Random(99)
    keys = [collide(i) for i in range(12)]
    versions = {}
    blocks = []
    syncs = {0: [dict(ns=1, key=k, blk=1, txn=i, del_=0) for i, k in enumerate(keys[:8])]}
    for k in keys[:8]:
        versions[(1, k)] = (1, keys.index(k))
    for b in range(4):
        blk = 2 + b
        txs = []
        for _ in range(25):
            reads, seq = [], 0
            for _ in range(rng.randrange(0, 4)):
                k = rng.choice(keys)
                if rng.random() < 0.25:
                    reads.append(rd(1, k, seq, kind=1, req=rng.choice([1, 2, 3])))
                else:
                    v = versions.get((1, k)) if rng.random() < 0.8 else (rng.randrange(3), 0)
                    reads.append(rd(1, k, seq, v))
                seq += 1
            rng.shuffle(reads)
            writes = [wr(1, k, int(rng.random() < 0.2)) for k in rng.sample(keys, rng.randrange(0, 3))]
            t = dict(reads=reads, writes=writes)
            if rng.random() < 0.1:
                t["code"] = rng.choice([4, 8, 10])
            if rng.random() < 0.1:
                t["dup"] = rng.randrange(1, 3)
            if rng.random() < 0.05:
                t["phantom"] = rng.randrange(0, 4)
            txs.append(t)
        blocks.append((blk, rng.random() < 0.85, txs))
    await run_blocks(dut, blocks, syncs, 5, stall=0.3)
