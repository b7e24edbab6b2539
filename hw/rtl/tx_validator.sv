// One transaction validator (hw/DESIGN.md section 3): tx_verify (creator
// signature, one engine) feeding tx_vscc (endorsements and policy, M
// engines). The two stages work on consecutive transactions at the same time.
module tx_validator
#(
    parameter int M    = 2,
    parameter int ORGS = 8,
    parameter int WORD = 64
) (
    input  logic    clk,
    input  logic    rst_n,
    input  logic    in_valid,
    output logic    in_ready,
    input  bmac_pkg::tx_job_t in_job,
    input  logic [bmac_pkg::POL_IDS*bmac_pkg::POL_W-1:0] policies,   // the policy table
    output logic    out_valid,
    input  logic    out_ready,
    output bmac_pkg::tx_res_t out,
    output logic [$clog2(M+2)-1:0] ecdsa_starts,
    output logic       skip_valid,
    output logic [2:0] skip_count
);
  logic       mid_valid, mid_ready;
  bmac_pkg::tx_job_t mid_job;
  logic [7:0] mid_code;
  logic       v_start;
  logic [$clog2(M+1)-1:0] s_starts;

  tx_verify #(.WORD(WORD)) u_verify (
      .clk, .rst_n, .in_valid, .in_ready, .in_job,
      .out_valid(mid_valid), .out_ready(mid_ready), .out_job(mid_job), .out_code(mid_code),
      .ecdsa_start(v_start)
  );

  tx_vscc #(.M(M), .ORGS(ORGS), .WORD(WORD)) u_vscc (
      .clk, .rst_n, .in_valid(mid_valid), .in_ready(mid_ready), .in_job(mid_job), .in_code(mid_code), .policies,
      .out_valid, .out_ready, .out, .ecdsa_starts(s_starts), .skip_valid, .skip_count
  );

  assign ecdsa_starts = ($clog2(M+2))'(s_starts) + ($clog2(M+2))'(v_start);
endmodule
