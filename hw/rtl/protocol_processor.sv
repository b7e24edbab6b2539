// BMac protocol processor (hw/DESIGN.md sections 2 and 3).
//
// Input: Ethernet frames on AXI-Stream, one BMac section per UDP datagram.
// Output: the records of block_fifo, tx_fifo, ends_fifo, rdset_fifo and
// wrset_fifo. It works one byte per cycle after axis_to_bytes:
//
//   header parser ─► annotation FIFOs (LOC, field pointers, HASH per slot)
//   DataInserter: stripped payload + identities from the cache (BRAM)
//     = reconstructed bytes, one token per cycle
//   HashCalculator: one sha256_engine per signature slot, fed with the bytes
//     inside that slot's regions
//   DataExtractor / DataProcessor: der_parser for SIG, a key sha256_engine for
//     keys, version_parser for versions
//   DataWriter: once a section is complete, its tx/endorsement/block record.
//     Read and write records leave as soon as each key's digest is ready.
//
// Identity cache: ID_SLOTS slots of ID_BYTES bytes plus the public key. They
// are filled by ID_SYNC sections. A 64K-entry map takes an identity id to its
// slot. Flushing bumps an epoch, so stale map entries stop matching.
//
// Policy table: a POLICY_SYNC section (exactly POL_BYTES payload bytes, no
// annotations) leaves through the `pol_*` strobe when it completes; the block
// processor's policy_table stores it under the section index.
//
// A section that breaks the protocol (bad version, an unknown identity, a
// region outside the payload, a truncated frame) is dropped and raises
// `proto_error`. Records of that section may already have left, so the host
// must reset the block processor. Frames that are not BMac datagrams are
// dropped silently.
module protocol_processor
#(
    parameter logic [15:0] UDP_PORT    = 16'd7063,
    parameter int          ID_SLOTS    = 64,
    parameter int          ID_BYTES    = 2048,
    parameter int          LOC_DEPTH   = 8,
    parameter int          FIELD_DEPTH = 64,
    parameter int          HASH_DEPTH  = 4,
    parameter int          HDR_MAX     = 128
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
    output logic        blk_start,     // one-cycle strobe: a HEADER section was parsed
    output logic        proto_error,   // one-cycle strobe: a section was dropped
    // End of every TX, METADATA and STATE_SYNC section (dropped ones included), with the records it wrote,
    // for pp_lanes to merge the lanes in order.
    output logic        sec_valid,
    input  logic        sec_ready,
    output logic [7:0]  sec_rd,
    output logic [7:0]  sec_wr,
    output logic [2:0]  sec_ends,
    output logic        sec_tx,
    output logic        sec_blk,
    // A POLICY_SYNC section completed (one-cycle strobe): entry `pol_id` gets `pol_prog`, after clearing the
    // table when `pol_flush` is set.
    output logic        pol_we,
    output logic        pol_flush,
    output logic [7:0]  pol_id,
    output logic [8*bmac_pkg::POL_BYTES-1:0] pol_prog
);
  localparam int SW  = $clog2(ID_SLOTS);
  localparam int IBW = $clog2(ID_BYTES);
  localparam int AW  = SW + IBW;
  localparam int HDR_LEN = 66;   // Ethernet + IPv4 + UDP + L7 header + section info

  // Section types and annotation kinds (hw/DESIGN.md section 2).
  localparam logic [7:0] T_ID_SYNC = 8'd0, T_HEADER = 8'd1, T_TX = 8'd2, T_METADATA = 8'd3, T_STATE_SYNC = 8'd4,
                         T_POLICY_SYNC = 8'd5;
  localparam logic [3:0] K_LOC = 4'd1, K_HASH = 4'd2, K_SIG = 4'd3, K_RD_KEY = 4'd4, K_RD_VER = 4'd5,
                         K_WR_KEY = 4'd6, K_PROBE = 4'd7, K_SYNC_KEY = 4'd8, K_SYNC_VER = 4'd9;

  typedef struct packed {
    logic [3:0]  kind;
    logic [7:0]  flags;
    logic [7:0]  ns;      // namespace id or signature slot
    logic [7:0]  seq;
    logic [15:0] off;
    logic [15:0] len;     // length, or the identity id of a locator
  } ann_t;

  // ------------------------------------------------------------ byte input
  logic       b_valid, b_last, b_ready;
  logic [7:0] b_data;
  axis_to_bytes #(.DATA_W(64)) u_in (
      .clk, .rst_n, .s_tdata(s_axis_tdata), .s_tkeep(s_axis_tkeep), .s_tlast(s_axis_tlast),
      .s_tvalid(s_axis_tvalid), .s_tready(s_axis_tready), .b_valid, .b_data, .b_last, .b_ready
  );

  // A one-cycle local reset of the per-section machinery when a section is dropped.
  logic soft_rst, sec_rst_n;
  assign sec_rst_n = rst_n & ~soft_rst;

  // ------------------------------------------------------------------- FSM
  typedef enum logic [3:0] {
    P_HDR, P_ANN, P_PAY, P_IDS, P_TAIL, P_FIN, P_WKEY, P_WTX, P_WEND, P_WBLK, P_DROP, P_DONE
  } state_t;
  state_t st;
  state_t after_done;   // where P_DONE goes: P_HDR, or P_DROP for the rest of a broken frame

  logic [6:0]  hcnt;
  logic        hdr_ok;
  logic [7:0]  f_type, f_flags, f_nann;
  logic [15:0] f_index, f_psize;
  logic [63:0] f_blk, f_info;
  logic [7:0]  acnt_ann;       // annotations still to read
  logic [2:0]  abyte;
  logic [55:0] abuf;
  logic        frame_done;     // the frame's last byte has been consumed
  logic [7:0]  n_rd, n_wr;
  logic [2:0]  n_ends;
  logic [bmac_pkg::SLOTS-1:0] hash_used;

  // ------------------------------------------------------- annotation FIFOs
  // The annotation completed by the current byte (abuf holds its first seven bytes).
  ann_t ann_new;
  logic ann_kind_ok;
  assign ann_new     = {abuf[51:48], abuf[47:0], b_data};
  assign ann_kind_ok = abuf[55:52] == 4'd0;

  logic            loc_in, loc_ready, loc_valid, loc_pop;
  ann_t            loc_q;
  logic            fld_in, fld_ready, fld_valid, fld_pop;
  ann_t            fld_q;
  logic [bmac_pkg::SLOTS-1:0] hq_in, hq_ready, hq_valid, hq_pop;
  logic [15:0]     hq_off [bmac_pkg::SLOTS];  // the range of a hash annotation, all that a hash FIFO keeps
  logic [15:0]     hq_len [bmac_pkg::SLOTS];
  logic [$clog2(HASH_DEPTH):0] hq_count [bmac_pkg::SLOTS];

  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W($bits(ann_new)), .DEPTH(LOC_DEPTH)) u_loc (
      .clk, .rst_n(sec_rst_n), .in_valid(loc_in), .in_ready(loc_ready), .in_data(ann_new),
      .out_valid(loc_valid), .out_ready(loc_pop), .out_data(loc_q), .count()
  );
  sync_fifo #(.W($bits(ann_new)), .DEPTH(FIELD_DEPTH)) u_field (
      .clk, .rst_n(sec_rst_n), .in_valid(fld_in), .in_ready(fld_ready), .in_data(ann_new),
      .out_valid(fld_valid), .out_ready(fld_pop), .out_data(fld_q), .count()
  );
  /* verilator lint_on PINCONNECTEMPTY */
  for (genvar s = 0; s < bmac_pkg::SLOTS; s++) begin : g_hq
    sync_fifo #(.W(32), .DEPTH(HASH_DEPTH)) u_hq (
        .clk, .rst_n(sec_rst_n), .in_valid(hq_in[s]), .in_ready(hq_ready[s]), .in_data({ann_new.off, ann_new.len}),
        .out_valid(hq_valid[s]), .out_ready(hq_pop[s]), .out_data({hq_off[s], hq_len[s]}), .count(hq_count[s])
    );
  end

  // ---------------------------------------------------------- identity cache
  typedef struct packed {
    logic          valid;
    logic [7:0]    epoch;
    logic [SW-1:0] slot;
  } map_t;
  logic [8+SW:0] id_map [65536];  // map_t entries, as plain vectors so that they infer a block RAM
  logic [7:0]   id_mem [ID_SLOTS * ID_BYTES];
  logic [15:0]  id_len [ID_SLOTS];
  logic [511:0] id_key [ID_SLOTS];
  logic [7:0]   epoch;
`ifndef SYNTHESIS
  initial begin
    // Empty cache at configuration, as block RAM without initial contents powers up on an FPGA.
    for (int i = 0; i < 65536; i++) id_map[i] = '0;
  end
`endif

  map_t         map_q;
  logic [AW-1:0] id_addr, id_addr_next;
  logic [7:0]   id_q;
  logic [SW-1:0] key_addr;
  logic [511:0] key_q;
  always_ff @(posedge clk) begin
    map_q <= id_map[loc_q.len];
    id_q  <= id_mem[id_addr_next];
    key_q <= id_key[key_addr];
  end

  // ID_SYNC writes.
  logic [15:0]  ids_i;          // payload byte index
  logic [511:0] ids_key;
  logic [SW-1:0] ids_slot;
  assign ids_slot = f_info[56 +: SW];

  // POLICY_SYNC: the program bytes, byte 0 in the top bits; the flush flag is info byte 0, bit 0.
  logic [8*bmac_pkg::POL_BYTES-1:0] pol_buf;
  assign pol_prog  = pol_buf;
  assign pol_id    = f_index[7:0];
  assign pol_flush = f_info[56];

  // ---------------------------------------------------------- DataInserter
  typedef enum logic [1:0] {I_RUN, I_MAP, I_INS, I_DONE} ins_state_t;
  ins_state_t  ins;
  logic [15:0] spos, rpos;
  logic [15:0] ins_left;
  logic [7:0]  hr_i;
  logic [7:0]  hdr_buf [HDR_MAX];
  logic [7:0]  hdr_len;
  logic        is_meta;
  assign is_meta = f_type == T_METADATA;

  // Signers recorded from locators.
  logic [bmac_pkg::SLOTS-1:0] sg_valid;
  logic [SW-1:0]    sg_slot [bmac_pkg::SLOTS];
  logic [15:0]      sg_id   [bmac_pkg::SLOTS];

  // Token register (one reconstructed byte).
  logic        tk_valid, tk_take, tk_free;
  logic [7:0]  tk_byte;
  logic [15:0] tk_pos;
  assign tk_free = !tk_valid || tk_take;

  logic emit_b, emit_h, emit_i;
  logic at_loc;
  assign at_loc = loc_valid && loc_q.off == spos;
  assign emit_b = st == P_PAY && ins == I_RUN && !at_loc && spos != f_psize && b_valid && tk_free;
  assign emit_h = st == P_PAY && ins == I_RUN && !at_loc && spos == f_psize && is_meta &&
                  hr_i != hdr_len && tk_free;
  assign emit_i = st == P_PAY && ins == I_INS && tk_free;
  assign id_addr_next = (st == P_PAY && ins == I_MAP) ? AW'(map_q.slot) << IBW :
                        emit_i ? id_addr + 1'b1 : id_addr;

  logic map_bad;
  assign map_bad = !map_q.valid || map_q.epoch != epoch;

  // ------------------------------------------------------- HashCalculator
  logic [bmac_pkg::SLOTS-1:0] h_in, h_lastb, h_final, h_ready, h_dv, h_busy;
  logic [255:0]     h_digest [bmac_pkg::SLOTS];
  logic [255:0]     dig [bmac_pkg::SLOTS];
  logic [bmac_pkg::SLOTS-1:0] dig_done;
  always_comb begin
    for (int s = 0; s < bmac_pkg::SLOTS; s++) begin
      logic [16:0] end_pos;
      end_pos    = 17'(hq_off[s]) + 17'(hq_len[s]);
      h_in[s]    = hq_valid[s] && tk_valid && tk_pos >= hq_off[s] && 17'(tk_pos) < end_pos;
      h_lastb[s] = h_in[s] && 17'(tk_pos) + 17'd1 == end_pos;
      h_final[s] = h_lastb[s] && hq_count[s] == ($clog2(HASH_DEPTH)+1)'(1);
    end
  end
  for (genvar s = 0; s < bmac_pkg::SLOTS; s++) begin : g_hash
    sha256_engine #(.DATA_W(8)) u_sha (
        .clk, .rst_n(sec_rst_n), .s_valid(tk_take && h_in[s]), .s_ready(h_ready[s]), .s_data(tk_byte),
        .s_keep(1'b1), .s_last(h_final[s]), .digest(h_digest[s]), .digest_valid(h_dv[s]), .busy(h_busy[s])
    );
  end
  assign hq_pop = tk_take ? h_lastb : '0;

  // ------------------------------------------- DataExtractor / DataProcessor
  logic        f_in, f_first, f_lastb;
  logic        f_is_key, f_is_sig, f_is_ver;
  always_comb begin
    logic [16:0] end_pos;
    end_pos  = 17'(fld_q.off) + 17'(fld_q.len);
    f_in     = fld_valid && tk_valid && tk_pos >= fld_q.off && 17'(tk_pos) < end_pos;
    f_first  = f_in && tk_pos == fld_q.off;
    f_lastb  = f_in && 17'(tk_pos) + 17'd1 == end_pos;
    f_is_key = fld_q.kind == K_RD_KEY || fld_q.kind == K_WR_KEY || fld_q.kind == K_PROBE || fld_q.kind == K_SYNC_KEY;
    f_is_sig = fld_q.kind == K_SIG;
    f_is_ver = fld_q.kind == K_RD_VER || fld_q.kind == K_SYNC_VER;
  end
  assign fld_pop = tk_take && f_lastb;

  // DER signatures.
  logic         der_done, der_ok;
  logic [255:0] der_r, der_s;
  logic [2:0]   der_slot;
  logic [bmac_pkg::SLOTS-1:0] sig_ok;
  logic [255:0] sig_r [bmac_pkg::SLOTS];
  logic [255:0] sig_s [bmac_pkg::SLOTS];
  der_parser u_der (
      .clk, .rst_n(sec_rst_n), .in_valid(tk_take && f_in && f_is_sig), .first(f_first), .last(f_lastb),
      .region_len(fld_q.len), .in_byte(tk_byte), .done(der_done), .ok(der_ok), .r(der_r), .s(der_s)
  );

  // Versions.
  logic        ver_done, ver_ok;
  logic [63:0] ver_blk, ver_txn;
  version_parser u_ver (
      .clk, .rst_n(sec_rst_n), .in_valid(tk_take && f_in && f_is_ver), .first(f_first), .last(f_lastb),
      .in_byte(tk_byte), .done(ver_done), .ok(ver_ok), .blk(ver_blk), .txn(ver_txn)
  );
  logic         vq_valid, vq_pop;
  logic [127:0] vq_q;
  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W(128), .DEPTH(FIELD_DEPTH)) u_verq (
      .clk, .rst_n(sec_rst_n), .in_valid(ver_done), .in_ready(), .in_data({ver_blk, ver_txn}),
      .out_valid(vq_valid), .out_ready(vq_pop), .out_data(vq_q), .count()
  );
  /* verilator lint_on PINCONNECTEMPTY */

  // Keys: SHA-256 of the key bytes, with a descriptor per key.
  typedef struct packed {
    logic [3:0] kind;
    logic [7:0] flags;
    logic [7:0] ns;
    logic [7:0] seq;
  } kdesc_t;
  logic         k_ready, k_dv, k_busy;
  logic [255:0] k_digest;
  logic         kd_in_ready, kd_valid, kd_pop, dq_valid, dq_pop;
  kdesc_t       kd_in, kd_q;
  assign kd_in.kind  = fld_q.kind;
  assign kd_in.flags = fld_q.flags;
  assign kd_in.ns    = fld_q.ns;
  assign kd_in.seq   = fld_q.seq;
  logic [255:0] dq_q;
  sha256_engine #(.DATA_W(8)) u_key_sha (
      .clk, .rst_n(sec_rst_n), .s_valid(tk_take && f_in && f_is_key), .s_ready(k_ready), .s_data(tk_byte),
      .s_keep(1'b1), .s_last(f_lastb), .digest(k_digest), .digest_valid(k_dv), .busy(k_busy)
  );
  /* verilator lint_off PINCONNECTEMPTY */
  sync_fifo #(.W($bits(kd_q)), .DEPTH(FIELD_DEPTH)) u_kdesc (
      .clk, .rst_n(sec_rst_n), .in_valid(tk_take && f_lastb && f_is_key), .in_ready(kd_in_ready),
      .in_data(kd_in),
      .out_valid(kd_valid), .out_ready(kd_pop), .out_data(kd_q), .count()
  );
  sync_fifo #(.W(256), .DEPTH(FIELD_DEPTH)) u_digests (
      .clk, .rst_n(sec_rst_n), .in_valid(k_dv), .in_ready(), .in_data(k_digest),
      .out_valid(dq_valid), .out_ready(dq_pop), .out_data(dq_q), .count()
  );
  /* verilator lint_on PINCONNECTEMPTY */

  // A token advances when every consumer of its byte can take it.
  always_comb begin
    tk_take = tk_valid;
    for (int s = 0; s < bmac_pkg::SLOTS; s++) if (h_in[s] && !h_ready[s]) tk_take = 1'b0;
    if (f_in && f_is_key && (!k_ready || (f_lastb && !kd_in_ready))) tk_take = 1'b0;
  end

  // Pairing writer: descriptor + digest (+ version) = a read or write record.
  logic ver_follows, pair_ready, pair_is_rd;
  assign ver_follows = kd_q.flags[1] && (kd_q.kind == K_RD_KEY || kd_q.kind == K_SYNC_KEY);
  assign pair_ready  = kd_valid && dq_valid && (!ver_follows || vq_valid);
  assign pair_is_rd  = kd_q.kind == K_RD_KEY || kd_q.kind == K_PROBE;
  assign rd_valid    = pair_ready && pair_is_rd;
  assign wr_valid    = pair_ready && !pair_is_rd;
  assign rd.kind    = kd_q.kind == K_PROBE;
  assign rd.req     = kd_q.kind == K_PROBE ? kd_q.flags[1:0] : 2'd0;
  assign rd.seq     = kd_q.seq;
  assign rd.ns      = kd_q.ns;
  assign rd.has_ver = kd_q.kind == K_RD_KEY && kd_q.flags[0];
  assign rd.ver_blk = ver_follows ? vq_q[127:64] : 64'd0;
  assign rd.ver_tx  = ver_follows ? vq_q[63:0] : 64'd0;
  assign rd.key     = dq_q;
  assign wr.sync    = kd_q.kind == K_SYNC_KEY;
  assign wr.del     = kd_q.flags[0];
  assign wr.ns      = kd_q.ns;
  assign wr.ver_blk = ver_follows ? vq_q[127:64] : 64'd0;
  assign wr.ver_tx  = ver_follows ? vq_q[31:0] : 32'd0;
  assign wr.key     = dq_q;
  assign kd_pop = (rd_valid && rd_ready) || (wr_valid && wr_ready);
  assign dq_pop = kd_pop;
  assign vq_pop = kd_pop && ver_follows;

  // ------------------------------------------------------------ completion
  logic [1:0] settle;
  logic       regions_left, work_left, hashes_done;
  assign regions_left = fld_valid || (|hq_valid) || loc_valid;
  assign hashes_done  = (hash_used & ~dig_done) == '0;
  assign work_left    = tk_valid || kd_valid || dq_valid || vq_valid || k_busy || !hashes_done || settle != 2'd0;

  // ------------------------------------------------------------- DataWriter
  logic [2:0] wslot;
  logic       w_has_key;
  logic [15:0] w_id;
  assign key_addr  = sg_slot[wslot];
  assign w_has_key = sg_valid[wslot];
  assign w_id      = sg_id[wslot];

  bmac_pkg::sig_job_t w_sig;
  assign w_sig.qx = key_q[511:256];
  assign w_sig.qy = key_q[255:0];
  assign w_sig.e  = dig[wslot];
  assign w_sig.r  = sig_r[wslot];
  assign w_sig.s  = sig_s[wslot];

  assign tx.blk = f_blk;

  assign tx.tx_idx = f_index;

  assign tx.last = f_flags[0];

  assign tx.pre_code = f_info[63:56];

  assign tx.post_code = f_info[55:48];

  assign tx.policy_id = f_info[47:40];

  assign tx.dup_tag = f_info[31:16];

  assign tx.phantom_seq = f_info[15:8];

  assign tx.n_ends = n_ends;

  assign tx.n_rd = n_rd;

  assign tx.n_wr = n_wr;

  assign tx.has_key = w_has_key;

  assign tx.der_ok = sig_ok[wslot];

  assign tx.sig            = w_sig;
  assign end_out.has_key   = w_has_key;
  assign end_out.der_ok    = sig_ok[wslot];
  assign end_out.org       = w_id[15:8];
  assign end_out.roles     = w_id[7:4];
  assign end_out.sig       = w_sig;
  assign blk_rec.blk       = f_blk;
  assign blk_rec.policy_id = f_info[63:56];
  assign blk_rec.has_key   = w_has_key;
  assign blk_rec.der_ok    = sig_ok[wslot];
  assign blk_rec.org       = w_id[15:8];
  assign blk_rec.roles     = w_id[7:4];
  assign blk_rec.sig       = w_sig;
  assign sec_valid = st == P_DONE;
  assign tx_valid  = st == P_WTX;
  assign end_valid = st == P_WEND;
  assign blk_valid = st == P_WBLK;

  // ---------------------------------------------------------- input control
  always_comb begin
    unique case (st)
      P_HDR, P_ANN, P_IDS, P_TAIL, P_DROP: b_ready = 1'b1;
      P_PAY:   b_ready = emit_b;
      default: b_ready = 1'b0;
    endcase
  end

  // Annotation routing (on the 8th byte of an annotation).
  logic ann_fire;
  assign ann_fire = st == P_ANN && b_valid && abyte == 3'd7;
  assign loc_in   = ann_fire && ann_new.kind == K_LOC;
  assign fld_in   = ann_fire && ann_new.kind >= K_SIG && ann_new.kind <= K_SYNC_VER;
  always_comb begin
    hq_in = '0;
    if (ann_fire && ann_new.kind == K_HASH && 32'(ann_new.ns) < bmac_pkg::SLOTS) hq_in[ann_new.ns[2:0]] = 1'b1;
  end
  logic ann_bad;
  assign ann_bad = ann_fire && (!ann_kind_ok ||
                   (!(loc_in && loc_ready) && !(fld_in && fld_ready) && !((hq_in & hq_ready) != '0)));

  // Records written by the current section (for the end-of-section token).
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      sec_rd   <= '0;
      sec_wr   <= '0;
      sec_ends <= '0;
      sec_tx   <= 1'b0;
      sec_blk  <= 1'b0;
    end else if (st == P_HDR && b_valid && hcnt == 7'd0) begin
      sec_rd   <= '0;
      sec_wr   <= '0;
      sec_ends <= '0;
      sec_tx   <= 1'b0;
      sec_blk  <= 1'b0;
    end else begin
      if (rd_valid && rd_ready) sec_rd <= sec_rd + 8'd1;
      if (wr_valid && wr_ready) sec_wr <= sec_wr + 8'd1;
      if (end_valid && end_ready) sec_ends <= sec_ends + 3'd1;
      if (tx_valid && tx_ready) sec_tx <= 1'b1;
      if (blk_valid && blk_ready) sec_blk <= 1'b1;
    end
  end

  // Sections that end with a token: TX, METADATA, STATE_SYNC.
  logic tokened;
  assign tokened = f_type == T_TX || f_type == T_METADATA || f_type == T_STATE_SYNC;

  // ------------------------------------------------------------ sequencing
  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st          <= P_HDR;
      after_done  <= P_HDR;
      hcnt        <= '0;
      hdr_ok      <= 1'b1;
      f_type      <= '0;
      f_flags     <= '0;
      f_nann      <= '0;
      f_index     <= '0;
      f_psize     <= '0;
      f_blk       <= '0;
      f_info      <= '0;
      acnt_ann    <= '0;
      abyte       <= '0;
      abuf        <= '0;
      frame_done  <= 1'b0;
      n_rd        <= '0;
      n_wr        <= '0;
      n_ends      <= '0;
      hash_used   <= '0;
      ins         <= I_RUN;
      spos        <= '0;
      rpos        <= '0;
      ins_left    <= '0;
      hr_i        <= '0;
      hdr_len     <= '0;
      id_addr     <= '0;
      tk_valid    <= 1'b0;
      tk_byte     <= '0;
      tk_pos      <= '0;
      sg_valid    <= '0;
      dig_done    <= '0;
      sig_ok      <= '0;
      der_slot    <= '0;
      settle      <= '0;
      wslot       <= '0;
      ids_i       <= '0;
      ids_key     <= '0;
      epoch       <= 8'd1;
      soft_rst    <= 1'b0;
      blk_start   <= 1'b0;
      proto_error <= 1'b0;
      pol_we      <= 1'b0;
      pol_buf     <= '0;
      for (int s = 0; s < bmac_pkg::SLOTS; s++) begin
        sg_slot[s] <= '0;
        sg_id[s]   <= '0;
        dig[s]     <= '0;
        sig_r[s]   <= '0;
        sig_s[s]   <= '0;
      end
    end else begin
      soft_rst    <= 1'b0;
      blk_start   <= 1'b0;
      proto_error <= 1'b0;
      pol_we      <= 1'b0;
      id_addr     <= id_addr_next;
      if (settle != 2'd0) settle <= settle - 2'd1;

      // Results arriving from the engines and parsers.
      for (int s = 0; s < bmac_pkg::SLOTS; s++) if (h_dv[s]) begin
        dig[s]      <= h_digest[s];
        dig_done[s] <= 1'b1;
      end
      if (der_done) begin
        sig_ok[der_slot]   <= der_ok;
        sig_r[der_slot]    <= der_r;
        sig_s[der_slot]    <= der_s;
      end
      if (ver_done && !ver_ok) begin
        proto_error <= 1'b1;   // the sender only sends well-formed versions
      end

      // Token register.
      if (tk_take) begin
        tk_valid <= 1'b0;
        if (f_first && f_is_sig) der_slot <= fld_q.ns[2:0];
        if (f_in || (|h_in)) settle <= 2'd3;
      end
      if (emit_b || emit_h || emit_i) begin
        tk_valid <= 1'b1;
        tk_pos   <= rpos;
        tk_byte  <= emit_b ? b_data : emit_h ? hdr_buf[hr_i[$clog2(HDR_MAX)-1:0]] : id_q;
        rpos     <= rpos + 16'd1;
      end

      unique case (st)
        P_HDR: if (b_valid) begin
          hcnt <= hcnt + 7'd1;
          unique case (hcnt)
            7'd12: hdr_ok <= b_data == 8'h08;
            7'd13: if (b_data != 8'h00) hdr_ok <= 1'b0;
            7'd14: if (b_data != 8'h45) hdr_ok <= 1'b0;
            7'd23: if (b_data != 8'd17) hdr_ok <= 1'b0;
            7'd36: if (b_data != UDP_PORT[15:8]) hdr_ok <= 1'b0;
            7'd37: if (b_data != UDP_PORT[7:0]) hdr_ok <= 1'b0;
            7'd42: if (b_data != 8'd1) hdr_ok <= 1'b0;
            7'd43: f_type <= b_data;
            7'd44: f_index[15:8] <= b_data;
            7'd45: f_index[7:0] <= b_data;
            7'd54: f_flags <= b_data;
            7'd55: f_nann <= b_data;
            7'd56: f_psize[15:8] <= b_data;
            7'd57: f_psize[7:0] <= b_data;
            default: begin
              if (hcnt >= 7'd46 && hcnt <= 7'd53) f_blk <= {f_blk[55:0], b_data};
              if (hcnt >= 7'd58 && hcnt <= 7'd65) f_info <= {f_info[55:0], b_data};
            end
          endcase
          if (b_last && hcnt != 7'(HDR_LEN - 1)) begin
            // A frame shorter than the headers: not ours, or truncated. pp_lanes decided on its first 48
            // bytes; if those looked like a section with records, it waits for a token.
            hcnt   <= '0;
            hdr_ok <= 1'b1;
            if (hcnt >= 7'd47 && hdr_ok && tokened) begin
              proto_error <= 1'b1;
              st          <= P_DONE;
              after_done  <= P_HDR;
            end
          end else if (hcnt == 7'(HDR_LEN - 1)) begin
            hcnt       <= '0;
            frame_done <= b_last;
            n_rd       <= '0;
            n_wr       <= '0;
            n_ends     <= '0;
            hash_used  <= '0;
            sg_valid   <= '0;
            dig_done   <= '0;
            sig_ok     <= '0;
            spos       <= '0;
            rpos       <= '0;
            hr_i       <= '0;
            ins        <= I_RUN;
            abyte      <= '0;
            acnt_ann   <= f_nann;
            ids_i      <= '0;
            if (!hdr_ok || f_type > T_POLICY_SYNC) begin
              hdr_ok <= 1'b1;
              st     <= P_DROP;
              if (hdr_ok) proto_error <= 1'b1;   // a BMac datagram with an unknown section type
            end else if (f_type == T_ID_SYNC) begin
              st <= (f_psize == 16'd0) ? P_FIN : P_IDS;
              // Flush (info byte 1, bit 0; the info's last byte arrives in this cycle): stale ids stop matching.
              if (f_info[40]) epoch <= epoch + 8'd1;
            end else if (f_type == T_POLICY_SYNC) begin
              if (f_psize == 16'(bmac_pkg::POL_BYTES) && f_nann == 8'd0 && !b_last) st <= P_IDS;
              else begin
                proto_error <= 1'b1;   // a policy program has exactly POL_BYTES bytes
                st          <= b_last ? P_HDR : P_DROP;
              end
            end else begin
              st <= (f_nann != 8'd0) ? P_ANN : P_PAY;
            end
          end
        end

        P_ANN: if (b_valid) begin
          abuf  <= {abuf[47:0], b_data};
          abyte <= abyte + 3'd1;
          if (b_last) begin
            proto_error <= 1'b1;
            soft_rst    <= 1'b1;
            if (tokened) begin
              st         <= P_DONE;
              after_done <= P_HDR;
            end else st <= P_HDR;
          end else if (abyte == 3'd7) begin
            if (ann_bad) begin
              proto_error <= 1'b1;
              soft_rst    <= 1'b1;
              if (tokened) begin
                st         <= P_DONE;
                after_done <= P_DROP;
              end else st <= P_DROP;
            end else begin
              if (ann_new.kind == K_HASH) begin
                hash_used[ann_new.ns[2:0]] <= 1'b1;
                if (ann_new.ns[2:0] > n_ends) n_ends <= ann_new.ns[2:0];
              end
              if (ann_new.kind == K_RD_KEY || ann_new.kind == K_PROBE) n_rd <= n_rd + 8'd1;
              if (ann_new.kind == K_WR_KEY) n_wr <= n_wr + 8'd1;
              acnt_ann <= acnt_ann - 8'd1;
              if (acnt_ann == 8'd1) st <= P_PAY;
            end
          end
        end

        P_PAY: begin
          if (emit_b) begin
            spos <= spos + 16'd1;
            if (b_last) begin
              frame_done <= 1'b1;
              if (spos + 16'd1 != f_psize) begin
                proto_error <= 1'b1;
                soft_rst    <= 1'b1;
                if (tokened) begin
                  st         <= P_DONE;
                  after_done <= P_HDR;
                end else st <= P_HDR;
              end
            end
          end
          if (emit_h) hr_i <= hr_i + 8'd1;
          unique case (ins)
            I_RUN: begin
              if (at_loc) ins <= I_MAP;
              else if (spos == f_psize && !(is_meta && hr_i != hdr_len)) ins <= I_DONE;
            end
            I_MAP: begin
              if (map_bad) begin
                proto_error <= 1'b1;
                soft_rst    <= 1'b1;
                if (tokened) begin
                  st         <= P_DONE;
                  after_done <= (frame_done ? P_HDR : P_DROP);
                end else st <= (frame_done ? P_HDR : P_DROP);
              end else begin
                if (loc_q.flags[0] && 32'(loc_q.ns) < bmac_pkg::SLOTS) begin
                  sg_valid[loc_q.ns[2:0]] <= 1'b1;
                  sg_slot[loc_q.ns[2:0]]  <= map_q.slot;
                  sg_id[loc_q.ns[2:0]]    <= loc_q.len;
                end
                ins_left <= id_len[map_q.slot];
                ins      <= (id_len[map_q.slot] == 16'd0) ? I_RUN : I_INS;
              end
            end
            I_INS: if (emit_i) begin
              ins_left <= ins_left - 16'd1;
              if (ins_left == 16'd1) ins <= I_RUN;
            end
            I_DONE: if (!tk_valid) st <= frame_done ? P_FIN : P_TAIL;
            default: ins <= I_RUN;
          endcase
        end

        // The payload of an ID_SYNC (key, then identity bytes) or a POLICY_SYNC (program bytes).
        P_IDS: if (b_valid) begin
          ids_i <= ids_i + 16'd1;
          if (f_type == T_POLICY_SYNC) pol_buf <= {pol_buf[8*bmac_pkg::POL_BYTES-9:0], b_data};
          else if (ids_i < 16'd64) ids_key <= {ids_key[503:0], b_data};
          if (ids_i + 16'd1 == f_psize) begin
            frame_done <= b_last;
            st         <= b_last ? P_FIN : P_TAIL;
          end else if (b_last) begin
            proto_error <= 1'b1;
            st          <= P_HDR;
          end
        end

        P_TAIL: if (b_valid && b_last) st <= P_FIN;

        P_FIN: begin
          if (f_type == T_ID_SYNC) begin
            st <= P_HDR;
          end else if (f_type == T_POLICY_SYNC) begin
            pol_we <= 1'b1;
            st     <= P_HDR;
          end else if (!work_left) begin
            if (regions_left) begin
              // A region beyond the payload: the section cannot be complete.
              proto_error <= 1'b1;
              soft_rst    <= 1'b1;
              if (tokened) begin
                st         <= P_DONE;
                after_done <= P_HDR;
              end else st <= P_HDR;
            end else begin
              wslot <= '0;
              unique case (f_type)
                T_HEADER: begin
                  hdr_len   <= (32'(f_psize) > HDR_MAX) ? 8'(HDR_MAX) : f_psize[7:0];
                  blk_start <= 1'b1;
                  st        <= P_HDR;
                end
                T_TX, T_METADATA: st <= P_WKEY;
                default: if (tokened) begin
                  st         <= P_DONE;
                  after_done <= P_HDR;
                end else st <= P_HDR;
              endcase
            end
          end
        end

        // One cycle for the key read of slot wslot.
        P_WKEY: st <= (f_type == T_METADATA) ? P_WBLK : (wslot == 3'd0) ? P_WTX : P_WEND;

        P_WTX: if (tx_ready) begin
          if (n_ends == 3'd0) begin
            st         <= P_DONE;
            after_done <= P_HDR;
          end else begin
            wslot <= 3'd1;
            st    <= P_WKEY;
          end
        end

        P_WEND: if (end_ready) begin
          if (wslot == n_ends) begin
            st         <= P_DONE;
            after_done <= P_HDR;
          end else begin
            wslot <= wslot + 3'd1;
            st    <= P_WKEY;
          end
        end

        P_WBLK: if (blk_ready) begin
          st         <= P_DONE;
          after_done <= P_HDR;
        end

        P_DONE: if (sec_ready) st <= after_done;

        P_DROP: if (b_valid && b_last) st <= P_HDR;

        default: st <= P_HDR;
      endcase
    end
  end

  // Memories (no reset): header bytes, the identity cache.
  always_ff @(posedge clk) begin
    if (tk_take && f_type == T_HEADER && 32'(tk_pos) < HDR_MAX) hdr_buf[tk_pos[$clog2(HDR_MAX)-1:0]] <= tk_byte;
    if (st == P_IDS && f_type == T_ID_SYNC && b_valid && ids_i >= 16'd64 && 32'(ids_i) - 64 < ID_BYTES)
      id_mem[{ids_slot, IBW'(ids_i - 16'd64)}] <= b_data;
    if (st == P_FIN && f_type == T_ID_SYNC) begin
      id_key[ids_slot] <= ids_key;
      id_len[ids_slot] <= f_info[47:32];
      id_map[f_index] <= {1'b1, epoch, ids_slot};  // map_t: {valid, epoch, slot}
    end
  end

  // A locator is consumed at the end of its insertion (or at once for an empty identity).
  assign loc_pop = st == P_PAY && ((ins == I_INS && emit_i && ins_left == 16'd1) ||
                                   (ins == I_MAP && !map_bad && id_len[map_q.slot] == 16'd0));

  // Bits the DataWriter does not need: reserved info bytes, node ids, a locator's kind and seq.
  wire unused = ^{h_busy, f_info[7:0], f_info[39:32], f_flags[7:1], w_id[3:0], loc_q.kind, loc_q.seq};
endmodule
