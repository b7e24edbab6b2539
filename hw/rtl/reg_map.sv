// AXI-Lite register map of the block processor (hw/DESIGN.md section 4). The
// addresses, bit fields and codes come from bmac_regs_pkg, generated from
// hw/gen/regmap.toml.
//
// Results arrive one transaction at a time (res_fifo) and are collected per
// block into one of two banks. A finished block stays on display until the
// host writes 1 to CONTROL. Meanwhile the next block fills the other bank.
// When both banks are full, res_ready drops and the pipeline waits.
// `blk_start` pulses when the protocol processor has parsed a block's HEADER
// section; the block's latency is measured from there to its last result.
module reg_map
#(
    parameter int N      = 4,
    parameter int M      = 2,
    parameter int ORGS   = 8,
    parameter int MAX_TX = 1024   // power of two, at least 32
) (
    input  logic        clk,
    input  logic        rst_n,
    input  logic        res_valid,
    output logic        res_ready,
    input  bmac_pkg::res_rec_t res,
    input  logic        blk_start,
    input  logic [7:0]  stat_ecdsa_starts,
    input  logic [7:0]  stat_ends_skipped,
    input  logic        stat_mvcc_fail,
    input  logic        kv_overflow,
    input  logic        proto_error,
    // AXI-Lite slave (32-bit data, 16-bit addresses).
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
    output logic        irq             // a result is on display
);
  localparam int TW = $clog2(MAX_TX);
  localparam int CW = MAX_TX / bmac_regs_pkg::REG_CODES_PER_WORD;   // code words per bank
  localparam int VW = MAX_TX / bmac_regs_pkg::REG_VALID_PER_WORD;   // valid-bitmap words per bank
  // The bank indexing below assumes 4 codes and 32 bitmap bits per word.
  if (bmac_regs_pkg::REG_CODES_PER_WORD != 4 || bmac_regs_pkg::REG_VALID_PER_WORD != 32) begin : g_window_layout
    $error("reg_map: hw/gen/regmap.toml changed the result-window layout");
  end

  // ----------------------------------------------------------------- banks
  logic [31:0]   codes [2 * CW];
  logic [31:0]   vbits [2 * VW];
  logic [1:0]    full;
  logic          wb, rb;           // bank being filled, bank on display
  logic [63:0]   b_blk   [2];
  logic [TW:0]   b_count [2];
  logic [TW:0]   b_valid [2];
  logic          b_ok    [2];
  logic [31:0]   b_lat   [2];
  logic          clearing;         // the fill bank's bitmap is being cleared
  logic [$clog2(VW+1)-1:0] clr_idx;
  logic          fresh;            // the fill bank has no transaction yet

  // Block start times, oldest first.
  logic [63:0] cycles;
  logic        st_valid;
  logic [31:0] st_time;
  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W(32), .DEPTH(8)) u_starts (
      .clk, .rst_n, .in_valid(blk_start), .in_ready(), .in_data(cycles[31:0]),
      .out_valid(st_valid), .out_ready(res_valid && res_ready && res.last), .out_data(st_time), .count()
  );
  /* verilator lint_on PINCONNECTEMPTY */

  assign res_ready = !full[wb] && !clearing;
  assign irq       = full[rb];

  logic [TW-1:0] idx;
  assign idx = res.tx_idx[TW-1:0];

  // ------------------------------------------------------------ statistics
  logic [31:0] s_blocks, s_txs, s_valid, s_ecdsa, s_skipped, s_mvcc;
  logic        sticky_kv, sticky_proto;

  // --------------------------------------------------------------- AXI-Lite
  logic        wr_fire, release_req;
  assign s_axil_awready = s_axil_awvalid && s_axil_wvalid && !s_axil_bvalid;
  assign s_axil_wready  = s_axil_awready;
  assign s_axil_bresp   = 2'b00;
  assign s_axil_rresp   = 2'b00;
  assign wr_fire        = s_axil_awready;
  assign release_req    = wr_fire && s_axil_awaddr == bmac_regs_pkg::REG_CONTROL && s_axil_wstrb[0]
                          && s_axil_wdata[bmac_regs_pkg::CONTROL_RELEASE_LSB];

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      full         <= '0;
      wb           <= 1'b0;
      rb           <= 1'b0;
      clearing     <= 1'b1;
      clr_idx      <= '0;
      fresh        <= 1'b1;
      cycles       <= '0;
      s_blocks     <= '0;
      s_txs        <= '0;
      s_valid      <= '0;
      s_ecdsa      <= '0;
      s_skipped    <= '0;
      s_mvcc       <= '0;
      sticky_kv    <= 1'b0;
      sticky_proto <= 1'b0;
      s_axil_bvalid <= 1'b0;
      for (int b = 0; b < 2; b++) begin
        b_blk[b]   <= '0;
        b_count[b] <= '0;
        b_valid[b] <= '0;
        b_ok[b]    <= 1'b0;
        b_lat[b]   <= '0;
      end
    end else begin
      cycles    <= cycles + 64'd1;
      s_ecdsa   <= s_ecdsa + 32'(stat_ecdsa_starts);
      s_skipped <= s_skipped + 32'(stat_ends_skipped);
      s_mvcc    <= s_mvcc + 32'(stat_mvcc_fail);
      if (kv_overflow) sticky_kv <= 1'b1;
      if (proto_error) sticky_proto <= 1'b1;

      // Clearing the bitmap of the bank about to be filled, one word per cycle, once that bank is free (it may
      // still be on display).
      if (clearing && !full[wb]) begin
        if (clr_idx == ($clog2(VW+1))'(VW)) clearing <= 1'b0;
        else clr_idx <= clr_idx + 1'b1;
      end

      if (res_valid && res_ready) begin
        if (fresh) b_valid[wb] <= '0;
        fresh       <= 1'b0;
        b_blk[wb]   <= res.blk;
        b_ok[wb]    <= res.block_valid;
        b_count[wb] <= (fresh ? '0 : b_count[wb]) + 1'b1;
        if (res.code == bmac_regs_pkg::CODE_VALID) b_valid[wb] <= (fresh ? '0 : b_valid[wb]) + 1'b1;
        s_txs <= s_txs + 32'd1;
        if (res.code == bmac_regs_pkg::CODE_VALID) s_valid <= s_valid + 32'd1;
        if (res.last) begin
          full[wb]    <= 1'b1;
          b_lat[wb]   <= st_valid ? cycles[31:0] - st_time : 32'd0;
          wb          <= ~wb;
          fresh       <= 1'b1;
          clearing    <= 1'b1;
          clr_idx     <= '0;
          s_blocks    <= s_blocks + 32'd1;
        end
      end

      if (release_req && full[rb]) begin
        full[rb] <= 1'b0;
        rb       <= ~rb;
      end
      if (wr_fire) s_axil_bvalid <= 1'b1;
      else if (s_axil_bready) s_axil_bvalid <= 1'b0;
    end
  end

  // Bank memories (written as results arrive, cleared per block for the bitmap).
  always_ff @(posedge clk) begin
    if (clearing && !full[wb] && clr_idx != ($clog2(VW+1))'(VW))
      vbits[{wb, clr_idx[$clog2(VW)-1:0]}] <= '0;
    if (res_valid && res_ready) begin
      codes[{wb, idx[TW-1:2]}][8*idx[1:0] +: 8] <= res.code;
      if (res.code == bmac_regs_pkg::CODE_VALID) vbits[{wb, idx[TW-1:5]}][idx[4:0]] <= 1'b1;
    end
  end

  // CONFIG and STATUS, assembled from their fields.
  logic [31:0] config_word, status_word;
  always_comb begin
    config_word = '0;
    config_word[bmac_regs_pkg::CONFIG_N_LSB +: bmac_regs_pkg::CONFIG_N_WIDTH]             = bmac_regs_pkg::CONFIG_N_WIDTH'(N);
    config_word[bmac_regs_pkg::CONFIG_M_LSB +: bmac_regs_pkg::CONFIG_M_WIDTH]             = bmac_regs_pkg::CONFIG_M_WIDTH'(M);
    config_word[bmac_regs_pkg::CONFIG_ORGS_LSB +: bmac_regs_pkg::CONFIG_ORGS_WIDTH]       = bmac_regs_pkg::CONFIG_ORGS_WIDTH'(ORGS);
    config_word[bmac_regs_pkg::CONFIG_TX_BITS_LSB +: bmac_regs_pkg::CONFIG_TX_BITS_WIDTH] = bmac_regs_pkg::CONFIG_TX_BITS_WIDTH'(TW);
    status_word = '0;
    status_word[bmac_regs_pkg::STATUS_READY_LSB]       = full[rb];
    status_word[bmac_regs_pkg::STATUS_BLOCK_VALID_LSB] = b_ok[rb] & full[rb];
    status_word[bmac_regs_pkg::STATUS_KV_OVERFLOW_LSB] = sticky_kv;
    status_word[bmac_regs_pkg::STATUS_PROTO_ERROR_LSB] = sticky_proto;
  end

  // Reads: address taken, data the next cycle.
  logic        rd_pending;
  logic [15:0] rd_addr;
  assign s_axil_arready = !rd_pending && !s_axil_rvalid;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      rd_pending    <= 1'b0;
      rd_addr       <= '0;
      s_axil_rvalid <= 1'b0;
      s_axil_rdata  <= '0;
    end else begin
      if (s_axil_arvalid && s_axil_arready) begin
        rd_pending <= 1'b1;
        rd_addr    <= s_axil_araddr;
      end
      if (rd_pending) begin
        rd_pending    <= 1'b0;
        s_axil_rvalid <= 1'b1;
        s_axil_rdata  <= 32'h0;
        if (rd_addr >= bmac_regs_pkg::REG_CODES && rd_addr < bmac_regs_pkg::REG_CODES + 16'(4 * CW))
          s_axil_rdata <= codes[{rb, rd_addr[$clog2(CW)+1:2]}];
        else if (rd_addr >= bmac_regs_pkg::REG_VALID && rd_addr < bmac_regs_pkg::REG_VALID + 16'(4 * VW))
          s_axil_rdata <= vbits[{rb, rd_addr[$clog2(VW)+1:2]}];
        else begin
          unique case (rd_addr)
            bmac_regs_pkg::REG_MAGIC:          s_axil_rdata <= bmac_regs_pkg::MAGIC_VALUE;
            bmac_regs_pkg::REG_CONFIG:         s_axil_rdata <= config_word;
            bmac_regs_pkg::REG_STATUS:         s_axil_rdata <= status_word;
            bmac_regs_pkg::REG_BLOCK_LO:       s_axil_rdata <= b_blk[rb][31:0];
            bmac_regs_pkg::REG_BLOCK_HI:       s_axil_rdata <= b_blk[rb][63:32];
            bmac_regs_pkg::REG_TX_COUNT:       s_axil_rdata <= 32'(b_count[rb]);
            bmac_regs_pkg::REG_VALID_COUNT:    s_axil_rdata <= 32'(b_valid[rb]);
            bmac_regs_pkg::REG_LATENCY:        s_axil_rdata <= b_lat[rb];
            bmac_regs_pkg::REG_STAT_BLOCKS:    s_axil_rdata <= s_blocks;
            bmac_regs_pkg::REG_STAT_TXS:       s_axil_rdata <= s_txs;
            bmac_regs_pkg::REG_STAT_VALID:     s_axil_rdata <= s_valid;
            bmac_regs_pkg::REG_STAT_ECDSA:     s_axil_rdata <= s_ecdsa;
            bmac_regs_pkg::REG_STAT_ENDS_SKIPPED: s_axil_rdata <= s_skipped;
            bmac_regs_pkg::REG_STAT_CYCLES_LO: s_axil_rdata <= cycles[31:0];
            bmac_regs_pkg::REG_STAT_CYCLES_HI: s_axil_rdata <= cycles[63:32];
            bmac_regs_pkg::REG_STAT_MVCC_FAIL: s_axil_rdata <= s_mvcc;
            default:  s_axil_rdata <= 32'h0;
          endcase
        end
      end else if (s_axil_rvalid && s_axil_rready) s_axil_rvalid <= 1'b0;
    end
  end

  wire unused = ^{s_axil_wdata[31:1], s_axil_wstrb[3:1], res.tx_idx[15:TW], rd_addr[1:0]};
endmodule
