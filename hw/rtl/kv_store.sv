// Versioned key-value store for MVCC (hw/DESIGN.md section 3): a hash table
// in BRAM of ENTRIES entries {valid, ns, key, blk, txn, deleted}, where key is
// the SHA-256 of the Fabric key and (blk, txn) the version of its last write.
// A deleted key keeps its entry (a tombstone) so that probe chains stay
// intact. The home slot is key[IW-1:0] xor ns; collisions use linear probing
// up to PROBES slots.
//
// Port A looks up, port B writes (find or insert, then overwrite). Both ports
// share the table as a true dual-port BRAM with one-cycle read latency; a
// probe step takes two cycles. A lookup that races with an insert of another
// key is still right: a key always sits before the first empty slot of its
// probe sequence, and slots are never emptied. Races on the same key are
// prevented by tx_mvcc_commit's lock table. An insert that finds neither its
// key nor a free slot within PROBES raises the sticky `overflow`.
module kv_store #(
    parameter int ENTRIES = 8192,   // power of two
    parameter int PROBES  = 32
) (
    input  logic         clk,
    input  logic         rst_n,
    // Port A: lookup.
    input  logic         a_req,
    output logic         a_busy,
    input  logic [7:0]   a_ns,
    input  logic [255:0] a_key,
    output logic         a_done,      // one-cycle strobe; the fields below hold until the next request
    output logic         a_found,
    output logic [63:0]  a_blk,
    output logic [31:0]  a_txn,
    output logic         a_deleted,
    // Port B: write.
    input  logic         b_req,
    output logic         b_busy,
    input  logic [7:0]   b_ns,
    input  logic [255:0] b_key,
    input  logic [63:0]  b_blk,
    input  logic [31:0]  b_txn,
    input  logic         b_del,
    output logic         b_done,
    output logic         overflow
);
  localparam int IW = $clog2(ENTRIES);
  localparam int PW = $clog2(PROBES + 1);

  typedef struct packed {
    logic         valid;
    logic [7:0]   ns;
    logic [255:0] key;
    logic [63:0]  blk;
    logic [31:0]  txn;
    logic         deleted;
  } entry_t;

  // Entries as plain vectors (an array of structs is not inferred as a memory by every synthesis tool).
  localparam int EW = 1 + 8 + 256 + 64 + 32 + 1;  // the width of entry_t
  logic [EW-1:0] mem [ENTRIES];
`ifndef SYNTHESIS
  initial begin
    // Simulation starts from an empty table, as an FPGA does: block RAM without
    // initial contents powers up as zeros. On an ASIC a clearing pass would be needed.
    for (int i = 0; i < ENTRIES; i++) mem[i] = '0;
  end
`endif

  function automatic logic [IW-1:0] home(input logic [IW-1:0] key_lo, input logic [7:0] ns);
    home = key_lo ^ IW'(ns);
  endfunction

  // ------------------------------------------------------------------ port A
  typedef enum logic [1:0] {A_IDLE, A_READ, A_CMP} a_state_t;
  a_state_t     a_st;
  logic [IW-1:0] a_idx;
  logic [PW-1:0] a_cnt;
  logic [7:0]   a_ns_q;
  logic [255:0] a_key_q;
  entry_t       a_rd;

  assign a_busy = a_st != A_IDLE;

  always_ff @(posedge clk) a_rd <= mem[a_idx];

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      a_st      <= A_IDLE;
      a_idx     <= '0;
      a_cnt     <= '0;
      a_ns_q    <= '0;
      a_key_q   <= '0;
      a_done    <= 1'b0;
      a_found   <= 1'b0;
      a_blk     <= '0;
      a_txn     <= '0;
      a_deleted <= 1'b0;
    end else begin
      a_done <= 1'b0;
      unique case (a_st)
        A_IDLE: if (a_req) begin
          a_idx   <= home(a_key[IW-1:0], a_ns);
          a_cnt   <= '0;
          a_ns_q  <= a_ns;
          a_key_q <= a_key;
          a_st    <= A_READ;
        end
        A_READ: a_st <= A_CMP;   // a_rd is loaded at the end of this cycle
        A_CMP: begin
          if (!a_rd.valid || (a_rd.ns == a_ns_q && a_rd.key == a_key_q) || a_cnt == PW'(PROBES - 1)) begin
            a_found   <= a_rd.valid && a_rd.ns == a_ns_q && a_rd.key == a_key_q;
            a_blk     <= a_rd.blk;
            a_txn     <= a_rd.txn;
            a_deleted <= a_rd.deleted;
            a_done    <= 1'b1;
            a_st      <= A_IDLE;
          end else begin
            a_idx <= a_idx + 1'b1;
            a_cnt <= a_cnt + 1'b1;
            a_st  <= A_READ;
          end
        end
        default: a_st <= A_IDLE;
      endcase
    end
  end

  // ------------------------------------------------------------------ port B
  typedef enum logic [1:0] {B_IDLE, B_READ, B_CMP} b_state_t;
  b_state_t     b_st;
  logic [IW-1:0] b_idx;
  logic [PW-1:0] b_cnt;
  entry_t       b_new;
  /* verilator lint_off UNUSEDSIGNAL */
  entry_t       b_rd;        // only valid/ns/key matter to an insert
  /* verilator lint_on UNUSEDSIGNAL */
  logic         b_we;

  assign b_busy = b_st != B_IDLE;

  always_ff @(posedge clk) begin
    b_rd <= mem[b_idx];
    if (b_we) mem[b_idx] <= b_new;
  end

  always_comb begin
    b_we = 1'b0;
    if (b_st == B_CMP && (!b_rd.valid || (b_rd.ns == b_new.ns && b_rd.key == b_new.key))) b_we = 1'b1;
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      b_st     <= B_IDLE;
      b_idx    <= '0;
      b_cnt    <= '0;
      b_new    <= '0;
      b_done   <= 1'b0;
      overflow <= 1'b0;
    end else begin
      b_done <= 1'b0;
      unique case (b_st)
        B_IDLE: if (b_req) begin
          b_idx <= home(b_key[IW-1:0], b_ns);
          b_cnt <= '0;
          b_new.valid   <= 1'b1;
          b_new.ns      <= b_ns;
          b_new.key     <= b_key;
          b_new.blk     <= b_blk;
          b_new.txn     <= b_txn;
          b_new.deleted <= b_del;
          b_st  <= B_READ;
        end
        B_READ: b_st <= B_CMP;
        B_CMP: begin
          if (b_we) begin
            b_done <= 1'b1;
            b_st   <= B_IDLE;
          end else if (b_cnt == PW'(PROBES - 1)) begin
            overflow <= 1'b1;
            b_done   <= 1'b1;
            b_st     <= B_IDLE;
          end else begin
            b_idx <= b_idx + 1'b1;
            b_cnt <= b_cnt + 1'b1;
            b_st  <= B_READ;
          end
        end
        default: b_st <= B_IDLE;
      endcase
    end
  end
endmodule
