"""pytest entry points: build the RTL with Verilator and run the cocotb testbenches."""

import sys
from pathlib import Path

import pytest
from cocotb.runner import get_runner

HW = Path(__file__).resolve().parents[1]
RTL = HW / "rtl"
BUILD = HW / "build"
TESTS = HW / "tests"
# The runner hands this process's sys.path to the simulator's Python as
# PYTHONPATH; the testbench modules (tb_*.py) and their helpers live here.
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

ECDSA_SOURCES = ["p256_pkg.sv", "mont_mul.sv", "mod_inv.sv", "p256_point_ops.sv", "ecdsa_engine.sv"]


def _run(top, sources, tb_module, params, tag, testcase=None):
    runner = get_runner("verilator")
    build_dir = BUILD / f"{top}_{tag}"
    runner.build(
        verilog_sources=[RTL / s for s in sources],
        hdl_toplevel=top,
        parameters=params,
        build_dir=build_dir,
    )
    runner.test(
        hdl_toplevel=top,
        test_module=tb_module,
        build_dir=build_dir,
        test_dir=build_dir,
        testcase=testcase,
    )


@pytest.mark.parametrize("data_w", [32, 64])
def test_sha256_engine(data_w):
    """All SHA-256 testbench cases at 32- and 64-bit beat widths."""
    _run("sha256_engine", ["sha256_engine.sv"], "tb_sha256", {"DATA_W": data_w}, f"w{data_w}")


def test_ecdsa_engine():
    """Default build (64-bit Montgomery digits): every ECDSA testbench case."""
    _run("ecdsa_engine", ECDSA_SOURCES, "tb_ecdsa", {"WORD": 64}, "w64")


def test_ecdsa_engine_word32():
    """32-bit digits (smaller multiplier): valid and fixture vectors only, to bound run time."""
    _run(
        "ecdsa_engine",
        ECDSA_SOURCES,
        "tb_ecdsa",
        {"WORD": 32},
        "w32",
        testcase=["valid_random_signatures", "fabric_fixture_signatures"],
    )
