// Endorsement-policy evaluator (hw/DESIGN.md section 5): the program of table
// entry `policy_id`, run on the per-org bits `sat`.
//
// The table (policy_table) holds programs loaded at run time by POLICY_SYNC
// sections. A program is POL_GATES threshold gates over POL_LEAVES leaves.
// Leaf k reads sat[5*org + bit] (per org o, sat[5*o +: 5] = {member, admin,
// orderer, peer, client}, each the OR over the verified endorsements of that
// org); orgs at or above ORGS and bits above 4 read as 0. Gate g holds when at
// least `threshold` of the leaves in its leaf mask and of the gates below it in
// its gate mask hold (a gate mask bit at or above g is ignored, so a program is
// always a DAG). The policy is satisfied when the entry is valid and its last
// gate holds. Unused gates have threshold 0 and no inputs.
//
// The evaluation is combinational: the scheduler asks it every cycle and stops
// dispatching endorsements as soon as it holds (short-circuit evaluation).
module ends_policy_evaluator
#(
    parameter int ORGS = 8
) (
    input  logic [7:0]               policy_id,
    input  logic [bmac_pkg::POL_IDS*bmac_pkg::POL_W-1:0] policies,
    input  logic [5*ORGS-1:0]        sat,
    output logic                     satisfied
);
  localparam int IW = $clog2(bmac_pkg::POL_IDS);

  // The selected entry; ids beyond the table select nothing (never satisfied).
  logic [bmac_pkg::POL_W-1:0] prog;
  always_comb begin
    prog = '0;
    if (32'(policy_id) < bmac_pkg::POL_IDS) prog = policies[32'(policy_id[IW-1:0]) * bmac_pkg::POL_W +: bmac_pkg::POL_W];
  end

  // Byte i of the entry's wire form.
  function automatic logic [7:0] pbyte(input logic [bmac_pkg::POL_W-1:0] p, input int i);
    pbyte = p[8 * (bmac_pkg::POL_BYTES - 1 - i) +: 8];
  endfunction

  logic [bmac_pkg::POL_LEAVES-1:0] leaf;
  always_comb begin
    for (int k = 0; k < bmac_pkg::POL_LEAVES; k++) begin
      leaf[k] = 1'b0;
      for (int o = 0; o < ORGS; o++)
        for (int b = 0; b < 5; b++)
          if (pbyte(prog, 2 * k) == 8'(o) && pbyte(prog, 2 * k + 1) == 8'(b)) leaf[k] = sat[5 * o + b];
    end
  end

  logic [bmac_pkg::POL_GATES-1:0] gate;
  always_comb begin
    logic [7:0] cnt;
    logic [7:0] lm, gm;
    gate = '0;
    for (int g = 0; g < bmac_pkg::POL_GATES; g++) begin
      lm  = pbyte(prog, 2 * bmac_pkg::POL_LEAVES + 3 * g + 1);
      gm  = pbyte(prog, 2 * bmac_pkg::POL_LEAVES + 3 * g + 2);
      cnt = '0;
      for (int k = 0; k < bmac_pkg::POL_LEAVES; k++) cnt = cnt + {7'd0, lm[k] & leaf[k]};
      for (int j = 0; j < g; j++) cnt = cnt + {7'd0, gm[j] & gate[j]};
      gate[g] = cnt >= pbyte(prog, 2 * bmac_pkg::POL_LEAVES + 3 * g);
    end
  end

  assign satisfied = prog[bmac_pkg::POL_W-1] & gate[bmac_pkg::POL_GATES-1];
endmodule
