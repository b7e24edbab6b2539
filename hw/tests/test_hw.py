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


def test_tx_mvcc_commit():
    """MVCC and commit against the KV store (small table, so that keys collide)."""
    _run(
        "tx_mvcc_commit",
        ["bmac_pkg.sv", "bmac_regs_pkg.sv", "kv_store.sv", "tx_mvcc_commit.sv"],
        "tb_mvcc",
        {"KV_ENTRIES": 64, "KV_PROBES": 16, "MAX_WR": 8},
        "small",
    )


BP_SOURCES = ECDSA_SOURCES + [
    "bmac_pkg.sv", "bmac_regs_pkg.sv", "policy_table.sv", "ends_policy_evaluator.sv", "ends_scheduler.sv", "tx_vscc.sv", "tx_verify.sv",
    "tx_validator.sv", "block_verify.sv", "sync_fifo.sv", "tx_scheduler.sv", "tx_collector.sv", "kv_store.sv",
    "tx_mvcc_commit.sv", "block_processor.sv",
]


def test_block_processor():
    """Two validators with two VSCC engines each (7 ECDSA engines), real signatures, two blocks."""
    _run("block_processor", BP_SOURCES, "tb_block_processor", {"N": 2, "M": 2, "KV_ENTRIES": 256}, "2x2")


PP_SOURCES = [
    "bmac_pkg.sv", "bmac_regs_pkg.sv", "sync_fifo.sv", "sha256_engine.sv", "axis_to_bytes.sv", "der_parser.sv", "version_parser.sv",
    "protocol_processor.sv",
]


def test_protocol_processor():
    """Hand-built sections through the protocol processor (identity cache of 4 slots)."""
    _run("protocol_processor", PP_SOURCES, "tb_protocol", {"ID_SLOTS": 4, "ID_BYTES": 512}, "small")


def test_ends_policy_evaluator():
    """The policy evaluator running a table of random programs, against the program semantics."""
    _run("ends_policy_evaluator", ["bmac_pkg.sv", "ends_policy_evaluator.sv"], "tb_small", {}, "table",
         testcase=["policy_evaluator_runs_loaded_programs"])


def test_der_parser():
    """DER signature decoding by Go's rules."""
    _run("der_parser", ["der_parser.sv"], "tb_small", {}, "default", testcase=["der_parser_follows_go_rules"])


def test_version_parser():
    """Version varint decoding."""
    _run("version_parser", ["version_parser.sv"], "tb_small", {}, "default",
         testcase=["version_parser_decodes_varints"])


def test_reg_map():
    """AXI-Lite registers and the two result banks."""
    _run("reg_map", ["bmac_pkg.sv", "bmac_regs_pkg.sv", "sync_fifo.sv", "reg_map.sv"], "tb_reg_map", {}, "default")


def test_pp_lanes():
    """The same sections through two protocol-processor lanes: records must come out in stream order."""
    _run("pp_lanes", PP_SOURCES + ["pp_lanes.sv"], "tb_protocol",
         {"LANES": 2, "ID_SLOTS": 4, "ID_BYTES": 512, "IN_DEPTH": 64}, "2lanes")
