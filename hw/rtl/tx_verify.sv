// Creator-signature stage of a tx_validator: one ECDSA engine.
//
// A transaction whose pre_code is not VALID keeps it; the signature is not
// checked, because Fabric stops before it. Otherwise the creator signature
// (SHA-256 of Envelope.payload, DER-decoded r and s, the key of the cached
// creator) is verified: a failure gives BAD_CREATOR_SIGNATURE, a success the
// host's post_code. The result waits in a one-entry output register, so the
// next transaction's signature can be checked while tx_vscc works on this one.
module tx_verify
#(
    parameter int WORD = 64
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       in_valid,
    output logic       in_ready,
    input  bmac_pkg::tx_job_t in_job,
    output logic       out_valid,
    input  logic       out_ready,
    output bmac_pkg::tx_job_t out_job,
    output logic [7:0] out_code,
    output logic       ecdsa_start
);
  typedef enum logic [1:0] {S_IDLE, S_RUN, S_OUT} state_t;
  state_t     st;
  bmac_pkg::tx_job_t job;
  logic [7:0] code;
  logic       eng_busy, eng_done, eng_valid;

  assign in_ready    = st == S_IDLE;
  assign ecdsa_start = in_valid && in_ready && in_job.pre_code == bmac_regs_pkg::CODE_VALID && in_job.has_key && in_job.der_ok;
  assign out_valid   = st == S_OUT;
  assign out_job     = job;
  assign out_code    = code;

  ecdsa_engine #(.WORD(WORD)) u_ecdsa (
      .clk, .rst_n, .start(ecdsa_start),
      .qx(in_job.sig.qx), .qy(in_job.sig.qy), .e(in_job.sig.e), .r(in_job.sig.r), .s(in_job.sig.s),
      .busy(eng_busy), .done(eng_done), .valid(eng_valid)
  );

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st   <= S_IDLE;
      job  <= '0;
      code <= '0;
    end else begin
      unique case (st)
        S_IDLE: if (in_valid) begin
          job <= in_job;
          if (in_job.pre_code != bmac_regs_pkg::CODE_VALID) begin
            code <= in_job.pre_code;
            st   <= S_OUT;
          end else if (!(in_job.has_key && in_job.der_ok)) begin
            code <= bmac_regs_pkg::CODE_BAD_CREATOR_SIGNATURE;
            st   <= S_OUT;
          end else st <= S_RUN;
        end
        S_RUN: if (eng_done) begin
          code <= eng_valid ? job.post_code : bmac_regs_pkg::CODE_BAD_CREATOR_SIGNATURE;
          st   <= S_OUT;
        end
        S_OUT: if (out_ready) st <= S_IDLE;
        default: st <= S_IDLE;
      endcase
    end
  end

  // busy is implied by the state machine.
  wire unused = eng_busy;
endmodule
