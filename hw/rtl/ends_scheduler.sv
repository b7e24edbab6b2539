// Endorsement scheduler of tx_vscc (hw/DESIGN.md section 5).
//
// It hands a transaction's endorsements, in order, to the first of the M
// ECDSA engines that is free. Endorsements whose signer is not in the
// identity cache, or whose DER did not parse, are skipped: such an
// endorsement satisfies no principal. Each verified endorsement sets its
// org's bits {member, roles}. The policy evaluator (ends_policy_evaluator,
// outside) is asked every cycle. When it is satisfied, the scheduler stops:
// no further endorsement is started and the engines still running are
// cancelled through `kill` (a one-cycle reset). When every endorsement has
// been tried and the policy is still not satisfied, it fails.
module ends_scheduler
#(
    parameter int M    = 2,
    parameter int ORGS = 8
) (
    input  logic                  clk,
    input  logic                  rst_n,
    // One transaction at a time.
    input  logic                  start,       // sampled when idle
    output logic                  idle,
    input  logic [2:0]            n_ends,
    input  logic [bmac_pkg::MAX_ENDS*bmac_pkg::END_REC_W-1:0] ends,  // end_rec_t i at [i*END_REC_W +: END_REC_W]
    output logic                  finished,    // one-cycle strobe
    output logic                  pass,        // verdict, with `finished`
    output logic [2:0]            skipped,     // with `finished`: endorsements never verified to the end
    // Policy circuit.
    output logic [5*ORGS-1:0]     sat,
    input  logic                  satisfied,
    // Engines (inputs are shared; `eng_start[k]` selects one).
    output logic [M-1:0]          eng_start,
    output bmac_pkg::sig_job_t    eng_sig,
    input  logic [M-1:0]          eng_busy,
    input  logic [M-1:0]          eng_done,
    input  logic [M-1:0]          eng_valid,
    output logic [M-1:0]          kill
);
  typedef enum logic [1:0] {S_IDLE, S_RUN, S_STOP} state_t;
  state_t           st;
  logic [2:0]       n_q;
  logic [bmac_pkg::MAX_ENDS*bmac_pkg::END_REC_W-1:0] ends_q;
  logic [2:0]       next;          // next endorsement to dispatch
  logic [M-1:0]     active;        // engine runs one of ours
  logic [7:0]       eng_org   [M];
  logic [3:0]       eng_roles [M];

  assign idle = st == S_IDLE;

  // First free engine.
  logic             have_free;
  localparam int KW = (M > 1) ? $clog2(M) : 1;
  logic [KW-1:0]    free_k;
  always_comb begin
    have_free = 1'b0;
    free_k    = '0;
    for (int k = M - 1; k >= 0; k--)
      if (!active[k] && !eng_busy[k] && !kill[k]) begin
        have_free = 1'b1;
        free_k    = KW'(k);
      end
  end

  bmac_pkg::end_rec_t cur;
  always_comb begin
    cur = '0;
    for (int i = 0; i < bmac_pkg::MAX_ENDS; i++)
      if (next[1:0] == 2'(i)) cur = ends_q[i * bmac_pkg::END_REC_W +: bmac_pkg::END_REC_W];
  end
  assign eng_sig = cur.sig;

  logic cur_usable, dispatch;
  assign cur_usable = cur.has_key && cur.der_ok;
  assign dispatch   = st == S_RUN && !satisfied && next != n_q && cur_usable && have_free;

  always_comb begin
    eng_start = '0;
    if (dispatch) eng_start[free_k] = 1'b1;
  end

  // Bits set by the engines finishing this cycle (several may finish together).
  logic [5*ORGS-1:0] sat_add;
  always_comb begin
    sat_add = '0;
    for (int k = 0; k < M; k++)
      for (int o = 0; o < ORGS; o++)
        if (active[k] && eng_done[k] && eng_valid[k] && eng_org[k] == 8'(o))
          sat_add[5*o +: 5] = sat_add[5*o +: 5] | {1'b1, eng_roles[k]};
  end

  // Engines cancelled now, and endorsements that will never be verified.
  logic [2:0] cancelled;
  always_comb begin
    cancelled = 3'(n_q - next);
    for (int k = 0; k < M; k++) if (active[k] && !eng_done[k]) cancelled = cancelled + 3'd1;
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st       <= S_IDLE;
      n_q      <= '0;
      ends_q   <= '0;
      next     <= '0;
      active   <= '0;
      sat      <= '0;
      kill     <= '0;
      finished <= 1'b0;
      pass     <= 1'b0;
      skipped  <= '0;
      for (int k = 0; k < M; k++) begin
        eng_org[k]   <= '0;
        eng_roles[k] <= '0;
      end
    end else begin
      finished <= 1'b0;
      kill     <= '0;
      // Results of the engines.
      for (int k = 0; k < M; k++) if (active[k] && eng_done[k]) active[k] <= 1'b0;
      sat <= sat | sat_add;
      unique case (st)
        S_IDLE: if (start) begin
          n_q    <= n_ends;
          ends_q <= ends;
          next   <= '0;
          sat    <= '0;
          st     <= S_RUN;
        end
        S_RUN: begin
          if (satisfied) begin
            kill     <= active & ~eng_done;
            active   <= '0;
            skipped  <= cancelled;
            pass     <= 1'b1;
            finished <= 1'b1;
            st       <= S_STOP;
          end else if (next != n_q) begin
            if (!cur_usable) next <= next + 3'd1;
            else if (dispatch) begin
              active[free_k]    <= 1'b1;
              eng_org[free_k]   <= cur.org;
              eng_roles[free_k] <= cur.roles;
              next              <= next + 3'd1;
            end
          end else if (active == '0) begin
            skipped  <= '0;
            pass     <= 1'b0;
            finished <= 1'b1;
            st       <= S_STOP;
          end
        end
        // One cycle for the cancelled engines to reset before the next transaction.
        S_STOP: st <= S_IDLE;
        default: st <= S_IDLE;
      endcase
    end
  end
endmodule
