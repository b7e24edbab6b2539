"""Bit-exact packing of the bmac_pkg structs (hw/rtl/bmac_pkg.sv) for the cocotb testbenches.

A packed SystemVerilog struct puts its first field in the most significant bits. A packed array
`T [K-1:0] x` puts element K-1 in the most significant bits.
"""


class Struct:
    def __init__(self, name, fields):
        self.name = name
        self.fields = fields  # [(name, width | Struct | (Struct, count))], first = most significant

    @staticmethod
    def _width(f):
        if isinstance(f, int):
            return f
        if isinstance(f, Struct):
            return f.width
        sub, count = f
        return sub.width * count

    @property
    def width(self):
        return sum(self._width(f) for _, f in self.fields)

    def pack(self, **kw):
        v = 0
        for name, f in self.fields:
            w = self._width(f)
            x = kw.get(name, 0)
            if isinstance(f, Struct):
                x = f.pack(**x) if isinstance(x, dict) else x
            elif isinstance(f, tuple):
                sub, count = f
                items = list(x) if x else []
                items += [{}] * (count - len(items))
                packed = 0
                for i in reversed(range(count)):  # element count-1 is the most significant
                    packed = (packed << sub.width) | sub.pack(**items[i])
                x = packed
            assert 0 <= x < (1 << w), f"{self.name}.{name} = {x} does not fit {w} bits"
            v = (v << w) | x
        return v

    def unpack(self, v):
        out = {}
        shift = self.width
        for name, f in self.fields:
            w = self._width(f)
            shift -= w
            x = (v >> shift) & ((1 << w) - 1)
            if isinstance(f, Struct):
                x = f.unpack(x)
            out[name] = x
        return out


MAX_ENDS = 4

SIG_JOB = Struct("sig_job_t", [("qx", 256), ("qy", 256), ("e", 256), ("r", 256), ("s", 256)])
BLOCK_REC = Struct(
    "block_rec_t",
    [("blk", 64), ("policy_id", 8), ("has_key", 1), ("der_ok", 1), ("org", 8), ("roles", 4), ("sig", SIG_JOB)],
)
TX_REC = Struct(
    "tx_rec_t",
    [
        ("blk", 64), ("tx_idx", 16), ("last", 1), ("pre_code", 8), ("post_code", 8), ("policy_id", 8),
        ("dup_tag", 16), ("phantom_seq", 8), ("n_ends", 3), ("n_rd", 8), ("n_wr", 8), ("has_key", 1),
        ("der_ok", 1), ("sig", SIG_JOB),
    ],
)
END_REC = Struct("end_rec_t", [("has_key", 1), ("der_ok", 1), ("org", 8), ("roles", 4), ("sig", SIG_JOB)])
RD_REC = Struct(
    "rd_rec_t",
    [("kind", 1), ("req", 2), ("seq", 8), ("ns", 8), ("has_ver", 1), ("ver_blk", 64), ("ver_tx", 64), ("key", 256)],
)
WR_REC = Struct(
    "wr_rec_t", [("sync", 1), ("del_", 1), ("ns", 8), ("ver_blk", 64), ("ver_tx", 32), ("key", 256)]
)
TX_META = Struct(
    "tx_meta_t",
    [("gseq", 16), ("blk", 64), ("tx_idx", 16), ("last", 1), ("dup_tag", 16), ("phantom_seq", 8), ("n_rd", 8),
     ("n_wr", 8)],
)
TX_JOB = Struct(
    "tx_job_t",
    [("gseq", 16), ("pre_code", 8), ("post_code", 8), ("policy_id", 8), ("has_key", 1), ("der_ok", 1),
     ("sig", SIG_JOB), ("n_ends", 3), ("ends", (END_REC, MAX_ENDS))],
)
TX_RES = Struct("tx_res_t", [("gseq", 16), ("code", 8)])
RES_REC = Struct(
    "res_rec_t", [("blk", 64), ("tx_idx", 16), ("code", 8), ("last", 1), ("block_valid", 1)]
)

# The Fabric TxValidationCode values are CODE_* in bmac_regs (generated from hw/gen/regmap.toml).
PROBE_UNTOUCHED, PROBE_DELETED, PROBE_NOT_PUT = 1, 2, 3
