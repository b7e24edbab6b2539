"""cocotb tests of hw/rtl/block_processor.sv: block_verify, tx_scheduler, tx_validators (tx_verify, tx_vscc,
ends_scheduler, the policy table and its evaluators), tx_collector and tx_mvcc_commit together, with real P-256
signatures. The test first loads the policy table through the POLICY_SYNC write port: 1 = OutOf(2,1.peer,2.peer),
2 = 0.member, 5 = OutOf(1,1.peer,2.peer)."""

import cocotb
from cocotb.triggers import ClockCycles, Edge, RisingEdge, with_timeout

import axis_util as ax
from bmac_regs import CODE_BAD_CREATOR_SIGNATURE, CODE_ENDORSEMENT_POLICY_FAILURE, CODE_MVCC_READ_CONFLICT, CODE_VALID
from bmac_policy import out_of
from bmac_types import BLOCK_REC, END_REC, RD_REC, RES_REC, TX_REC, WR_REC
from sigs import Key

PEER, CLIENT, ORDERER = 0b0010, 0b0001, 0b0100
AND_PEERS, ORDERER_MEMBER, ANY_PEER = 1, 2, 5

ORD = Key(1001)
USER = Key(1002)
P1 = Key(1003)
P2 = Key(1004)


def end(key, org, msg, corrupt=False, has_key=1, der_ok=1, roles=PEER):
    return dict(has_key=has_key, der_ok=der_ok, org=org, roles=roles, sig=key.job(msg, corrupt))


def tx(blk, idx, ends=(), policy=AND_PEERS, corrupt=False, pre=0, post=0, reads=(), writes=(), last=False):
    rec = dict(blk=blk, tx_idx=idx, last=int(last), pre_code=pre, post_code=post, policy_id=policy, dup_tag=0,
               phantom_seq=0xFF, n_ends=len(ends), n_rd=len(reads), n_wr=len(writes), has_key=1, der_ok=1,
               sig=USER.job(f"creator {blk}/{idx}".encode(), corrupt))
    return rec, list(ends), list(reads), list(writes)


def rd(key, ver=None):
    return dict(kind=0, req=0, seq=0, ns=1, has_ver=int(ver is not None), ver_blk=(ver or (0, 0))[0],
                ver_tx=(ver or (0, 0))[1], key=key)


def wr(key):
    return dict(sync=0, del_=0, ns=1, ver_blk=0, ver_tx=0, key=key)


def both(blk, idx, c1=False, c2=False):
    m = f"prp {blk}/{idx}".encode()
    return [end(P1, 1, m + b"|p1", c1), end(P2, 2, m + b"|p2", c2)]


@cocotb.test()
async def blocks_with_every_verdict(dut):
    """Creator, endorsement, policy, early-stop, pass-through, MVCC and bad-block verdicts in two blocks."""
    dut.pol_we.value = 0
    dut.pol_flush.value = 0
    await ax.reset(dut)
    any_peer = out_of(1, [(1, "peer"), (2, "peer")])
    # Id 7 is loaded, then cleared by the flush that comes with id 9: a transaction that uses it fails its policy.
    loads = [(7, any_peer, 0), (9, out_of(1, [(1, "client")]), 1), (AND_PEERS, out_of(2, [(1, "peer"), (2, "peer")]), 0),
             (ORDERER_MEMBER, out_of(1, [(0, "member")]), 0), (ANY_PEER, any_peer, 0)]
    for pid, prog, flush in loads:
        dut.pol_we.value = 1
        dut.pol_flush.value = flush
        dut.pol_id.value = pid
        dut.pol_prog.value = int.from_bytes(prog, "big")
        await RisingEdge(dut.clk)
    dut.pol_we.value = 0
    K1, K2 = 0x1111, 0x2222
    b10 = [
        tx(10, 0, both(10, 0), writes=[wr(K1)]),                                   # VALID
        tx(10, 1, both(10, 1), corrupt=True),                                      # BAD_CREATOR_SIGNATURE
        tx(10, 2, both(10, 2), pre=3),                                             # BAD_COMMON_HEADER (host)
        tx(10, 3, both(10, 3, c2=True)),                                           # ENDORSEMENT_POLICY_FAILURE
        tx(10, 4, both(10, 4, c1=True), policy=ANY_PEER),                          # VALID (OR)
        tx(10, 5, both(10, 5), policy=ANY_PEER),                                   # VALID, early stop
        tx(10, 6, both(10, 6), post=8),                                            # BAD_PROPOSAL_TXID (host)
        tx(10, 7, [end(P1, 1, b"x", has_key=0), end(P2, 2, b"y")]),               # EPF: org1 signer unknown
        tx(10, 8, [end(P1, 1, b"x"), end(P2, 2, b"y", der_ok=0)]),                # EPF: org2 DER broken
        tx(10, 9, both(10, 9), reads=[rd(K1, (9, 9))], last=True),                 # MVCC (K1 written by tx 0)
    ]
    b11 = [
        tx(11, 0, both(11, 0), writes=[wr(K2)]),                                   # VALID, block invalid
        tx(11, 1, both(11, 1), policy=7),                                          # EPF: id 7 was flushed
        tx(11, 2, both(11, 2), reads=[rd(K2)], last=True),                        # VALID: K2 was not written
    ]
    blocks = [
        dict(blk=10, policy_id=ORDERER_MEMBER, has_key=1, der_ok=1, org=0, roles=ORDERER, sig=ORD.job(b"block 10")),
        dict(blk=11, policy_id=ORDERER_MEMBER, has_key=1, der_ok=1, org=0, roles=ORDERER,
             sig=ORD.job(b"block 11", corrupt=True)),
    ]
    txs, ends, rds, wrs = [], [], [], []
    for rec, e, r, w in b10 + b11:
        txs.append(TX_REC.pack(**rec))
        ends += [END_REC.pack(**x) for x in e]
        rds += [RD_REC.pack(**x) for x in r]
        wrs += [WR_REC.pack(**x) for x in w]
    # 3 and 8 are the host's codes (BAD_COMMON_HEADER, BAD_PROPOSAL_TXID), passed through.
    codes = [CODE_VALID, CODE_BAD_CREATOR_SIGNATURE, 3, CODE_ENDORSEMENT_POLICY_FAILURE, CODE_VALID, CODE_VALID, 8,
             CODE_ENDORSEMENT_POLICY_FAILURE, CODE_ENDORSEMENT_POLICY_FAILURE, CODE_MVCC_READ_CONFLICT]
    expect = [(10, i, c, int(i == 9), 1) for i, c in enumerate(codes)]
    expect += [(11, 0, CODE_VALID, 0, 0), (11, 1, CODE_ENDORSEMENT_POLICY_FAILURE, 0, 0), (11, 2, CODE_VALID, 1, 0)]

    async def feed(valid, ready, data, values):
        for v in values:
            await ax.send_wait(dut.clk, valid, ready, data, v)

    cocotb.start_soon(feed(dut.blk_valid, dut.blk_ready, dut.blk_rec, [BLOCK_REC.pack(**b) for b in blocks]))
    cocotb.start_soon(feed(dut.rd_valid, dut.rd_ready, dut.rd, rds))
    cocotb.start_soon(feed(dut.wr_valid, dut.wr_ready, dut.wr, wrs))
    cocotb.start_soon(feed(dut.end_valid, dut.end_ready, dut.end_in, ends))
    await ClockCycles(dut.clk, 5)
    cocotb.start_soon(feed(dut.tx_valid, dut.tx_ready, dut.tx, txs))

    skipped = [0]

    async def count_skips():
        # Wakes only when the per-cycle count changes, so it sees every early stop but not every cycle.
        while True:
            await Edge(dut.stat_ends_skipped)
            skipped[0] += int(dut.stat_ends_skipped.value)

    cocotb.start_soon(count_skips())
    got = []
    await with_timeout(ax.collect_wait(dut.clk, dut.res_valid, dut.res_ready, dut.res, len(expect), got),
                       20_000_000, "ns")
    got = [RES_REC.unpack(v) for v in got]
    got = [(g["blk"], g["tx_idx"], g["code"], g["last"], g["block_valid"]) for g in got]
    for g, e in zip(got, expect):
        assert g == e, f"(blk, tx, code, last, block_valid): got {g}, expected {e}"
    dut._log.info("endorsements skipped by early stop: %d", skipped[0])
    assert skipped[0] >= 1, "the OR policy (tx 5) must stop early"
    assert int(dut.kv_overflow.value) == 0
