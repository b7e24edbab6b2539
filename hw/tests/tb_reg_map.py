"""cocotb tests of hw/rtl/reg_map.sv: result banks held until released, registers, statistics."""

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

import axis_util as ax
from bmac_regs import (
    CODE_BAD_CREATOR_SIGNATURE, CODE_ENDORSEMENT_POLICY_FAILURE, CODE_MVCC_READ_CONFLICT, CODE_VALID,
    CONFIG_M_LSB, CONFIG_N_LSB, CONFIG_ORGS_LSB, CONFIG_TX_BITS_LSB, CONTROL_RELEASE_MASK, MAGIC_VALUE,
    REG_BLOCK_HI, REG_BLOCK_LO, REG_CODES, REG_CONFIG, REG_CONTROL, REG_LATENCY, REG_MAGIC, REG_STAT_BLOCKS,
    REG_STAT_ECDSA, REG_STAT_ENDS_SKIPPED, REG_STAT_TXS, REG_STAT_VALID, REG_STATUS, REG_TX_COUNT, REG_VALID,
    REG_VALID_COUNT, STATUS_BLOCK_VALID_MASK, STATUS_READY_MASK,
)
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
    assert await axil_read(dut, REG_MAGIC) == MAGIC_VALUE
    assert await axil_read(dut, REG_CONFIG) == (
        (10 << CONFIG_TX_BITS_LSB) | (8 << CONFIG_ORGS_LSB) | (2 << CONFIG_M_LSB) | (4 << CONFIG_N_LSB))
    assert await axil_read(dut, REG_STATUS) & STATUS_READY_MASK == 0

    dut.blk_start.value = 1
    await RisingEdge(dut.clk)
    dut.blk_start.value = 0
    dut.stat_ecdsa_starts.value = 3
    dut.stat_ends_skipped.value = 1
    await ClockCycles(dut.clk, 2)
    dut.stat_ecdsa_starts.value = 0
    dut.stat_ends_skipped.value = 0
    V, BCS, EPF, MVCC = CODE_VALID, CODE_BAD_CREATOR_SIGNATURE, CODE_ENDORSEMENT_POLICY_FAILURE, CODE_MVCC_READ_CONFLICT
    READY_VALID = STATUS_READY_MASK | STATUS_BLOCK_VALID_MASK
    b5 = [V, MVCC, V] + [BCS] * 30 + [V]       # 34 transactions: spans two bitmap words
    await ax.send_all(dut.clk, dut.res_valid, dut.res_ready, dut.res, results(5, b5))
    await ClockCycles(dut.clk, 2)
    assert int(dut.irq.value) == 1
    assert await axil_read(dut, REG_STATUS) & READY_VALID == READY_VALID
    assert await axil_read(dut, REG_BLOCK_LO) == 5 and await axil_read(dut, REG_BLOCK_HI) == 0
    assert await axil_read(dut, REG_TX_COUNT) == 34
    assert await axil_read(dut, REG_VALID_COUNT) == 3
    assert await axil_read(dut, REG_LATENCY) > 0, "latency from blk_start"
    assert await axil_read(dut, REG_CODES) == (BCS << 24) | (V << 16) | (MVCC << 8) | V
    assert await axil_read(dut, REG_CODES + 4) == BCS * 0x01010101
    assert await axil_read(dut, REG_CODES + 0x20) == BCS
    assert await axil_read(dut, REG_VALID) == 0b101
    assert await axil_read(dut, REG_VALID + 4) == 0b10

    # Block 6 fills the other bank; block 7 must wait until a bank is released.
    await ax.send_all(dut.clk, dut.res_valid, dut.res_ready, dut.res, results(6, [EPF, V], ok=False))
    blocked = cocotb.start_soon(ax.send_all(dut.clk, dut.res_valid, dut.res_ready, dut.res, results(7, [V])))
    await ClockCycles(dut.clk, 20)
    assert not blocked.done(), "both banks are full: block 7 waits"
    assert await axil_read(dut, REG_BLOCK_LO) == 5, "block 5 stays on display until released"
    await axil_write(dut, REG_CONTROL, CONTROL_RELEASE_MASK)
    assert await axil_read(dut, REG_BLOCK_LO) == 6
    assert await axil_read(dut, REG_STATUS) & READY_VALID == STATUS_READY_MASK, "block 6: ready, block signature invalid"
    assert await axil_read(dut, REG_CODES) & 0xFFFF == (V << 8) | EPF
    assert await axil_read(dut, REG_VALID) == 0b10
    await blocked
    await axil_write(dut, REG_CONTROL, CONTROL_RELEASE_MASK)
    assert await axil_read(dut, REG_BLOCK_LO) == 7
    assert await axil_read(dut, REG_VALID) == 0b1, "the bank's bitmap was cleared"
    await axil_write(dut, REG_CONTROL, CONTROL_RELEASE_MASK)
    assert int(dut.irq.value) == 0
    assert await axil_read(dut, REG_STAT_BLOCKS) == 3
    assert await axil_read(dut, REG_STAT_TXS) == 37
    assert await axil_read(dut, REG_STAT_VALID) == 5
    assert await axil_read(dut, REG_STAT_ECDSA) == 6
    assert await axil_read(dut, REG_STAT_ENDS_SKIPPED) == 2
