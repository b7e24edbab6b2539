"""cocotb tests of hw/rtl/protocol_processor.sv (with axis_to_bytes, der_parser, version_parser, sha256_engine),
also run on pp_lanes (two protocol processors, records merged back into stream order).

Hand-built sections exercise each mechanism: the identity cache (ID_SYNC with flush, locators, signers),
HashCalculator regions (nested, multi-region slots, the virtual header bytes of METADATA), DER decoding (Go's
lenient rules and a malformed signature), keys, versions, probes, state sync, and a non-BMac frame. Expected
values come from hashlib. The fixture-level check is the Rust co-simulation (crates/bmac-sim/tests/integration/cosim.rs).
"""

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout

import axis_util as ax
import bmac_wire as bw
from bmac_policy import out_of
from bmac_types import BLOCK_REC, END_REC, RD_REC, TX_REC, WR_REC

ID_A, ID_B, ID_O = 0x0121, 0x0210, 0x0040
CACHE = {
    ID_A: b"identity-A:" + bytes(range(256)) + b"-end",
    ID_B: b"identity-B:" * 30,
    ID_O: b"orderer-identity" * 12,
}
KEYS = {ID_A: (11, 12), ID_B: (21, 22), ID_O: (31, 32)}
SLOTS = {ID_A: 0, ID_B: 1, ID_O: 2}


async def send_frames(dut, frames):
    dut.s_axis_tvalid.value = 0
    for fr in frames:
        for data, keep, last in bw.beats(fr):
            dut.s_axis_tdata.value = data
            dut.s_axis_tkeep.value = keep
            dut.s_axis_tlast.value = last
            dut.s_axis_tvalid.value = 1
            while True:
                await ReadOnly()
                fire = int(dut.s_axis_tready.value) == 1
                await RisingEdge(dut.clk)
                if fire:
                    break
        dut.s_axis_tvalid.value = 0


async def monitor(dut, name, out):
    valid, ready, data = getattr(dut, f"{name}_valid"), getattr(dut, f"{name}_ready"), getattr(dut, name_map[name])
    ready.value = 1
    while True:
        await ReadOnly()
        if int(valid.value):
            out.append(int(data.value))
        await RisingEdge(dut.clk)


name_map = {"blk": "blk_rec", "tx": "tx", "end": "end_out", "rd": "rd", "wr": "wr"}


def id_sync(id_, flush=False):
    qx, qy = KEYS[id_]
    b = CACHE[id_]
    info = [SLOTS[id_], int(flush), len(b) >> 8, len(b) & 0xFF]
    return bw.frame(bw.T_ID_SYNC, id_, 0, 0, info, [], qx.to_bytes(32, "big") + qy.to_bytes(32, "big") + b)


@cocotb.test()
async def sections_to_records(dut):
    """ID_SYNC, HEADER, METADATA, two TX sections and a STATE_SYNC become the expected FIFO records."""
    if hasattr(dut, "sec_ready"):
        dut.sec_ready.value = 1  # a lone protocol processor: end-of-section tokens are not needed
    await ax.reset(dut)
    frames, exp = [], {"blk": [], "tx": [], "end": [], "rd": [], "wr": []}
    frames += [id_sync(ID_A, flush=True), id_sync(ID_B), id_sync(ID_O)]
    # A policy program for table entry 3, with the flush flag: it leaves through the pol_* write port.
    prog = out_of(2, [(1, "peer"), (2, "peer")])
    frames.append(bw.frame(bw.T_POLICY_SYNC, 3, 0, 0, [1], [], prog))
    frames.append(bw.frame(bw.T_TX, 0, 7, 0, [], [], b"x" * 10, port=9999))  # not ours: dropped

    hdr = bytes(range(70))
    frames.append(bw.frame(bw.T_HEADER, 2, 7, 0, [], [], hdr))

    # METADATA: value, signature header with the orderer's identity, the DER signature; header bytes follow.
    r_o, s_o = 0x1234 << 200, 0x5678 << 100
    p = bw.Payload(CACHE).raw(b"\x0a\x05").raw(b"VALUE", "value").raw(b"\x12\x77")
    sh_start = p.pos
    p.raw(b"SH:").ident(ID_O, signer=0).raw(b":nonce")
    sh = (sh_start, p.pos - sh_start)
    p.raw(b"\x12").raw(bw.der(r_o, s_o), "sig")
    wire, locs = p.stripped()
    rec = p.reconstructed()
    anns = locs + [
        (bw.K_HASH, 0, 0, 0, *p.regions["value"]), (bw.K_HASH, 0, 0, 0, *sh), (bw.K_HASH, 0, 0, 0, len(rec), len(hdr)),
        (bw.K_SIG, 0, 0, 0, *p.regions["sig"]),
    ]
    frames.append(bw.frame(bw.T_METADATA, 0, 7, 0, [2], anns, wire))
    e_blk = bw.sha(b"VALUE", rec[sh[0]:sh[0] + sh[1]], hdr)
    exp["blk"].append(dict(blk=7, policy_id=2, has_key=1, der_ok=1, org=0, roles=0b0100,
                           sig=dict(qx=31, qy=32, e=e_blk, r=r_o, s=s_o)))

    # TX 0: creator B (slot 0), endorser A (slot 1), an endorser not in the cache (slot 2), reads, a write, a probe.
    r0, s0, r1, s1 = 0xA0, 0xB0 << 240, 0xC1 << 64, 0xD1
    key1, key2, key3, probe = b"acct-0001", b"acct-0002", b"acct-0003", b"r-probe-key"
    ver1 = bw.version(5, 3)
    p = bw.Payload(CACHE).raw(b"ENV{")
    pay0 = p.pos
    p.raw(b"hdr:").ident(ID_B, signer=0).raw(b"nonce-123").raw(b"act:").ident(ID_B)
    prp0 = p.pos
    p.raw(b"PRP<").raw(key1, "key1").raw(ver1, "ver1").raw(b"|").raw(key3, "key3").raw(b"|").raw(key2, "key2").raw(b">")
    prp = (prp0, p.pos - prp0)
    # Go ignores an extra element inside the SEQUENCE.
    body1 = bw.der(r1, s1)[2:] + b"\x05\x00"
    p.raw(b"E1:").ident(ID_A, signer=1, name="id1").raw(b"\x30" + bytes([len(body1)]) + body1, "sig1")
    p.raw(b"E2:").raw(b"not-a-cached-identity", "id2").raw(b"\x30\x07\x02\x02\x00\x01\x02\x01\x01", "sig2")
    pay = (pay0, p.pos - pay0)
    p.raw(b"}S:").raw(bw.der(r0, s0), "sig0")
    env_len = p.pos
    p.raw(probe, "probe")
    wire, locs = p.stripped()
    rec = p.reconstructed()
    R = p.regions
    anns = locs + [
        (bw.K_HASH, 0, 0, 0, *pay), (bw.K_HASH, 0, 1, 0, *prp), (bw.K_HASH, 0, 1, 0, *R["id1"]),
        (bw.K_HASH, 0, 2, 0, *prp), (bw.K_HASH, 0, 2, 0, *R["id2"]),
        (bw.K_RD_KEY, 3, 1, 0, *R["key1"]), (bw.K_RD_VER, 0, 1, 0, *R["ver1"]),
        (bw.K_RD_KEY, 1, 1, 1, *R["key3"]), (bw.K_WR_KEY, 0, 1, 0, *R["key2"]),
        (bw.K_SIG, 0, 1, 0, *R["sig1"]), (bw.K_SIG, 0, 2, 0, *R["sig2"]), (bw.K_SIG, 0, 0, 0, *R["sig0"]),
        (bw.K_PROBE, 2, 1, 2, *R["probe"]),
    ]
    anns.sort(key=lambda a: ({bw.K_LOC: 0, bw.K_HASH: 2 + a[2]}.get(a[0], 1), a[4]))
    assert env_len < len(rec)
    frames.append(bw.frame(bw.T_TX, 0, 7, 0, [0, 0, 1, 0, 0, 0, 0xFF, 0], anns, wire))
    sl = lambda reg: rec[reg[0]:reg[0] + reg[1]]  # noqa: E731
    exp["tx"].append(dict(blk=7, tx_idx=0, last=0, pre_code=0, post_code=0, policy_id=1, dup_tag=0, phantom_seq=0xFF,
                          n_ends=2, n_rd=3, n_wr=1, has_key=1, der_ok=1,
                          sig=dict(qx=21, qy=22, e=bw.sha(sl(pay)), r=r0, s=s0)))
    exp["end"].append(dict(has_key=1, der_ok=1, org=1, roles=0b0010,
                           sig=dict(qx=11, qy=12, e=bw.sha(sl(prp), CACHE[ID_A]), r=r1, s=s1)))
    exp["end"].append(dict(has_key=0, der_ok=0, e=bw.sha(sl(prp), b"not-a-cached-identity")))
    exp["rd"] += [
        dict(kind=0, req=0, seq=0, ns=1, has_ver=1, ver_blk=5, ver_tx=3, key=bw.sha(key1)),
        dict(kind=0, req=0, seq=1, ns=1, has_ver=1, ver_blk=0, ver_tx=0, key=bw.sha(key3)),
        dict(kind=1, req=2, seq=2, ns=1, has_ver=0, ver_blk=0, ver_tx=0, key=bw.sha(probe)),
    ]
    exp["wr"].append(dict(sync=0, del_=0, ns=1, ver_blk=0, ver_tx=0, key=bw.sha(key2)))

    # TX 1 (last): a host code, identities compressed, nothing to check.
    p = bw.Payload(CACHE).raw(b"garbage ").ident(ID_B).raw(b" more")
    wire, locs = p.stripped()
    frames.append(bw.frame(bw.T_TX, 1, 7, 1, [3, 0, 0, 0, 0, 7, 0xFF, 0], locs, wire))
    exp["tx"].append(dict(blk=7, tx_idx=1, last=1, pre_code=3, post_code=0, policy_id=0, dup_tag=7,
                          phantom_seq=0xFF, n_ends=0, n_rd=0, n_wr=0, has_key=0, der_ok=0))

    # STATE_SYNC: two entries.
    ka, kb = b"synced-a", b"synced-b"
    va, vb = bw.version(4, 1), bw.version(4, 300)
    payload = ka + va + kb + vb
    o = 0
    anns = []
    for k, v, fl in ((ka, va, 2), (kb, vb, 3)):
        anns += [(bw.K_SYNC_KEY, fl, 3, 0, o, len(k)), (bw.K_SYNC_VER, 0, 3, 0, o + len(k), len(v))]
        o += len(k) + len(v)
    frames.append(bw.frame(bw.T_STATE_SYNC, 0, 6, 0, [], anns, payload))
    exp["wr"] += [dict(sync=1, del_=0, ns=3, ver_blk=4, ver_tx=1, key=bw.sha(ka)),
                  dict(sync=1, del_=1, ns=3, ver_blk=4, ver_tx=300, key=bw.sha(kb))]

    got = {k: [] for k in exp}
    for k in got:
        cocotb.start_soon(monitor(dut, k, got[k]))
    starts = []

    async def count_starts():
        while True:
            await RisingEdge(dut.blk_start)
            starts.append(1)

    cocotb.start_soon(count_starts())
    errors = []

    async def watch_errors():
        while True:
            await RisingEdge(dut.proto_error)
            errors.append(1)
            if hasattr(dut, "st"):
                dut._log.warning("proto_error in state %s, ins=%s spos=%s", dut.st.value, dut.ins.value,
                                 dut.spos.value)

    cocotb.start_soon(watch_errors())
    pol_writes = []

    async def watch_policy_writes():
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if int(dut.pol_we.value):
                pol_writes.append((int(dut.pol_id.value), int(dut.pol_flush.value), int(dut.pol_prog.value)))

    cocotb.start_soon(watch_policy_writes())
    try:
        await with_timeout(send_frames(dut, frames), 2_000_000, "ns")
    except Exception:
        for sig in ("st", "ins", "spos", "rpos", "tk_valid", "tk_pos", "fld_valid", "hq_valid", "loc_valid",
                    "kd_valid", "dq_valid", "vq_valid", "k_busy", "dig_done", "hash_used", "settle", "f_type",
                    "f_psize", "frame_done", "tk_take", "h_ready", "k_ready", "kd_in_ready"):
            if hasattr(dut, sig):
                dut._log.error("%s = %s", sig, getattr(dut, sig).value)
        dut._log.error("records: %s", {k: len(v) for k, v in got.items()})
        raise
    for _ in range(200):
        await ClockCycles(dut.clk, 50)
        if all(len(got[k]) >= len(exp[k]) for k in exp):
            break
    await ClockCycles(dut.clk, 200)
    dut._log.info("records: %s", {k: len(v) for k, v in got.items()})
    assert not errors, f"protocol errors: {errors}"
    types = {"blk": BLOCK_REC, "tx": TX_REC, "end": END_REC, "rd": RD_REC, "wr": WR_REC}
    for k in exp:
        assert len(got[k]) == len(exp[k]), f"{k}: {len(got[k])} records, expected {len(exp[k])}"
        for i, (g, e) in enumerate(zip(got[k], exp[k])):
            g = types[k].unpack(g)
            for field, want in e.items():
                if field == "sig":
                    for sf, sv in want.items():
                        assert g["sig"][sf] == sv, f"{k}[{i}].sig.{sf}: {g['sig'][sf]:#x} != {sv:#x}"
                elif field == "e":
                    assert g["sig"]["e"] == want, f"{k}[{i}].e"
                else:
                    assert g[field] == want, f"{k}[{i}].{field}: {g[field]} != {want}"
    assert len(starts) == 1, "one HEADER section"
    assert pol_writes == [(3, 1, int.from_bytes(prog, "big"))], f"policy-table writes: {pol_writes}"
