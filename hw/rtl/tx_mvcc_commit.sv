// In-order MVCC and commit (hw/DESIGN.md section 3), against kv_store.
//
// Two processes overlap:
//   - the checker takes transactions in block order from tx_collector. For
//     each one it runs the in-block duplicate-txid check (dup_tag), then
//     checks every read and range-query probe of rdset_fifo (port A);
//   - the committer writes the transaction's write set from wrset_fifo at
//     version (blk, tx_idx) (port B), then reports the result.
// The checker starts on transaction t+1 while the committer still writes t.
// Before that it waits until the committer has loaded t's write set into a
// lock table. A read whose key is locked waits until that key has been
// written, so the next transaction always sees the new version.
//
// Codes: a transaction still VALID gets the code of its failing check with
// the lowest seq. The check is a read (MVCC_READ_CONFLICT) or a probe or the
// host's static phantom_seq (PHANTOM_READ_CONFLICT). Writes are applied only
// if the transaction is VALID and its block's orderer signature verified
// (block verdicts arrive in block order on bv_*).
//
// A read conflicts when its key was touched by this block (entry blk equals the
// transaction's blk) or its committed version differs from the version read
// (none when absent or deleted). Probe states: untouched, put or deleted by
// this block.
//
// State-sync entries (sync = 1) are applied between blocks. Each batch takes
// at most MAX_WR entries and goes through the lock table like a transaction.
module tx_mvcc_commit
#(
    parameter int KV_ENTRIES = 8192,
    parameter int KV_PROBES  = 32,
    parameter int MAX_WR     = 48,   // lock-table size: writes per transaction
    parameter int DUP_W      = 8     // in-block duplicate tags 1 .. 2^DUP_W-1
) (
    input  logic     clk,
    input  logic     rst_n,
    // In-order transactions from tx_collector.
    input  logic     in_valid,
    output logic     in_ready,
    input  bmac_pkg::tx_meta_t in_meta,
    input  logic [7:0] in_code,
    // Block verdicts from block_verify, in block order.
    input  logic     bv_valid,
    output logic     bv_ready,
    input  logic     bv_ok,
    // rdset_fifo and wrset_fifo.
    input  logic     rd_valid,
    output logic     rd_ready,
    input  bmac_pkg::rd_rec_t rd,
    input  logic     wr_valid,
    output logic     wr_ready,
    input  bmac_pkg::wr_rec_t wr,
    // res_fifo.
    output logic     res_valid,
    input  logic     res_ready,
    output bmac_pkg::res_rec_t res,
    // Status.
    output logic     mvcc_fail,    // one-cycle strobe per transaction failed by MVCC
    output logic     overflow
);
  localparam int LW = $clog2(MAX_WR + 1);

  // ---------------------------------------------------------------- kv_store
  logic         a_req, a_busy, a_done, a_found, a_deleted;
  logic [63:0]  a_blk;
  logic [31:0]  a_txn;
  logic         b_req, b_busy, b_done;
  logic [7:0]   b_ns;
  logic [255:0] b_key;
  logic [63:0]  b_blk;
  logic [31:0]  b_txn;
  logic         b_del;

  kv_store #(.ENTRIES(KV_ENTRIES), .PROBES(KV_PROBES)) u_kv (
      .clk, .rst_n,
      .a_req, .a_busy, .a_ns(rd.ns), .a_key(rd.key), .a_done, .a_found, .a_blk, .a_txn, .a_deleted,
      .b_req, .b_busy, .b_ns, .b_key, .b_blk, .b_txn, .b_del, .b_done, .overflow
  );

  // ------------------------------------------------------------- lock table
  logic [MAX_WR-1:0] lk_valid;     // entry still to be written (locked)
  logic [7:0]        lk_ns  [MAX_WR];
  logic [255:0]      lk_key [MAX_WR];
  logic              lk_del [MAX_WR];
  logic [63:0]       lk_blk [MAX_WR];
  logic [31:0]       lk_txn [MAX_WR];

  logic rd_locked;
  always_comb begin
    rd_locked = 1'b0;
    for (int i = 0; i < MAX_WR; i++)
      if (lk_valid[i] && lk_ns[i] == rd.ns && lk_key[i] == rd.key) rd_locked = 1'b1;
  end

  // -------------------------------------------------------------- checker
  typedef enum logic [2:0] {C_IDLE, C_DUP, C_RD, C_RDW, C_HAND, C_WAITLOCK} c_state_t;
  c_state_t          c_st;
  /* verilator lint_off UNUSEDSIGNAL */
  bmac_pkg::tx_meta_t c_meta;   // gseq was only needed for reordering
  /* verilator lint_on UNUSEDSIGNAL */
  logic [7:0]        c_code;
  logic              c_block_ok;
  logic [7:0]        c_cnt;
  logic [7:0]        fail_seq;
  logic [7:0]        fail_code;
  logic [(1<<DUP_W)-1:0] dup_seen;

  // Committer state (declared here: the checker looks at it).
  typedef enum logic [2:0] {W_IDLE, W_LOAD, W_WRITE, W_WAIT, W_RES} w_state_t;
  w_state_t   w_st;
  logic       w_sync;        // a state-sync batch (no result)

  // Handoff to the committer.
  logic      h_valid;      // checker offers a transaction
  logic      h_accept;     // committer takes it this cycle
  logic      locks_loaded; // committer finished loading the write set it accepted last

  // Checks one lookup result against the current rdset record.
  logic rd_fail;
  always_comb begin
    logic in_block;
    in_block = a_found && a_blk == c_meta.blk;
    if (rd.kind == 1'b0) begin
      if (in_block) rd_fail = 1'b1;
      else if (a_found && !a_deleted) rd_fail = !(rd.has_ver && rd.ver_blk == a_blk && rd.ver_tx == {32'd0, a_txn});
      else rd_fail = rd.has_ver;
    end else begin
      unique case (rd.req)
        bmac_pkg::PROBE_UNTOUCHED: rd_fail = in_block;
        bmac_pkg::PROBE_DELETED:   rd_fail = !(in_block && a_deleted);
        bmac_pkg::PROBE_NOT_PUT:   rd_fail = in_block && !a_deleted;
        default:         rd_fail = 1'b1;
      endcase
    end
  end

  // State-sync entries ahead of the next block must be in the store before its reads are checked.
  logic sync_pending;
  assign sync_pending = (wr_valid && wr.sync) || (w_st != W_IDLE && w_sync);
  assign in_ready = c_st == C_IDLE && bv_valid && !sync_pending;
  assign rd_ready = (c_st == C_RD && c_cnt != 0 && c_code != bmac_regs_pkg::CODE_VALID) || (c_st == C_RDW && a_done);
  assign a_req    = c_st == C_RD && c_cnt != 0 && c_code == bmac_regs_pkg::CODE_VALID && rd_valid && !rd_locked && !a_busy;
  assign h_valid  = c_st == C_HAND;
  assign bv_ready = c_st == C_HAND && h_accept && c_meta.last;

  logic [7:0] final_code;
  assign final_code = (c_code == bmac_regs_pkg::CODE_VALID && fail_seq != 8'hff) ? fail_code : c_code;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      c_st       <= C_IDLE;
      c_meta     <= '0;
      c_code     <= '0;
      c_block_ok <= 1'b0;
      c_cnt      <= '0;
      fail_seq   <= 8'hff;
      fail_code  <= '0;
      dup_seen   <= '0;
      mvcc_fail  <= 1'b0;
    end else begin
      mvcc_fail <= 1'b0;
      unique case (c_st)
        C_IDLE: if (in_valid && in_ready) begin
          c_meta     <= in_meta;
          c_code     <= in_code;
          c_block_ok <= bv_ok;
          c_st       <= C_DUP;
        end
        C_DUP: begin
          // Fabric marks in-block duplicates among transactions still valid after VSCC, before MVCC.
          if (c_code == bmac_regs_pkg::CODE_VALID && c_meta.dup_tag != 0) begin
            if (dup_seen[c_meta.dup_tag[DUP_W-1:0]]) c_code <= bmac_regs_pkg::CODE_DUPLICATE_TXID;
            else dup_seen[c_meta.dup_tag[DUP_W-1:0]] <= 1'b1;
          end
          c_cnt     <= c_meta.n_rd;
          fail_seq  <= c_meta.phantom_seq;
          fail_code <= bmac_regs_pkg::CODE_PHANTOM_READ_CONFLICT;
          c_st      <= C_RD;
        end
        C_RD: begin
          if (c_cnt == 0) c_st <= C_HAND;
          else if (c_code != bmac_regs_pkg::CODE_VALID) begin
            if (rd_valid) c_cnt <= c_cnt - 1'b1;   // discarded
          end else if (a_req) c_st <= C_RDW;
        end
        C_RDW: if (a_done) begin
          if (rd_fail && rd.seq < fail_seq) begin
            fail_seq  <= rd.seq;
            fail_code <= rd.kind ? bmac_regs_pkg::CODE_PHANTOM_READ_CONFLICT : bmac_regs_pkg::CODE_MVCC_READ_CONFLICT;
          end
          c_cnt <= c_cnt - 1'b1;
          c_st  <= C_RD;
        end
        C_HAND: if (h_accept) begin
          if (c_code == bmac_regs_pkg::CODE_VALID && fail_seq != 8'hff) mvcc_fail <= 1'b1;
          if (c_meta.last) dup_seen <= '0;
          c_st <= C_WAITLOCK;
        end
        C_WAITLOCK: if (locks_loaded) c_st <= C_IDLE;
        default: c_st <= C_IDLE;
      endcase
    end
  end

  // ------------------------------------------------------------ committer
  logic       w_apply;       // the transaction's writes are applied
  logic [7:0] w_n;           // entries to load (transactions)
  logic [LW-1:0] w_loaded;
  logic [LW-1:0] w_i;
  bmac_pkg::res_rec_t w_res;

  assign h_accept     = w_st == W_IDLE && h_valid;
  assign locks_loaded = w_st != W_LOAD;
  assign wr_ready     = w_st == W_LOAD && wr_valid &&
                        (w_sync ? (wr.sync && w_loaded != LW'(MAX_WR)) : (8'(w_loaded) != w_n));
  assign b_req        = w_st == W_WRITE && lk_valid[w_i[$clog2(MAX_WR)-1:0]] && !b_busy;
  assign b_ns         = lk_ns[w_i[$clog2(MAX_WR)-1:0]];
  assign b_key        = lk_key[w_i[$clog2(MAX_WR)-1:0]];
  assign b_blk        = lk_blk[w_i[$clog2(MAX_WR)-1:0]];
  assign b_txn        = lk_txn[w_i[$clog2(MAX_WR)-1:0]];
  assign b_del        = lk_del[w_i[$clog2(MAX_WR)-1:0]];
  assign res_valid    = w_st == W_RES;
  assign res          = w_res;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      w_st     <= W_IDLE;
      w_sync   <= 1'b0;
      w_apply  <= 1'b0;
      w_n      <= '0;
      w_loaded <= '0;
      w_i      <= '0;
      w_res    <= '0;
      lk_valid <= '0;
      for (int i = 0; i < MAX_WR; i++) begin
        lk_ns[i]  <= '0;
        lk_key[i] <= '0;
        lk_del[i] <= 1'b0;
        lk_blk[i] <= '0;
        lk_txn[i] <= '0;
      end
    end else begin
      unique case (w_st)
        W_IDLE: begin
          w_loaded <= '0;
          w_i      <= '0;
          if (h_valid) begin
            w_sync  <= 1'b0;
            w_apply <= final_code == bmac_regs_pkg::CODE_VALID && c_block_ok;
            w_n     <= c_meta.n_wr;
            w_res.blk         <= c_meta.blk;
            w_res.tx_idx      <= c_meta.tx_idx;
            w_res.code        <= final_code;
            w_res.last        <= c_meta.last;
            w_res.block_valid <= c_block_ok;
            w_st    <= W_LOAD;
          end else if (wr_valid && wr.sync) begin
            w_sync  <= 1'b1;
            w_apply <= 1'b1;
            w_st    <= W_LOAD;
          end
        end
        W_LOAD: begin
          if (wr_ready) begin
            lk_valid[w_loaded[$clog2(MAX_WR)-1:0]] <= w_apply;
            lk_ns[w_loaded[$clog2(MAX_WR)-1:0]]    <= wr.ns;
            lk_key[w_loaded[$clog2(MAX_WR)-1:0]]   <= wr.key;
            lk_del[w_loaded[$clog2(MAX_WR)-1:0]]   <= wr.del;
            lk_blk[w_loaded[$clog2(MAX_WR)-1:0]]   <= w_sync ? wr.ver_blk : w_res.blk;
            lk_txn[w_loaded[$clog2(MAX_WR)-1:0]]   <= w_sync ? wr.ver_tx : {16'd0, w_res.tx_idx};
            w_loaded <= w_loaded + 1'b1;
          end else if (w_sync ? !(wr_valid && wr.sync && w_loaded != LW'(MAX_WR)) : (8'(w_loaded) == w_n)) begin
            w_st <= W_WRITE;
          end
        end
        W_WRITE: begin
          if (w_i == w_loaded) w_st <= w_sync ? W_IDLE : W_RES;
          else if (!lk_valid[w_i[$clog2(MAX_WR)-1:0]]) w_i <= w_i + 1'b1;
          else if (b_req) w_st <= W_WAIT;
        end
        W_WAIT: if (b_done) begin
          lk_valid[w_i[$clog2(MAX_WR)-1:0]] <= 1'b0;
          w_i  <= w_i + 1'b1;
          w_st <= W_WRITE;
        end
        W_RES: if (res_ready) w_st <= W_IDLE;
        default: w_st <= W_IDLE;
      endcase
    end
  end
endmodule
