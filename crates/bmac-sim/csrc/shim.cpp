// C ABI around one Verilated bmac_top configuration (hw/rtl/bmac_top.sv), compiled once per N x M by
// crates/bmac-sim/build.rs with -DVTOP=<class>, -DVTOP_H=<header> and -DPFX(x)=<prefix>_##x.
// Rust drives the model through these functions (crates/bmac-sim/src/sim.rs): poke/peek of the top-level ports by
// number and whole clock cycles.
#include <cstdint>
#include VTOP_H
#include "verilated.h"

namespace {

struct Handle {
    VerilatedContext ctx;
    VTOP* top;
};

// Port numbers shared with crates/bmac-sim/src/sim.rs (enum Port).
enum : uint32_t {
    P_RST_N = 0, P_TDATA, P_TKEEP, P_TLAST, P_TVALID, P_TREADY,
    P_AWADDR, P_AWVALID, P_AWREADY, P_WDATA, P_WSTRB, P_WVALID, P_WREADY, P_BRESP, P_BVALID, P_BREADY,
    P_ARADDR, P_ARVALID, P_ARREADY, P_RDATA, P_RRESP, P_RVALID, P_RREADY, P_IRQ,
};

void cycle(VTOP* t) {
    t->clk = 1;
    t->eval();
    t->clk = 0;
    t->eval();
}

}  // namespace

extern "C" {

void* PFX(new)() {
    Handle* h = new Handle();
    h->top = new VTOP(&h->ctx, "bmac");
    h->top->clk = 0;
    h->top->rst_n = 0;
    h->top->eval();
    return h;
}

void PFX(free)(void* p) {
    Handle* h = static_cast<Handle*>(p);
    h->top->final();
    delete h->top;
    delete h;
}

void PFX(poke)(void* p, uint32_t port, uint64_t v) {
    VTOP* t = static_cast<Handle*>(p)->top;
    switch (port) {
        case P_RST_N: t->rst_n = v & 1; break;
        case P_TDATA: t->s_axis_tdata = v; break;
        case P_TKEEP: t->s_axis_tkeep = v & 0xff; break;
        case P_TLAST: t->s_axis_tlast = v & 1; break;
        case P_TVALID: t->s_axis_tvalid = v & 1; break;
        case P_AWADDR: t->s_axil_awaddr = v & 0xffff; break;
        case P_AWVALID: t->s_axil_awvalid = v & 1; break;
        case P_WDATA: t->s_axil_wdata = v & 0xffffffffu; break;
        case P_WSTRB: t->s_axil_wstrb = v & 0xf; break;
        case P_WVALID: t->s_axil_wvalid = v & 1; break;
        case P_BREADY: t->s_axil_bready = v & 1; break;
        case P_ARADDR: t->s_axil_araddr = v & 0xffff; break;
        case P_ARVALID: t->s_axil_arvalid = v & 1; break;
        case P_RREADY: t->s_axil_rready = v & 1; break;
        default: break;
    }
}

// Settles combinational outputs after pokes (the AXI-Lite ready signals depend on the valid inputs; the
// AXI-Stream tready does not, so frames need no extra evaluation).
void PFX(eval)(void* p) {
    static_cast<Handle*>(p)->top->eval();
}

uint64_t PFX(peek)(void* p, uint32_t port) {
    VTOP* t = static_cast<Handle*>(p)->top;
    switch (port) {
        case P_TREADY: return t->s_axis_tready;
        case P_AWREADY: return t->s_axil_awready;
        case P_WREADY: return t->s_axil_wready;
        case P_BRESP: return t->s_axil_bresp;
        case P_BVALID: return t->s_axil_bvalid;
        case P_ARREADY: return t->s_axil_arready;
        case P_RDATA: return t->s_axil_rdata;
        case P_RRESP: return t->s_axil_rresp;
        case P_RVALID: return t->s_axil_rvalid;
        case P_IRQ: return t->irq;
        default: return 0;
    }
}

void PFX(step)(void* p, uint64_t cycles) {
    VTOP* t = static_cast<Handle*>(p)->top;
    for (uint64_t i = 0; i < cycles; i++) cycle(t);
}

// Steps until output `port` reads `value` (checked before each cycle) or `max` cycles have passed; returns the
// cycles stepped.
uint64_t PFX(step_until)(void* p, uint32_t port, uint64_t value, uint64_t max) {
    VTOP* t = static_cast<Handle*>(p)->top;
    uint64_t n = 0;
    while (n < max && PFX(peek)(p, port) != value) {
        cycle(t);
        n++;
    }
    return n;
}

// Pushes `len` bytes as AXI-Stream beats (first byte in lane 0), stepping the clock until every beat is taken or
// `max` cycles have passed; returns the cycles stepped, or UINT64_MAX on timeout.
uint64_t PFX(send_frame)(void* p, const uint8_t* data, uint64_t len, uint64_t max) {
    VTOP* t = static_cast<Handle*>(p)->top;
    uint64_t n = 0;
    for (uint64_t off = 0; off < len; off += 8) {
        uint64_t word = 0;
        uint32_t keep = 0;
        for (uint64_t i = 0; i < 8 && off + i < len; i++) {
            word |= uint64_t(data[off + i]) << (8 * i);
            keep |= 1u << i;
        }
        t->s_axis_tdata = word;
        t->s_axis_tkeep = keep;
        t->s_axis_tlast = off + 8 >= len;
        t->s_axis_tvalid = 1;
        for (;;) {
            bool fire = t->s_axis_tready;
            cycle(t);
            n++;
            if (fire) break;
            if (n >= max) {
                t->s_axis_tvalid = 0;
                return UINT64_MAX;
            }
        }
    }
    t->s_axis_tvalid = 0;
    return n;
}

}  // extern "C"
