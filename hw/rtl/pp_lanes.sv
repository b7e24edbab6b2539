// LANES protocol processors working on different sections at once, with their
// records merged back into stream order (hw/DESIGN.md section 3).
//
// One lane handles one byte per cycle. A transaction's reconstructed envelope
// (about 4 KB, most of it identities inserted from the cache) keeps a lane
// busy for about as many cycles. Several lanes keep up with many validators.
//
// Router: it looks at each frame's first six beats (up to the L7 section
// index) and picks the lane(s):
//   - ID_SYNC and HEADER go to every lane, since each lane keeps its own
//     identity cache and header bytes;
//   - METADATA, STATE_SYNC and POLICY_SYNC go to lane 0 (the policy table
//     is written from lane 0 only);
//   - TX section i goes to lane i mod LANES;
//   - anything else goes to lane 0, which drops it.
// Each lane has an input FIFO, so the router can move on to the next frame
// while a lane is still busy.
//
// Merger: the router records, for every section that produces records, which
// lane got it. Records then leave from that lane only, until the lane's
// end-of-section token arrives and the token's record counts have been
// forwarded. Then the next section's lane takes over. The block processor thus
// sees exactly the record order of a single protocol processor.
module pp_lanes
#(
    parameter int          LANES    = 2,
    parameter logic [15:0] UDP_PORT = 16'd7063,
    parameter int          ID_SLOTS = 64,
    parameter int          ID_BYTES = 2048,
    parameter int          IN_DEPTH = 512    // beats of input buffer per lane
) (
    input  logic        clk,
    input  logic        rst_n,
    input  logic [63:0] s_axis_tdata,
    input  logic [7:0]  s_axis_tkeep,
    input  logic        s_axis_tlast,
    input  logic        s_axis_tvalid,
    output logic        s_axis_tready,
    output logic        blk_valid,
    input  logic        blk_ready,
    output bmac_pkg::block_rec_t blk_rec,
    output logic        tx_valid,
    input  logic        tx_ready,
    output bmac_pkg::tx_rec_t tx,
    output logic        end_valid,
    input  logic        end_ready,
    output bmac_pkg::end_rec_t end_out,
    output logic        rd_valid,
    input  logic        rd_ready,
    output bmac_pkg::rd_rec_t rd,
    output logic        wr_valid,
    input  logic        wr_ready,
    output bmac_pkg::wr_rec_t wr,
    output logic        blk_start,
    output logic        proto_error,
    // Policy-table writes (POLICY_SYNC sections), from lane 0.
    output logic        pol_we,
    output logic        pol_flush,
    output logic [7:0]  pol_id,
    output logic [8*bmac_pkg::POL_BYTES-1:0] pol_prog
);
  localparam int LW = (LANES > 1) ? $clog2(LANES) : 1;

  // ------------------------------------------------------------------ router
  typedef struct packed {
    logic [63:0] data;
    logic [7:0]  keep;
    logic        last;
  } beat_t;

  typedef enum logic [1:0] {R_COLLECT, R_FLUSH, R_PASS} r_state_t;
  r_state_t      rst;
  logic [63:0]   rbuf_data [6];  // the buffered beats, one array per beat_t field
  logic [7:0]    rbuf_keep [6];
  logic          rbuf_last [6];
  logic [2:0]    rcount;        // beats collected
  logic [2:0]    rflush;        // next buffered beat to push
  logic          rlast_seen;    // the frame ended inside the buffer
  logic [LANES-1:0] rmask;      // target lanes of the current frame

  logic [LANES-1:0] in_valid_l, in_ready_l;
  beat_t            in_beat;

  // Bytes of the buffered header (beat b, lane k = byte 8b + k).
  function automatic logic [7:0] hb(input int i);
    hb = rbuf_data[i / 8][8 * (i % 8) +: 8];
  endfunction

  logic        is_bmac;
  logic [7:0]  sec_type;
  logic [15:0] sec_index;
  always_comb begin
    is_bmac   = rcount == 3'd6 && hb(12) == 8'h08 && hb(13) == 8'h00 && hb(14) == 8'h45 && hb(23) == 8'd17 &&
                hb(36) == UDP_PORT[15:8] && hb(37) == UDP_PORT[7:0] && hb(42) == 8'd1;
    sec_type  = hb(43);
    sec_index = {hb(44), hb(45)};
  end

  logic [LANES-1:0] route_mask;
  logic             route_token;
  logic [LW-1:0]    route_lane;
  always_comb begin
    route_mask  = '0;
    route_token = 1'b0;
    route_lane  = '0;
    if (!is_bmac) route_mask[0] = 1'b1;
    else begin
      unique case (sec_type)
        8'd0, 8'd1: route_mask = '1;                        // ID_SYNC, HEADER: every lane
        8'd2: begin                                         // TX: by index
          route_lane = LW'(32'(sec_index) % LANES);
          route_mask[route_lane] = 1'b1;
          route_token = 1'b1;
        end
        8'd3, 8'd4: begin                                   // METADATA, STATE_SYNC
          route_mask[0] = 1'b1;
          route_token = 1'b1;
        end
        8'd5: route_mask[0] = 1'b1;                         // POLICY_SYNC: no records
        default: route_mask[0] = 1'b1;                      // the lane drops it
      endcase
    end
  end

  // Order of the sections that produce records.
  logic          ord_in, ord_in_ready, ord_valid, ord_pop;
  logic [LW-1:0] ord_lane;
  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W(LW), .DEPTH(64)) u_order (
      .clk, .rst_n, .in_valid(ord_in), .in_ready(ord_in_ready), .in_data(route_lane),
      .out_valid(ord_valid), .out_ready(ord_pop), .out_data(ord_lane), .count()
  );
  /* verilator lint_on PINCONNECTEMPTY */

  logic all_ready;
  assign all_ready = (in_ready_l & rmask) == rmask;
  logic decide;
  // A section with records waits until the order FIFO has room, so no section's turn is ever lost.
  assign decide = rst == R_COLLECT && (rcount == 3'd6 || rlast_seen) && (ord_in_ready || !route_token);
  assign ord_in = decide && route_token;

  always_comb begin
    s_axis_tready = 1'b0;
    in_valid_l    = '0;
    in_beat.data = rbuf_data[rflush];
    in_beat.keep = rbuf_keep[rflush];
    in_beat.last = rbuf_last[rflush];
    unique case (rst)
      R_COLLECT: s_axis_tready = rcount != 3'd6 && !rlast_seen;
      R_FLUSH: in_valid_l = all_ready ? rmask : '0;
      R_PASS: begin
        in_beat.data = s_axis_tdata;
        in_beat.keep = s_axis_tkeep;
        in_beat.last = s_axis_tlast;
        s_axis_tready = all_ready;
        in_valid_l    = (all_ready && s_axis_tvalid) ? rmask : '0;
      end
      default: ;
    endcase
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      rst        <= R_COLLECT;
      rcount     <= '0;
      rflush     <= '0;
      rlast_seen <= 1'b0;
      rmask      <= '0;
      for (int i = 0; i < 6; i++) begin
        rbuf_data[i] <= '0;
        rbuf_keep[i] <= '0;
        rbuf_last[i] <= 1'b0;
      end
    end else begin
      unique case (rst)
        R_COLLECT: begin
          if (s_axis_tvalid && s_axis_tready) begin
            rbuf_data[rcount] <= s_axis_tdata;
            rbuf_keep[rcount] <= s_axis_tkeep;
            rbuf_last[rcount] <= s_axis_tlast;
            rcount       <= rcount + 3'd1;
            rlast_seen   <= s_axis_tlast;
          end
          if (decide) begin
            rmask  <= route_mask;
            rflush <= '0;
            rst    <= R_FLUSH;
          end
        end
        R_FLUSH: if (all_ready) begin
          rflush <= rflush + 3'd1;
          if (rflush + 3'd1 == rcount) begin
            rst        <= rlast_seen ? R_COLLECT : R_PASS;
            rcount     <= '0;
            rlast_seen <= 1'b0;
          end
        end
        R_PASS: if (s_axis_tvalid && all_ready && s_axis_tlast) rst <= R_COLLECT;
        default: rst <= R_COLLECT;
      endcase
    end
  end

  // ------------------------------------------------------------------- lanes
  logic [LANES-1:0] l_blk_valid, l_tx_valid, l_end_valid, l_rd_valid, l_wr_valid;
  logic [LANES-1:0] l_blk_ready, l_tx_ready, l_end_ready, l_rd_ready, l_wr_ready;
  // Each lane's records, as plain vectors of the record widths (arrays of structs are not read alike by
  // every synthesis tool).
  logic [$bits(blk_rec)-1:0]  l_blk [LANES];
  logic [$bits(tx)-1:0]       l_tx  [LANES];
  logic [$bits(end_out)-1:0]  l_end [LANES];
  logic [$bits(rd)-1:0]       l_rd  [LANES];
  logic [$bits(wr)-1:0]       l_wr  [LANES];
  logic [LANES-1:0] l_blk_start, l_err, l_pol_we, l_pol_flush;
  logic [7:0]             l_pol_id   [LANES];
  logic [8*bmac_pkg::POL_BYTES-1:0] l_pol_prog [LANES];
  logic [LANES-1:0] t_valid, t_pop;
  logic [7:0]       t_rd   [LANES];
  logic [7:0]       t_wr   [LANES];
  logic [2:0]       t_ends [LANES];
  logic             t_tx   [LANES];
  logic             t_blk  [LANES];

  for (genvar l = 0; l < LANES; l++) begin : g_lane
    logic [63:0] q_data;  // the lane's beat, by beat_t field
    logic [7:0]  q_keep;
    logic        q_last;
    logic  q_valid, q_ready;
    /* verilator lint_off PINCONNECTEMPTY */
    sync_fifo #(.W($bits(in_beat)), .DEPTH(IN_DEPTH)) u_in (
        .clk, .rst_n, .in_valid(in_valid_l[l]), .in_ready(in_ready_l[l]), .in_data(in_beat),
        .out_valid(q_valid), .out_ready(q_ready), .out_data({q_data, q_keep, q_last}), .count()
    );
    /* verilator lint_on PINCONNECTEMPTY */

    // Lane outputs go through small FIFOs, so a lane can finish a section while another lane's turn lasts.
    logic bq_in_ready, tq_in_ready, eq_in_ready, rq_in_ready, wq_in_ready;
    logic pb_valid, pt_valid, pe_valid, pr_valid, pw_valid;
    bmac_pkg::block_rec_t pb;
    bmac_pkg::tx_rec_t pt;
    bmac_pkg::end_rec_t pe;
    bmac_pkg::rd_rec_t pr;
    bmac_pkg::wr_rec_t pw;
    logic       s_valid, s_ready;
    logic [7:0] s_rd, s_wr;
    logic [2:0] s_ends;
    logic       s_tx, s_blk;

    protocol_processor #(.UDP_PORT(UDP_PORT), .ID_SLOTS(ID_SLOTS), .ID_BYTES(ID_BYTES)) u_pp (
        .clk, .rst_n, .s_axis_tdata(q_data), .s_axis_tkeep(q_keep), .s_axis_tlast(q_last),
        .s_axis_tvalid(q_valid), .s_axis_tready(q_ready),
        .blk_valid(pb_valid), .blk_ready(bq_in_ready), .blk_rec(pb),
        .tx_valid(pt_valid), .tx_ready(tq_in_ready), .tx(pt),
        .end_valid(pe_valid), .end_ready(eq_in_ready), .end_out(pe),
        .rd_valid(pr_valid), .rd_ready(rq_in_ready), .rd(pr),
        .wr_valid(pw_valid), .wr_ready(wq_in_ready), .wr(pw),
        .blk_start(l_blk_start[l]), .proto_error(l_err[l]),
        .sec_valid(s_valid), .sec_ready(s_ready), .sec_rd(s_rd), .sec_wr(s_wr), .sec_ends(s_ends),
        .sec_tx(s_tx), .sec_blk(s_blk),
        .pol_we(l_pol_we[l]), .pol_flush(l_pol_flush[l]), .pol_id(l_pol_id[l]), .pol_prog(l_pol_prog[l])
    );

    /* verilator lint_off PINCONNECTEMPTY */
    sync_fifo #(.W($bits(pb)), .DEPTH(2)) u_bq (
        .clk, .rst_n, .in_valid(pb_valid), .in_ready(bq_in_ready), .in_data(pb),
        .out_valid(l_blk_valid[l]), .out_ready(l_blk_ready[l]), .out_data(l_blk[l]), .count());
    sync_fifo #(.W($bits(pt)), .DEPTH(2)) u_tq (
        .clk, .rst_n, .in_valid(pt_valid), .in_ready(tq_in_ready), .in_data(pt),
        .out_valid(l_tx_valid[l]), .out_ready(l_tx_ready[l]), .out_data(l_tx[l]), .count());
    sync_fifo #(.W($bits(pe)), .DEPTH(8)) u_eq (
        .clk, .rst_n, .in_valid(pe_valid), .in_ready(eq_in_ready), .in_data(pe),
        .out_valid(l_end_valid[l]), .out_ready(l_end_ready[l]), .out_data(l_end[l]), .count());
    sync_fifo #(.W($bits(pr)), .DEPTH(64)) u_rq (
        .clk, .rst_n, .in_valid(pr_valid), .in_ready(rq_in_ready), .in_data(pr),
        .out_valid(l_rd_valid[l]), .out_ready(l_rd_ready[l]), .out_data(l_rd[l]), .count());
    sync_fifo #(.W($bits(pw)), .DEPTH(64)) u_wq (
        .clk, .rst_n, .in_valid(pw_valid), .in_ready(wq_in_ready), .in_data(pw),
        .out_valid(l_wr_valid[l]), .out_ready(l_wr_ready[l]), .out_data(l_wr[l]), .count());
    sync_fifo #(.W(21), .DEPTH(4)) u_tok (
        .clk, .rst_n, .in_valid(s_valid), .in_ready(s_ready), .in_data({s_rd, s_wr, s_ends, s_tx, s_blk}),
        .out_valid(t_valid[l]), .out_ready(t_pop[l]), .out_data({t_rd[l], t_wr[l], t_ends[l], t_tx[l], t_blk[l]}),
        .count());
    /* verilator lint_on PINCONNECTEMPTY */

    // POLICY_SYNC goes to lane 0 only: the other lanes never write the policy table.
    if (l != 0) begin : g_no_pol
      wire unused_pol = ^{l_pol_we[l], l_pol_flush[l], l_pol_id[l], l_pol_prog[l]};
    end
  end

  assign blk_start   = l_blk_start[0];   // every lane sees each HEADER; lane 0 reports it
  wire unused = ^l_blk_start;
  assign proto_error = |l_err;
  assign pol_we      = l_pol_we[0];
  assign pol_flush   = l_pol_flush[0];
  assign pol_id      = l_pol_id[0];
  assign pol_prog    = l_pol_prog[0];

  // ------------------------------------------------------------------ merger
  logic [7:0] m_rd, m_wr;      // records of the current section forwarded so far
  logic [2:0] m_ends;
  logic       m_tx, m_blk;

  logic [LW-1:0] cur;
  assign cur = ord_lane;

  // Before the token arrives, every record the lane has written belongs to the current section. After it, the
  // token's counts bound what is forwarded.
  logic tok;
  assign tok = ord_valid && t_valid[cur];
  logic may_rd, may_wr, may_end, may_tx, may_blk;
  assign may_rd  = ord_valid && (!tok || m_rd != t_rd[cur]);
  assign may_wr  = ord_valid && (!tok || m_wr != t_wr[cur]);
  assign may_end = ord_valid && (!tok || m_ends != t_ends[cur]);
  assign may_tx  = ord_valid && (!tok || m_tx != t_tx[cur]);
  assign may_blk = ord_valid && (!tok || m_blk != t_blk[cur]);

  assign rd_valid  = may_rd && l_rd_valid[cur];
  assign wr_valid  = may_wr && l_wr_valid[cur];
  assign end_valid = may_end && l_end_valid[cur];
  assign tx_valid  = may_tx && l_tx_valid[cur];
  assign blk_valid = may_blk && l_blk_valid[cur];
  assign rd      = l_rd[cur];
  assign wr      = l_wr[cur];
  assign end_out = l_end[cur];
  assign tx      = l_tx[cur];
  assign blk_rec = l_blk[cur];

  always_comb begin
    l_rd_ready  = '0;
    l_wr_ready  = '0;
    l_end_ready = '0;
    l_tx_ready  = '0;
    l_blk_ready = '0;
    l_rd_ready[cur]  = rd_valid && rd_ready;
    l_wr_ready[cur]  = wr_valid && wr_ready;
    l_end_ready[cur] = end_valid && end_ready;
    l_tx_ready[cur]  = tx_valid && tx_ready;
    l_blk_ready[cur] = blk_valid && blk_ready;
  end

  logic section_done;
  assign section_done = tok && m_rd == t_rd[cur] && m_wr == t_wr[cur] && m_ends == t_ends[cur] &&
                        m_tx == t_tx[cur] && m_blk == t_blk[cur];
  assign ord_pop = section_done;
  always_comb begin
    t_pop = '0;
    t_pop[cur] = section_done;
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      m_rd   <= '0;
      m_wr   <= '0;
      m_ends <= '0;
      m_tx   <= 1'b0;
      m_blk  <= 1'b0;
    end else if (section_done) begin
      m_rd   <= '0;
      m_wr   <= '0;
      m_ends <= '0;
      m_tx   <= 1'b0;
      m_blk  <= 1'b0;
    end else begin
      if (rd_valid && rd_ready) m_rd <= m_rd + 8'd1;
      if (wr_valid && wr_ready) m_wr <= m_wr + 8'd1;
      if (end_valid && end_ready) m_ends <= m_ends + 3'd1;
      if (tx_valid && tx_ready) m_tx <= 1'b1;
      if (blk_valid && blk_ready) m_blk <= 1'b1;
    end
  end
endmodule
