"""cocotb tests of hw/rtl/reg_map.sv: result banks held until released, registers, statistics."""

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

import axis_util as ax
from bmac_types import RES_REC


async def axil_read(dut, addr):
    dut.s_axil_araddr.value = addr
    dut.s_axil_arvalid.value = 1
    while True:
        await ReadOnly()
        fire = int(dut.s_axil_arready.value)
        await RisingEdge(dut.clk)
        if fire:
            break
    dut.s_axil_arvalid.value = 0
    dut.s_axil_rready.value = 1
    while True:
        await ReadOnly()
        if int(dut.s_axil_rvalid.value):
            v = int(dut.s_axil_rdata.value)
            await RisingEdge(dut.clk)
            dut.s_axil_rready.value = 0
            return v
        await RisingEdge(dut.clk)


async def axil_write(dut, addr, value):
    dut.s_axil_awaddr.value = addr
    dut.s_axil_wdata.value = value
    dut.s_axil_wstrb.value = 0xF
    dut.s_axil_awvalid.value = 1
    dut.s_axil_wvalid.value = 1
    dut.s_axil_bready.value = 1
    while True:
        await ReadOnly()
        fire = int(dut.s_axil_awready.value)
        await RisingEdge(dut.clk)
        if fire:
            break
    dut.s_axil_awvalid.value = 0
    dut.s_axil_wvalid.value = 0
    await RisingEdge(dut.clk)


def results(blk, codes, ok=True):
    return [RES_REC.pack(blk=blk, tx_idx=i, code=c, last=int(i == len(codes) - 1), block_valid=int(ok))
            for i, c in enumerate(codes)]


@cocotb.test()
async def banks_registers_and_statistics(dut):
    """Two banks: the displayed result holds until CONTROL is written; a third block waits."""
    for s in ("res_valid", "blk_start", "stat_ecdsa_starts", "stat_ends_skipped", "stat_mvcc_fail", "kv_overflow",
              "proto_error", "s_axil_arvalid", "s_axil_awvalid", "s_axil_wvalid", "s_axil_rready", "s_axil_bready"):
        getattr(dut, s).value = 0
    await ax.reset(dut)
    assert await axil_read(dut, 0x000) == 0x424D4143
    assert await axil_read(dut, 0x004) == (10 << 24) | (8 << 16) | (2 << 8) | 4
    assert await axil_read(dut, 0x008) & 1 == 0

    dut.blk_start.value = 1
    await RisingEdge(dut.clk)
    dut.blk_start.value = 0
    dut.stat_ecdsa_starts.value = 3
    dut.stat_ends_skipped.value = 1
    await ClockCycles(dut.clk, 2)
    dut.stat_ecdsa_starts.value = 0
    dut.stat_ends_skipped.value = 0
    b5 = [0, 11, 0] + [4] * 30 + [0]           # 34 transactions: spans two bitmap words
    await ax.send_all(dut.clk, dut.res_valid, dut.res_ready, dut.res, results(5, b5))
    await ClockCycles(dut.clk, 2)
    assert int(dut.irq.value) == 1
    assert await axil_read(dut, 0x008) & 3 == 3
    assert await axil_read(dut, 0x010) == 5 and await axil_read(dut, 0x014) == 0
    assert await axil_read(dut, 0x018) == 34
    assert await axil_read(dut, 0x01C) == 3
    assert await axil_read(dut, 0x020) > 0, "latency from blk_start"
    assert await axil_read(dut, 0x1000) == 0x04000B00
    assert await axil_read(dut, 0x1004) == 0x04040404
    assert await axil_read(dut, 0x1020) == 0x00000004
    assert await axil_read(dut, 0x400) == 0b101
    assert await axil_read(dut, 0x404) == 0b10

    # Block 6 fills the other bank; block 7 must wait until a bank is released.
    await ax.send_all(dut.clk, dut.res_valid, dut.res_ready, dut.res, results(6, [10, 0], ok=False))
    blocked = cocotb.start_soon(ax.send_all(dut.clk, dut.res_valid, dut.res_ready, dut.res, results(7, [0])))
    await ClockCycles(dut.clk, 20)
    assert not blocked.done(), "both banks are full: block 7 waits"
    assert await axil_read(dut, 0x010) == 5, "block 5 stays on display until released"
    await axil_write(dut, 0x00C, 1)
    assert await axil_read(dut, 0x010) == 6
    assert await axil_read(dut, 0x008) & 3 == 1, "block 6: ready, block signature invalid"
    assert await axil_read(dut, 0x1000) & 0xFFFF == 0x000A
    assert await axil_read(dut, 0x400) == 0b10
    await blocked
    await axil_write(dut, 0x00C, 1)
    assert await axil_read(dut, 0x010) == 7
    assert await axil_read(dut, 0x400) == 0b1, "the bank's bitmap was cleared"
    await axil_write(dut, 0x00C, 1)
    assert int(dut.irq.value) == 0
    assert await axil_read(dut, 0x040) == 3
    assert await axil_read(dut, 0x044) == 37
    assert await axil_read(dut, 0x048) == 5
    assert await axil_read(dut, 0x04C) == 6
    assert await axil_read(dut, 0x050) == 2
