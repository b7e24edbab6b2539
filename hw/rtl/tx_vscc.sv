// VSCC stage of a tx_validator (hw/DESIGN.md section 5): M ECDSA engines, the
// ends_scheduler that feeds them and stops as soon as the policy holds, and
// the evaluator of the endorsement-policy program selected by the transaction's policy id.
//
// A transaction arrives with the code left by tx_verify. If that code is not
// VALID, or the transaction has no policy (policy_id 0), it passes through
// unchanged. Otherwise it leaves VALID or ENDORSEMENT_POLICY_FAILURE.
module tx_vscc
#(
    parameter int M    = 2,
    parameter int ORGS = 8,
    parameter int WORD = 64
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       in_valid,
    output logic       in_ready,
    /* verilator lint_off UNUSEDSIGNAL */
    input  bmac_pkg::tx_job_t in_job,        // the creator part was used by tx_verify
    /* verilator lint_on UNUSEDSIGNAL */
    input  logic [7:0] in_code,
    input  logic [bmac_pkg::POL_IDS*bmac_pkg::POL_W-1:0] policies,   // the policy table
    output logic       out_valid,
    input  logic       out_ready,
    output bmac_pkg::tx_res_t out,
    // Statistics.
    output logic [$clog2(M+1)-1:0] ecdsa_starts,   // engines started this cycle
    output logic       skip_valid,                 // one-cycle strobe
    output logic [2:0] skip_count                  // endorsements not verified (early stop)
);
  typedef enum logic [1:0] {S_IDLE, S_RUN, S_OUT} state_t;
  state_t      st;
  logic [15:0] gseq;
  logic [7:0]  code;
  logic [7:0]  policy_id;

  logic              sch_start, sch_idle, sch_finished, sch_pass;
  logic [2:0]        sch_skipped;
  logic [5*ORGS-1:0] sat;
  logic              satisfied;
  logic [M-1:0]      eng_start, eng_busy, eng_done, eng_valid, kill;
  bmac_pkg::sig_job_t eng_sig;

  ends_scheduler #(.M(M), .ORGS(ORGS)) u_sched (
      .clk, .rst_n,
      .start(sch_start), .idle(sch_idle), .n_ends(in_job.n_ends), .ends(in_job.ends),
      .finished(sch_finished), .pass(sch_pass), .skipped(sch_skipped),
      .sat, .satisfied,
      .eng_start, .eng_sig, .eng_busy, .eng_done, .eng_valid, .kill
  );

  ends_policy_evaluator #(.ORGS(ORGS)) u_policy (.policy_id, .policies, .sat, .satisfied);

  for (genvar k = 0; k < M; k++) begin : g_eng
    // A cancelled engine is reset for one cycle (kill is a register output).
    logic eng_rst_n;
    assign eng_rst_n = rst_n & ~kill[k];
    ecdsa_engine #(.WORD(WORD)) u_ecdsa (
        .clk, .rst_n(eng_rst_n), .start(eng_start[k]),
        .qx(eng_sig.qx), .qy(eng_sig.qy), .e(eng_sig.e), .r(eng_sig.r), .s(eng_sig.s),
        .busy(eng_busy[k]), .done(eng_done[k]), .valid(eng_valid[k])
    );
  end

  always_comb begin
    ecdsa_starts = '0;
    for (int k = 0; k < M; k++) ecdsa_starts = ecdsa_starts + ($clog2(M+1))'(eng_start[k]);
  end

  logic needs_policy;
  assign needs_policy = in_code == bmac_regs_pkg::CODE_VALID && in_job.policy_id != 8'd0;
  assign in_ready     = st == S_IDLE && sch_idle;
  assign sch_start    = in_valid && in_ready && needs_policy;
  assign out_valid    = st == S_OUT;
  assign out.gseq = gseq;
  assign out.code = code;
  assign skip_valid   = sch_finished;
  assign skip_count   = sch_skipped;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st        <= S_IDLE;
      gseq      <= '0;
      code      <= '0;
      policy_id <= '0;
    end else begin
      unique case (st)
        S_IDLE: if (in_valid && in_ready) begin
          gseq      <= in_job.gseq;
          code      <= in_code;
          policy_id <= in_job.policy_id;
          st        <= needs_policy ? S_RUN : S_OUT;
        end
        S_RUN: if (sch_finished) begin
          code <= sch_pass ? bmac_regs_pkg::CODE_VALID : bmac_regs_pkg::CODE_ENDORSEMENT_POLICY_FAILURE;
          st   <= S_OUT;
        end
        S_OUT: if (out_ready) st <= S_IDLE;
        default: st <= S_IDLE;
      endcase
    end
  end
endmodule
