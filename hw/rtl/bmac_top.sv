// The BMac card (hw/DESIGN.md): the protocol processor (PP_LANES lanes) on
// the network stream, the five FIFOs, the block processor and the AXI-Lite
// register map. `irq` is high while a result waits to be read (STATUS bit 0).
module bmac_top
#(
    parameter int N          = 8,
    parameter int M          = 2,
    parameter int ORGS       = 8,
    parameter int WORD       = 64,
    parameter int KV_ENTRIES = 8192,
    parameter int KV_PROBES  = 32,
    parameter int ID_SLOTS   = 64,
    parameter int ID_BYTES   = 2048,
    parameter int MAX_TX     = 1024,
    parameter int PP_LANES   = 2
) (
    input  logic        clk,
    input  logic        rst_n,
    input  logic [63:0] s_axis_tdata,
    input  logic [7:0]  s_axis_tkeep,
    input  logic        s_axis_tlast,
    input  logic        s_axis_tvalid,
    output logic        s_axis_tready,
    input  logic [15:0] s_axil_awaddr,
    input  logic        s_axil_awvalid,
    output logic        s_axil_awready,
    input  logic [31:0] s_axil_wdata,
    input  logic [3:0]  s_axil_wstrb,
    input  logic        s_axil_wvalid,
    output logic        s_axil_wready,
    output logic [1:0]  s_axil_bresp,
    output logic        s_axil_bvalid,
    input  logic        s_axil_bready,
    input  logic [15:0] s_axil_araddr,
    input  logic        s_axil_arvalid,
    output logic        s_axil_arready,
    output logic [31:0] s_axil_rdata,
    output logic [1:0]  s_axil_rresp,
    output logic        s_axil_rvalid,
    input  logic        s_axil_rready,
    output logic        irq
);
  // Protocol processor outputs and FIFO inputs.
  logic pb_valid, pb_ready, pt_valid, pt_ready, pe_valid, pe_ready, pr_valid, pr_ready, pw_valid, pw_ready;
  bmac_pkg::block_rec_t pb;
  bmac_pkg::tx_rec_t pt;
  bmac_pkg::end_rec_t pe;
  bmac_pkg::rd_rec_t pr;
  bmac_pkg::wr_rec_t pw;
  logic       blk_start, proto_error;
  logic       pol_we, pol_flush;
  logic [7:0] pol_id;
  logic [8*bmac_pkg::POL_BYTES-1:0] pol_prog;

  pp_lanes #(.LANES(PP_LANES), .ID_SLOTS(ID_SLOTS), .ID_BYTES(ID_BYTES)) u_pp (
      .clk, .rst_n, .s_axis_tdata, .s_axis_tkeep, .s_axis_tlast, .s_axis_tvalid, .s_axis_tready,
      .blk_valid(pb_valid), .blk_ready(pb_ready), .blk_rec(pb),
      .tx_valid(pt_valid), .tx_ready(pt_ready), .tx(pt),
      .end_valid(pe_valid), .end_ready(pe_ready), .end_out(pe),
      .rd_valid(pr_valid), .rd_ready(pr_ready), .rd(pr),
      .wr_valid(pw_valid), .wr_ready(pw_ready), .wr(pw),
      .blk_start, .proto_error, .pol_we, .pol_flush, .pol_id, .pol_prog
  );

  // The five FIFOs between the processors. rdset/wrset hold a transaction's whole read/write set (48
  // annotations at most), so the protocol processor never waits on a transaction the block processor has not
  // seen yet. Reads and writes leave only when MVCC takes them, after validation: with more than 8 validators
  // the sets of every transaction in flight (2 per validator, pipelined) must fit, or the validators starve.
  localparam int SET_DEPTH = (N > 8) ? (1 << $clog2(16 * N)) : 64;
  logic qb_valid, qb_ready, qt_valid, qt_ready, qe_valid, qe_ready, qr_valid, qr_ready, qw_valid, qw_ready;
  bmac_pkg::block_rec_t qb;
  bmac_pkg::tx_rec_t qt;
  bmac_pkg::end_rec_t qe;
  bmac_pkg::rd_rec_t qr;
  bmac_pkg::wr_rec_t qw;
  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W($bits(pb)), .DEPTH(4)) u_block_fifo (
      .clk, .rst_n, .in_valid(pb_valid), .in_ready(pb_ready), .in_data(pb),
      .out_valid(qb_valid), .out_ready(qb_ready), .out_data(qb), .count());
  sync_fifo #(.W($bits(pt)), .DEPTH(8)) u_tx_fifo (
      .clk, .rst_n, .in_valid(pt_valid), .in_ready(pt_ready), .in_data(pt),
      .out_valid(qt_valid), .out_ready(qt_ready), .out_data(qt), .count());
  sync_fifo #(.W($bits(pe)), .DEPTH(16)) u_ends_fifo (
      .clk, .rst_n, .in_valid(pe_valid), .in_ready(pe_ready), .in_data(pe),
      .out_valid(qe_valid), .out_ready(qe_ready), .out_data(qe), .count());
  sync_fifo #(.W($bits(pr)), .DEPTH(SET_DEPTH)) u_rdset_fifo (
      .clk, .rst_n, .in_valid(pr_valid), .in_ready(pr_ready), .in_data(pr),
      .out_valid(qr_valid), .out_ready(qr_ready), .out_data(qr), .count());
  sync_fifo #(.W($bits(pw)), .DEPTH(SET_DEPTH)) u_wrset_fifo (
      .clk, .rst_n, .in_valid(pw_valid), .in_ready(pw_ready), .in_data(pw),
      .out_valid(qw_valid), .out_ready(qw_ready), .out_data(qw), .count());
  /* verilator lint_on PINCONNECTEMPTY */

  logic       res_valid, res_ready;
  bmac_pkg::res_rec_t res;
  logic [7:0] stat_ecdsa_starts, stat_ends_skipped;
  logic       stat_mvcc_fail, kv_overflow;

  block_processor #(
      .N(N), .M(M), .ORGS(ORGS), .WORD(WORD), .KV_ENTRIES(KV_ENTRIES), .KV_PROBES(KV_PROBES)
  ) u_bp (
      .clk, .rst_n,
      .blk_valid(qb_valid), .blk_ready(qb_ready), .blk_rec(qb),
      .tx_valid(qt_valid), .tx_ready(qt_ready), .tx(qt),
      .end_valid(qe_valid), .end_ready(qe_ready), .end_in(qe),
      .rd_valid(qr_valid), .rd_ready(qr_ready), .rd(qr),
      .wr_valid(qw_valid), .wr_ready(qw_ready), .wr(qw),
      .res_valid, .res_ready, .res,
      .pol_we, .pol_flush, .pol_id, .pol_prog,
      .stat_ecdsa_starts, .stat_ends_skipped, .stat_mvcc_fail, .kv_overflow
  );

  reg_map #(.N(N), .M(M), .ORGS(ORGS), .MAX_TX(MAX_TX)) u_regs (
      .clk, .rst_n, .res_valid, .res_ready, .res, .blk_start,
      .stat_ecdsa_starts, .stat_ends_skipped, .stat_mvcc_fail, .kv_overflow, .proto_error,
      .s_axil_awaddr, .s_axil_awvalid, .s_axil_awready, .s_axil_wdata, .s_axil_wstrb, .s_axil_wvalid,
      .s_axil_wready, .s_axil_bresp, .s_axil_bvalid, .s_axil_bready, .s_axil_araddr, .s_axil_arvalid,
      .s_axil_arready, .s_axil_rdata, .s_axil_rresp, .s_axil_rvalid, .s_axil_rready, .irq
  );
endmodule
