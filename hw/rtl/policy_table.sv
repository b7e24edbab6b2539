// Endorsement-policy table (hw/DESIGN.md section 5): POL_IDS entries of POL_W
// bits, {valid, program bytes}, read in parallel by every policy evaluator.
//
// The protocol processor writes an entry when a POLICY_SYNC section completes
// (`we`, with the section's policy id and program bytes). `flush` first clears
// every entry (the host reloads its table after a flush). Entry 0 is never
// valid: policy id 0 means "no policy". The host writes an id only before the
// sections that use it and never rewrites an id that a block in flight uses, so
// writes need no ordering with the evaluators.
module policy_table
(
    input  logic                     clk,
    input  logic                     rst_n,
    input  logic                     we,
    input  logic                     flush,
    input  logic [7:0]               id,
    input  logic [8*bmac_pkg::POL_BYTES-1:0]   prog,
    output logic [bmac_pkg::POL_IDS*bmac_pkg::POL_W-1:0] policies
);
  logic [bmac_pkg::POL_W-1:0] entry [1:bmac_pkg::POL_IDS-1];
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      for (int i = 1; i < bmac_pkg::POL_IDS; i++) entry[i] <= '0;
    end else if (we) begin
      for (int i = 1; i < bmac_pkg::POL_IDS; i++) begin
        if (32'(id) == i) entry[i] <= {1'b1, prog};
        else if (flush) entry[i] <= '0;
      end
    end
  end
  assign policies[0 +: bmac_pkg::POL_W] = '0;   // policy id 0 means "no policy"
  for (genvar i = 1; i < bmac_pkg::POL_IDS; i++) begin : g_out
    assign policies[i * bmac_pkg::POL_W +: bmac_pkg::POL_W] = entry[i];
  end
endmodule
