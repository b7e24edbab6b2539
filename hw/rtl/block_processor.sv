// The BMac block processor (hw/DESIGN.md section 3):
//
//   block_fifo ─► block_verify ─► verdicts ──────────────────────────────┐
//   tx_fifo + ends_fifo ─► tx_scheduler ─► N × tx_validator ─► tx_collector ─► tx_mvcc_commit ─► res
//                               └──────────── meta_fifo ───────┘        rdset_fifo, wrset_fifo ┘
//
// N transaction validators each hold one ECDSA engine (tx_verify) and M
// (tx_vscc). block_verify holds one more. The endorsement-policy table
// (policy_table, written by the protocol processor's POLICY_SYNC sections) is
// read by every policy evaluator. Statistics leave as per-cycle counts for
// reg_map.
module block_processor
#(
    parameter int N          = 4,
    parameter int M          = 2,
    parameter int ORGS       = 8,
    parameter int WORD       = 64,
    parameter int KV_ENTRIES = 8192,
    parameter int KV_PROBES  = 32,
    parameter int MAX_WR     = 48
) (
    input  logic       clk,
    input  logic       rst_n,
    input  logic       blk_valid,
    output logic       blk_ready,
    input  bmac_pkg::block_rec_t blk_rec,
    input  logic       tx_valid,
    output logic       tx_ready,
    input  bmac_pkg::tx_rec_t tx,
    input  logic       end_valid,
    output logic       end_ready,
    input  bmac_pkg::end_rec_t end_in,
    input  logic       rd_valid,
    output logic       rd_ready,
    input  bmac_pkg::rd_rec_t rd,
    input  logic       wr_valid,
    output logic       wr_ready,
    input  bmac_pkg::wr_rec_t wr,
    output logic       res_valid,
    input  logic       res_ready,
    output bmac_pkg::res_rec_t res,
    // Policy-table writes from the protocol processor.
    input  logic       pol_we,
    input  logic       pol_flush,
    input  logic [7:0] pol_id,
    input  logic [8*bmac_pkg::POL_BYTES-1:0] pol_prog,
    // Statistics (per cycle).
    output logic [7:0] stat_ecdsa_starts,
    output logic [7:0] stat_ends_skipped,
    output logic       stat_mvcc_fail,
    output logic       kv_overflow
);
  localparam int RB = 1 << $clog2(4 * N);

  logic [bmac_pkg::POL_IDS*bmac_pkg::POL_W-1:0] policies;
  policy_table u_policies (
      .clk, .rst_n, .we(pol_we), .flush(pol_flush), .id(pol_id), .prog(pol_prog), .policies
  );

  // ------------------------------------------------------------ block path
  logic bv_in_valid, bv_in_ready, bv_ok_in, bv_valid, bv_ready, bv_ok, blk_start;
  block_verify #(.ORGS(ORGS), .WORD(WORD)) u_block_verify (
      .clk, .rst_n, .in_valid(blk_valid), .in_ready(blk_ready), .in_rec(blk_rec), .policies,
      .out_valid(bv_in_valid), .out_ready(bv_in_ready), .out_ok(bv_ok_in), .ecdsa_start(blk_start)
  );
  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W(1), .DEPTH(4)) u_verdicts (
      .clk, .rst_n, .in_valid(bv_in_valid), .in_ready(bv_in_ready), .in_data(bv_ok_in),
      .out_valid(bv_valid), .out_ready(bv_ready), .out_data(bv_ok), .count()
  );
  /* verilator lint_on PINCONNECTEMPTY */

  // ------------------------------------------------------ transaction path
  logic [N-1:0] job_valid, job_ready;
  bmac_pkg::tx_job_t job;
  logic         sm_valid, sm_ready, mq_valid, mq_ready;
  bmac_pkg::tx_meta_t sm_meta, mq_meta;
  logic [15:0]  released;

  tx_scheduler #(.N(N), .RB(RB)) u_sched (
      .clk, .rst_n, .tx_valid, .tx_ready, .tx, .end_valid, .end_ready, .end_in,
      .job_valid, .job_ready, .job, .meta_valid(sm_valid), .meta_ready(sm_ready), .meta(sm_meta), .released
  );

  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W($bits(sm_meta)), .DEPTH(RB)) u_meta (
      .clk, .rst_n, .in_valid(sm_valid), .in_ready(sm_ready), .in_data(sm_meta),
      .out_valid(mq_valid), .out_ready(mq_ready), .out_data(mq_meta), .count()
  );
  /* verilator lint_on PINCONNECTEMPTY */

  logic [N-1:0]    vres_valid, vres_ready, vskip_valid;
  bmac_pkg::tx_res_t [N-1:0] vres;
  logic [$clog2(M+2)-1:0] vstarts [N];
  logic [2:0]      vskip [N];

  for (genvar i = 0; i < N; i++) begin : g_val
    tx_validator #(.M(M), .ORGS(ORGS), .WORD(WORD)) u_val (
        .clk, .rst_n, .in_valid(job_valid[i]), .in_ready(job_ready[i]), .in_job(job), .policies,
        .out_valid(vres_valid[i]), .out_ready(vres_ready[i]), .out(vres[i]),
        .ecdsa_starts(vstarts[i]), .skip_valid(vskip_valid[i]), .skip_count(vskip[i])
    );
  end

  logic       c_valid, c_ready;
  bmac_pkg::tx_meta_t c_meta;
  logic [7:0] c_code;
  tx_collector #(.N(N), .RB(RB)) u_collect (
      .clk, .rst_n, .res_valid(vres_valid), .res_ready(vres_ready), .res(vres),
      .meta_valid(mq_valid), .meta_ready(mq_ready), .meta(mq_meta),
      .out_valid(c_valid), .out_ready(c_ready), .out_meta(c_meta), .out_code(c_code), .released
  );

  tx_mvcc_commit #(.KV_ENTRIES(KV_ENTRIES), .KV_PROBES(KV_PROBES), .MAX_WR(MAX_WR)) u_mvcc (
      .clk, .rst_n, .in_valid(c_valid), .in_ready(c_ready), .in_meta(c_meta), .in_code(c_code),
      .bv_valid, .bv_ready, .bv_ok, .rd_valid, .rd_ready, .rd, .wr_valid, .wr_ready, .wr,
      .res_valid, .res_ready, .res, .mvcc_fail(stat_mvcc_fail), .overflow(kv_overflow)
  );

  always_comb begin
    stat_ecdsa_starts = 8'(blk_start);
    stat_ends_skipped = '0;
    for (int i = 0; i < N; i++) begin
      stat_ecdsa_starts = stat_ecdsa_starts + 8'(vstarts[i]);
      if (vskip_valid[i]) stat_ends_skipped = stat_ends_skipped + 8'(vskip[i]);
    end
  end
endmodule
