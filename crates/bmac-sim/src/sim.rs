//! The Verilated `bmac_top` (hw/rtl/bmac_top.sv), driven through the C ABI of `csrc/shim.cpp`: poke and peek of
//! the top-level ports, whole clock cycles, and helpers for AXI-Stream frames and AXI-Lite registers.
//!
//! build.rs compiles one model per N×M listed in `FERROFABRIC_HW_CONFIGS` (default `8x2`). Without Verilator
//! the module still compiles, but [`Sim::new`] fails with [`SimError::NotBuilt`], and [`available`] lists
//! nothing.
//!
//! All `unsafe` of the crate is here. Every call goes through a handle that [`Sim`] owns, from creation to
//! `Drop`.
#![allow(unsafe_code)]

use std::ffi::c_void;
use std::ptr::NonNull;

/// Why a simulation cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// This N×M was not compiled in (see `FERROFABRIC_HW_CONFIGS`), or Verilator was missing at build time.
    #[error("Verilator model {0}x{1} is not built (built: {2:?}; set FERROFABRIC_HW_CONFIGS and rebuild)")]
    NotBuilt(u32, u32, Vec<(u32, u32)>),
    /// The model did not finish within the cycle budget.
    #[error("simulation timeout after {0} cycles: {1}")]
    Timeout(u64, &'static str),
    /// The card's STATUS register reports a sticky error (bit 2: KV-store overflow, bit 3: protocol error).
    #[error("card STATUS {0:#x}: KV-store overflow or protocol error")]
    Status(u32),
}

/// Top-level ports, numbered as in `csrc/shim.cpp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Port {
    RstN = 0,
    Tdata,
    Tkeep,
    Tlast,
    Tvalid,
    Tready,
    Awaddr,
    Awvalid,
    Awready,
    Wdata,
    Wstrb,
    Wvalid,
    Wready,
    Bresp,
    Bvalid,
    Bready,
    Araddr,
    Arvalid,
    Arready,
    Rdata,
    Rresp,
    Rvalid,
    Rready,
    Irq,
}

/// The C functions of one configuration.
#[allow(dead_code)]
struct Fns {
    n: u32,
    m: u32,
    new: unsafe extern "C" fn() -> *mut c_void,
    free: unsafe extern "C" fn(*mut c_void),
    poke: unsafe extern "C" fn(*mut c_void, u32, u64),
    eval: unsafe extern "C" fn(*mut c_void),
    peek: unsafe extern "C" fn(*mut c_void, u32) -> u64,
    step: unsafe extern "C" fn(*mut c_void, u64),
    step_until: unsafe extern "C" fn(*mut c_void, u32, u64, u64) -> u64,
    send_frame: unsafe extern "C" fn(*mut c_void, *const u8, u64, u64) -> u64,
}

macro_rules! model {
    ($cfg:literal, $modname:ident, $n:literal, $m:literal) => {
        #[cfg(bmac_cfg = $cfg)]
        mod $modname {
            use std::ffi::c_void;
            extern "C" {
                #[link_name = concat!("bmac_", $cfg, "_new")]
                fn new() -> *mut c_void;
                #[link_name = concat!("bmac_", $cfg, "_free")]
                fn free(h: *mut c_void);
                #[link_name = concat!("bmac_", $cfg, "_poke")]
                fn poke(h: *mut c_void, port: u32, v: u64);
                #[link_name = concat!("bmac_", $cfg, "_eval")]
                fn eval(h: *mut c_void);
                #[link_name = concat!("bmac_", $cfg, "_peek")]
                fn peek(h: *mut c_void, port: u32) -> u64;
                #[link_name = concat!("bmac_", $cfg, "_step")]
                fn step(h: *mut c_void, cycles: u64);
                #[link_name = concat!("bmac_", $cfg, "_step_until")]
                fn step_until(h: *mut c_void, port: u32, value: u64, max: u64) -> u64;
                #[link_name = concat!("bmac_", $cfg, "_send_frame")]
                fn send_frame(h: *mut c_void, data: *const u8, len: u64, max: u64) -> u64;
            }
            pub(super) const FNS: super::Fns =
                super::Fns { n: $n, m: $m, new, free, poke, eval, peek, step, step_until, send_frame };
        }
    };
}

model!("1x1", m1x1, 1, 1);
model!("2x2", m2x2, 2, 2);
model!("4x2", m4x2, 4, 2);
model!("8x2", m8x2, 8, 2);
model!("5x3", m5x3, 5, 3);
model!("16x2", m16x2, 16, 2);

// One push per configuration that build.rs compiled (cfg-gated, so not a `vec![]`).
#[allow(clippy::vec_init_then_push)]
fn all() -> Vec<&'static Fns> {
    #[allow(unused_mut)]
    let mut v: Vec<&'static Fns> = Vec::new();
    #[cfg(bmac_cfg = "1x1")]
    v.push(&m1x1::FNS);
    #[cfg(bmac_cfg = "2x2")]
    v.push(&m2x2::FNS);
    #[cfg(bmac_cfg = "4x2")]
    v.push(&m4x2::FNS);
    #[cfg(bmac_cfg = "8x2")]
    v.push(&m8x2::FNS);
    #[cfg(bmac_cfg = "5x3")]
    v.push(&m5x3::FNS);
    #[cfg(bmac_cfg = "16x2")]
    v.push(&m16x2::FNS);
    v
}

/// The N×M configurations compiled into this build (empty without Verilator).
pub fn available() -> Vec<(u32, u32)> {
    all().iter().map(|f| (f.n, f.m)).collect()
}

/// One simulated card.
pub struct Sim {
    h: NonNull<c_void>,
    f: &'static Fns,
    cycles: u64,
}

impl Sim {
    /// Instantiates the N×M model and resets it (3 cycles with `rst_n` low).
    ///
    /// Errors: [`SimError::NotBuilt`].
    pub fn new(n: u32, m: u32) -> Result<Sim, SimError> {
        let f =
            all().into_iter().find(|f| f.n == n && f.m == m).ok_or_else(|| SimError::NotBuilt(n, m, available()))?;
        // SAFETY: `new` has no preconditions; it returns a heap handle owned by the returned Sim.
        let raw = unsafe { (f.new)() };
        let h = NonNull::new(raw).ok_or(SimError::NotBuilt(n, m, available()))?;
        let mut s = Sim { h, f, cycles: 0 };
        s.poke(Port::RstN, 0);
        s.step(3);
        s.poke(Port::RstN, 1);
        s.poke(Port::Bready, 1);
        s.poke(Port::Wstrb, 0xf);
        s.step(1);
        Ok(s)
    }

    /// The model's N×M.
    pub fn config(&self) -> (u32, u32) {
        (self.f.n, self.f.m)
    }

    /// Cycles simulated since creation.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Sets an input port. Combinational outputs follow at the next [`Sim::settle`] or clock cycle.
    pub fn poke(&mut self, port: Port, value: u64) {
        // SAFETY: `self.h` is the live handle created by `new` for these functions; ports are plain integers.
        unsafe { (self.f.poke)(self.h.as_ptr(), port as u32, value) }
    }

    /// Evaluates the model without a clock edge (combinational outputs follow the inputs).
    pub fn settle(&mut self) {
        // SAFETY: as in `poke`.
        unsafe { (self.f.eval)(self.h.as_ptr()) }
    }

    /// Reads a port.
    pub fn peek(&self, port: Port) -> u64 {
        // SAFETY: as in `poke`; reading does not change the model.
        unsafe { (self.f.peek)(self.h.as_ptr(), port as u32) }
    }

    /// Runs `cycles` clock cycles.
    pub fn step(&mut self, cycles: u64) {
        // SAFETY: as in `poke`.
        unsafe { (self.f.step)(self.h.as_ptr(), cycles) };
        self.cycles += cycles;
    }

    /// Runs until `port` reads `value`. Returns the cycles taken.
    ///
    /// Errors: [`SimError::Timeout`] after `max` cycles.
    pub fn step_until(&mut self, port: Port, value: u64, max: u64, what: &'static str) -> Result<u64, SimError> {
        // SAFETY: as in `poke`.
        let n = unsafe { (self.f.step_until)(self.h.as_ptr(), port as u32, value, max) };
        self.cycles += n;
        if self.peek(port) != value {
            return Err(SimError::Timeout(n, what));
        }
        Ok(n)
    }

    /// Sends one Ethernet frame on the AXI-Stream input. Returns the cycles until its last beat was taken.
    ///
    /// Errors: [`SimError::Timeout`] if the card does not take it within `max` cycles.
    pub fn send_frame(&mut self, frame: &[u8], max: u64) -> Result<u64, SimError> {
        // SAFETY: `frame` is a live slice for the duration of the call and the shim reads exactly `len` bytes.
        let n = unsafe { (self.f.send_frame)(self.h.as_ptr(), frame.as_ptr(), frame.len() as u64, max) };
        if n == u64::MAX {
            self.cycles += max;
            return Err(SimError::Timeout(max, "AXI-Stream input stalled"));
        }
        self.cycles += n;
        Ok(n)
    }

    /// AXI-Lite read of a 32-bit register.
    ///
    /// Errors: [`SimError::Timeout`] if the read channel does not answer within 100 cycles.
    pub fn read_reg(&mut self, addr: u16) -> Result<u32, SimError> {
        self.poke(Port::Araddr, u64::from(addr));
        self.poke(Port::Arvalid, 1);
        self.settle();
        self.step_until(Port::Arready, 1, 100, "AXI-Lite AR")?;
        self.step(1);
        self.poke(Port::Arvalid, 0);
        self.step_until(Port::Rvalid, 1, 100, "AXI-Lite R")?;
        let v = self.peek(Port::Rdata) as u32;
        self.poke(Port::Rready, 1);
        self.step(1);
        self.poke(Port::Rready, 0);
        Ok(v)
    }

    /// AXI-Lite write of a 32-bit register.
    ///
    /// Errors: [`SimError::Timeout`] if the write is not taken within 100 cycles.
    pub fn write_reg(&mut self, addr: u16, value: u32) -> Result<(), SimError> {
        self.poke(Port::Awaddr, u64::from(addr));
        self.poke(Port::Wdata, u64::from(value));
        self.poke(Port::Awvalid, 1);
        self.poke(Port::Wvalid, 1);
        self.settle();
        self.step_until(Port::Awready, 1, 100, "AXI-Lite AW")?;
        self.step(1);
        self.poke(Port::Awvalid, 0);
        self.poke(Port::Wvalid, 0);
        self.step(1);
        Ok(())
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        // SAFETY: the handle came from `new` and is freed exactly once, here.
        unsafe { (self.f.free)(self.h.as_ptr()) }
    }
}
