// Shared types of the BMac pipeline (hw/DESIGN.md section 3): the records the
// protocol processor's DataWriter puts into block_fifo, tx_fifo, ends_fifo,
// rdset_fifo and wrset_fifo. The Fabric TxValidationCode values the block
// processor produces are in bmac_regs_pkg (generated from hw/gen/regmap.toml).
/* verilator lint_off UNUSEDPARAM */
package bmac_pkg;

  localparam int MAX_ENDS = 4;             // endorsements per transaction
  localparam int SLOTS    = 1 + MAX_ENDS;  // signature slots: creator + endorsements

  // Endorsement-policy table (hw/DESIGN.md section 5), filled at run time by POLICY_SYNC sections. An
  // entry is a program of POL_GATES threshold gates over POL_LEAVES leaves (org, role bit); the root is
  // the last gate. Its wire form is POL_BYTES bytes: per leaf {org, role bit}, then per gate
  // {threshold, leaf mask, gate mask}. Stored as {valid, wire bytes}, byte 0 in the top bits.
  localparam int POL_IDS    = 32;                          // table entries; id 0 means "no policy"
  localparam int POL_LEAVES = 8;
  localparam int POL_GATES  = 8;
  localparam int POL_BYTES  = 2 * POL_LEAVES + 3 * POL_GATES;
  localparam int POL_W      = 1 + 8 * POL_BYTES;

  // Range-query probe requirements (PROBE annotation flags).
  localparam logic [1:0] PROBE_UNTOUCHED = 2'd1;
  localparam logic [1:0] PROBE_DELETED   = 2'd2;
  localparam logic [1:0] PROBE_NOT_PUT   = 2'd3;

  // One signature to verify: public key, hash and (r, s), all big-endian.
  typedef struct packed {
    logic [255:0] qx;
    logic [255:0] qy;
    logic [255:0] e;
    logic [255:0] r;
    logic [255:0] s;
  } sig_job_t;

  // block_fifo: the orderer signature of a block.
  typedef struct packed {
    logic [63:0] blk;
    logic [7:0]  policy_id;  // BlockValidation circuit
    logic        has_key;    // signer found in the identity cache
    logic        der_ok;     // DER parsed and r, s fit 256 bits
    logic [7:0]  org;
    logic [3:0]  roles;
    sig_job_t    sig;
  } block_rec_t;

  // tx_fifo: one transaction with its creator signature.
  typedef struct packed {
    logic [63:0] blk;
    logic [15:0] tx_idx;
    logic        last;
    logic [7:0]  pre_code;
    logic [7:0]  post_code;
    logic [7:0]  policy_id;
    logic [15:0] dup_tag;
    logic [7:0]  phantom_seq;  // 8'hff: none
    logic [2:0]  n_ends;
    logic [7:0]  n_rd;
    logic [7:0]  n_wr;
    logic        has_key;
    logic        der_ok;
    sig_job_t    sig;
  } tx_rec_t;

  // ends_fifo: one endorsement.
  typedef struct packed {
    logic        has_key;
    logic        der_ok;
    logic [7:0]  org;
    logic [3:0]  roles;
    sig_job_t    sig;
  } end_rec_t;

  // Width of end_rec_t. Arrays of records are kept as flat vectors of this stride so that every
  // synthesis tool reads them; a wrong value shows up as a width mismatch in Verilator's lint.
  localparam int END_REC_W = 2 + 8 + 4 + 5 * 256;

  // rdset_fifo: one read (kind 0) or range-query probe (kind 1).
  typedef struct packed {
    logic         kind;
    logic [1:0]   req;       // probe requirement
    logic [7:0]   seq;       // position in Fabric's MVCC order
    logic [7:0]   ns;
    logic         has_ver;
    logic [63:0]  ver_blk;
    logic [63:0]  ver_tx;
    logic [255:0] key;       // SHA-256 of the key bytes
  } rd_rec_t;

  // wrset_fifo: one written key, or a state-sync entry with its version.
  typedef struct packed {
    logic         sync;
    logic         del;
    logic [7:0]   ns;
    logic [63:0]  ver_blk;
    logic [31:0]  ver_tx;
    logic [255:0] key;
  } wr_rec_t;

  // What the scheduler keeps in order for the collector and the MVCC stage.
  typedef struct packed {
    logic [15:0] gseq;
    logic [63:0] blk;
    logic [15:0] tx_idx;
    logic        last;
    logic [15:0] dup_tag;
    logic [7:0]  phantom_seq;
    logic [7:0]  n_rd;
    logic [7:0]  n_wr;
  } tx_meta_t;

  // A transaction handed to a tx_validator.
  typedef struct packed {
    logic [15:0] gseq;
    logic [7:0]  pre_code;
    logic [7:0]  post_code;
    logic [7:0]  policy_id;
    logic        has_key;
    logic        der_ok;
    sig_job_t    sig;
    logic [2:0]  n_ends;
    logic [MAX_ENDS*END_REC_W-1:0] ends;  // end_rec_t per endorsement, endorsement i at [i*END_REC_W +: END_REC_W]
  } tx_job_t;

  // A transaction's result leaving a tx_validator.
  typedef struct packed {
    logic [15:0] gseq;
    logic [7:0]  code;
  } tx_res_t;

  // One transaction's final result (res_fifo).
  typedef struct packed {
    logic [63:0] blk;
    logic [15:0] tx_idx;
    logic [7:0]  code;
    logic        last;
    logic        block_valid;
  } res_rec_t;

endpackage
