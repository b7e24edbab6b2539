"""Policy programs of the card's policy table (hw/DESIGN.md section 5; crates/bmac/src/policy.rs PolicyProgram).

A program is POL_LEAVES leaves (org, role bit) and POL_GATES threshold gates; the root is the last gate. Its wire
form, the POLICY_SYNC payload, is 2 bytes per leaf then 3 per gate (threshold, leaf mask, gate mask)."""

POL_IDS, POL_LEAVES, POL_GATES = 32, 8, 8
POL_BYTES = 2 * POL_LEAVES + 3 * POL_GATES
POL_W = 1 + 8 * POL_BYTES
ROLE_BIT = {"member": 4, "admin": 3, "orderer": 2, "peer": 1, "client": 0}


def program(leaves, gates):
    """Bytes of a program: leaves [(org, role bit)], gates [(threshold, leaf mask, gate mask)], the root last; the
    root moves to the last gate slot."""
    assert len(leaves) <= POL_LEAVES and 1 <= len(gates) <= POL_GATES
    b = bytearray(POL_BYTES)
    for k, (org, bit) in enumerate(leaves):
        b[2 * k], b[2 * k + 1] = org, bit
    for g, gate in enumerate(gates):
        slot = POL_GATES - 1 if g == len(gates) - 1 else g
        b[2 * POL_LEAVES + 3 * slot: 2 * POL_LEAVES + 3 * slot + 3] = bytes(gate)
    return bytes(b)


def out_of(n, principals):
    """OutOf(n, principals...) over leaves only, e.g. out_of(2, [(1, "peer"), (2, "peer")])."""
    return program([(o, ROLE_BIT[r]) for o, r in principals], [(n, (1 << len(principals)) - 1, 0)])


def evaluate(prog, sat, orgs=8):
    """The program on per-org bits `sat` (sat bit 5*org + role bit), as ends_policy_evaluator runs it."""
    leaf = 0
    for k in range(POL_LEAVES):
        org, bit = prog[2 * k], prog[2 * k + 1]
        if org < orgs and bit < 5 and (sat >> (5 * org + bit)) & 1:
            leaf |= 1 << k
    gate = 0
    for g in range(POL_GATES):
        n, lm, gm = prog[2 * POL_LEAVES + 3 * g: 2 * POL_LEAVES + 3 * g + 3]
        count = bin(lm & leaf).count("1") + bin(gm & gate & ((1 << g) - 1)).count("1")
        if count >= n:
            gate |= 1 << g
    return bool(gate >> (POL_GATES - 1) & 1)


def table(programs):
    """The policy_table output vector: {valid, bytes} per entry id; `programs` maps id -> bytes."""
    v = 0
    for pid, prog in programs.items():
        if 0 < pid < POL_IDS:
            v |= ((1 << (8 * POL_BYTES)) | int.from_bytes(prog, "big")) << (pid * POL_W)
    return v
