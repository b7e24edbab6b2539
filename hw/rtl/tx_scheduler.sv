// Transaction scheduler (hw/DESIGN.md section 3). It takes a transaction from
// tx_fifo and its endorsements from ends_fifo, and hands the whole job to
// the first free tx_validator. At the same time it pushes the transaction's
// in-order metadata into meta_fifo for tx_collector and tx_mvcc_commit.
// Every job gets a global sequence number (gseq). A job is dispatched only
// while fewer than RB transactions are in flight between this point and
// the collector's output, so the collector's reorder buffer cannot overflow.
module tx_scheduler
#(
    parameter int N  = 4,
    parameter int RB = 16
) (
    input  logic           clk,
    input  logic           rst_n,
    input  logic           tx_valid,
    output logic           tx_ready,
    input  bmac_pkg::tx_rec_t tx,
    input  logic           end_valid,
    output logic           end_ready,
    input  bmac_pkg::end_rec_t end_in,
    // To the validators (shared job bus, one valid per validator).
    output logic [N-1:0]   job_valid,
    input  logic [N-1:0]   job_ready,
    output bmac_pkg::tx_job_t job,
    // Metadata, in order.
    output logic           meta_valid,
    input  logic           meta_ready,
    output bmac_pkg::tx_meta_t meta,
    // Transactions released by the collector (wrapping count).
    input  logic [15:0]    released
);
  typedef enum logic [1:0] {S_IDLE, S_ENDS, S_DISPATCH} state_t;
  state_t     st;
  bmac_pkg::tx_rec_t t;
  logic [bmac_pkg::MAX_ENDS*bmac_pkg::END_REC_W-1:0] ends;  // end_rec_t i at [i*END_REC_W +: END_REC_W]
  logic [2:0] k;
  logic [15:0] gseq;

  localparam int VW = (N > 1) ? $clog2(N) : 1;
  logic          have_v;
  logic [VW-1:0] v;
  always_comb begin
    have_v = 1'b0;
    v      = '0;
    for (int i = N - 1; i >= 0; i--) if (job_ready[i]) begin
      have_v = 1'b1;
      v      = VW'(i);
    end
  end

  logic can_go;
  assign can_go = st == S_DISPATCH && have_v && meta_ready && (gseq - released) < 16'(RB);

  assign tx_ready  = st == S_IDLE;
  assign end_ready = st == S_ENDS;
  assign job.gseq         = gseq;
  assign job.pre_code     = t.pre_code;
  assign job.post_code    = t.post_code;
  assign job.policy_id    = t.policy_id;
  assign job.has_key      = t.has_key;
  assign job.der_ok       = t.der_ok;
  assign job.sig          = t.sig;
  assign job.n_ends       = t.n_ends;
  assign job.ends         = ends;
  assign meta.gseq        = gseq;
  assign meta.blk         = t.blk;
  assign meta.tx_idx      = t.tx_idx;
  assign meta.last        = t.last;
  assign meta.dup_tag     = t.dup_tag;
  assign meta.phantom_seq = t.phantom_seq;
  assign meta.n_rd        = t.n_rd;
  assign meta.n_wr        = t.n_wr;
  assign meta_valid = can_go;
  always_comb begin
    job_valid = '0;
    if (can_go) job_valid[v] = 1'b1;
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st   <= S_IDLE;
      t    <= '0;
      ends <= '0;
      k    <= '0;
      gseq <= '0;
    end else begin
      unique case (st)
        S_IDLE: if (tx_valid) begin
          t    <= tx;
          ends <= '0;
          k    <= '0;
          st   <= (tx.n_ends == 3'd0) ? S_DISPATCH : S_ENDS;
        end
        S_ENDS: if (end_valid) begin
          for (int i = 0; i < bmac_pkg::MAX_ENDS; i++)
            if (k[1:0] == 2'(i)) ends[i * bmac_pkg::END_REC_W +: bmac_pkg::END_REC_W] <= end_in;
          k            <= k + 3'd1;
          if (k + 3'd1 == t.n_ends) st <= S_DISPATCH;
        end
        S_DISPATCH: if (can_go) begin
          gseq <= gseq + 16'd1;
          st   <= S_IDLE;
        end
        default: st <= S_IDLE;
      endcase
    end
  end
endmodule
