// Block signature check (hw/DESIGN.md section 1): one ECDSA engine verifies the
// orderer's signature over value || signature_header || DER(header). The
// policy table's BlockValidation program (ends_policy_evaluator) then checks
// the signer's org and roles. A signer missing from the cache, or a DER that does
// not parse, fails without running the engine. Verdicts leave in block order
// through a one-entry output register.
module block_verify
#(
    parameter int ORGS = 8,
    parameter int WORD = 64
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       in_valid,
    output logic       in_ready,
    input  bmac_pkg::block_rec_t in_rec,
    input  logic [bmac_pkg::POL_IDS*bmac_pkg::POL_W-1:0] policies,   // the policy table
    output logic       out_valid,
    input  logic       out_ready,
    output logic       out_ok,
    output logic       ecdsa_start
);
  typedef enum logic [1:0] {S_IDLE, S_RUN, S_OUT} state_t;
  state_t     st;
  bmac_pkg::block_rec_t rec;
  logic       ok;
  logic       eng_busy, eng_done, eng_valid;

  // The signer's bits, as the policy evaluator sees a verified signature.
  logic [5*ORGS-1:0] sat;
  logic              satisfied;
  always_comb begin
    sat = '0;
    for (int o = 0; o < ORGS; o++) if (rec.org == 8'(o)) sat[5*o +: 5] = {1'b1, rec.roles};
  end
  ends_policy_evaluator #(.ORGS(ORGS)) u_policy (.policy_id(rec.policy_id), .policies, .sat, .satisfied);

  assign in_ready    = st == S_IDLE;
  assign ecdsa_start = in_valid && in_ready && in_rec.has_key && in_rec.der_ok;
  assign out_valid   = st == S_OUT;
  assign out_ok      = ok;

  ecdsa_engine #(.WORD(WORD)) u_ecdsa (
      .clk, .rst_n, .start(ecdsa_start),
      .qx(in_rec.sig.qx), .qy(in_rec.sig.qy), .e(in_rec.sig.e), .r(in_rec.sig.r), .s(in_rec.sig.s),
      .busy(eng_busy), .done(eng_done), .valid(eng_valid)
  );

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st  <= S_IDLE;
      rec <= '0;
      ok  <= 1'b0;
    end else begin
      unique case (st)
        S_IDLE: if (in_valid) begin
          rec <= in_rec;
          if (in_rec.has_key && in_rec.der_ok) st <= S_RUN;
          else begin
            ok <= 1'b0;
            st <= S_OUT;
          end
        end
        S_RUN: if (eng_done) begin
          ok <= eng_valid && satisfied;
          st <= S_OUT;
        end
        S_OUT: if (out_ready) st <= S_IDLE;
        default: st <= S_IDLE;
      endcase
    end
  end

  wire unused = eng_busy ^ (|rec.blk) ^ (|rec.sig) ^ rec.has_key ^ rec.der_ok;
endmodule
