"""Valid/ready helpers for the cocotb testbenches: drive a channel, collect from a channel."""

import random

from cocotb.clock import Clock
from cocotb.triggers import First, ReadOnly, RisingEdge, Timer

CLK_NS = 10


async def reset(dut, cycles=3):
    """Starts the clock and pulses the active-low reset."""
    import cocotb

    cocotb.start_soon(Clock(dut.clk, CLK_NS, units="ns").start())
    dut.rst_n.value = 0
    for _ in range(cycles):
        await RisingEdge(dut.clk)
    dut.rst_n.value = 1
    await RisingEdge(dut.clk)


async def send(clk, valid, ready, data, value):
    """One transfer: holds valid with `value` until ready is seen at a clock edge."""
    data.value = value
    valid.value = 1
    while True:
        await ReadOnly()
        fire = int(ready.value) == 1
        await RisingEdge(clk)
        if fire:
            break
    valid.value = 0


async def send_all(clk, valid, ready, data, values, seed=None, gap=0.0):
    """Sends every value in order; with `gap` > 0, idles a random cycle between transfers."""
    rng = random.Random(seed)
    valid.value = 0
    for v in values:
        while gap and rng.random() < gap:
            await RisingEdge(clk)
        await send(clk, valid, ready, data, v)


async def collect(clk, valid, ready, data, n, out, seed=None, stall=0.0):
    """Receives `n` values into `out`; with `stall` > 0, drops ready on random cycles."""
    rng = random.Random(seed)
    while len(out) < n:
        ready.value = 0 if (stall and rng.random() < stall) else 1
        await ReadOnly()
        fire = int(valid.value) == 1 and int(ready.value) == 1
        value = int(data.value) if fire else None
        await RisingEdge(clk)
        if fire:
            out.append(value)
    ready.value = 0


async def send_wait(clk, valid, ready, data, value):
    """Like `send`, but sleeps until ready rises instead of polling every cycle (for slow consumers)."""
    data.value = value
    valid.value = 1
    while True:
        await ReadOnly()
        if int(ready.value) == 1:
            await RisingEdge(clk)
            break
        await First(RisingEdge(ready), Timer(1000 * CLK_NS, "ns"))
    valid.value = 0


async def collect_wait(clk, valid, ready, data, n, out):
    """Receives `n` values with ready held high, sleeping until valid rises between transfers."""
    ready.value = 1
    while len(out) < n:
        await ReadOnly()
        if int(valid.value) == 1:
            out.append(int(data.value))
            await RisingEdge(clk)
            continue
        await First(RisingEdge(valid), Timer(1000 * CLK_NS, "ns"))
