// In-order collector (hw/DESIGN.md section 3). The N validators finish out of
// order; each result is parked in a reorder buffer at gseq mod RB. The
// transaction at the head of meta_fifo leaves, with its code, as soon as its
// result is there. `released` counts the transactions that left, for the
// scheduler's flow control.
module tx_collector
#(
    parameter int N  = 4,
    parameter int RB = 16   // power of two, at least the transactions that can be in flight
) (
    input  logic          clk,
    input  logic          rst_n,
    input  logic [N-1:0]  res_valid,
    output logic [N-1:0]  res_ready,
    input  bmac_pkg::tx_res_t [N-1:0] res,
    input  logic          meta_valid,
    output logic          meta_ready,
    input  bmac_pkg::tx_meta_t meta,
    output logic          out_valid,
    input  logic          out_ready,
    output bmac_pkg::tx_meta_t out_meta,
    output logic [7:0]    out_code,
    output logic [15:0]   released
);
  localparam int RW = $clog2(RB);
  localparam int VW = (N > 1) ? $clog2(N) : 1;

  logic [RB-1:0] rb_valid;
  logic [7:0]    rb_code [RB];

  // One result accepted per cycle, rotating priority.
  logic [VW-1:0] rr;
  logic          have;
  logic [VW-1:0] pick;
  always_comb begin
    have = 1'b0;
    pick = '0;
    for (int j = N - 1; j >= 0; j--) begin
      logic [VW-1:0] i;
      i = VW'((32'(rr) + 32'(j)) % N);
      if (res_valid[i]) begin
        have = 1'b1;
        pick = i;
      end
    end
  end
  bmac_pkg::tx_res_t picked;
  assign picked = res[pick];
  always_comb begin
    res_ready = '0;
    if (have) res_ready[pick] = 1'b1;
  end

  logic [RW-1:0] head;
  assign head      = meta.gseq[RW-1:0];
  assign out_valid = meta_valid && rb_valid[head];
  assign out_meta  = meta;
  assign out_code  = rb_code[head];
  assign meta_ready = out_valid && out_ready;

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      rb_valid <= '0;
      rr       <= '0;
      released <= '0;
      for (int i = 0; i < RB; i++) rb_code[i] <= '0;
    end else begin
      if (out_valid && out_ready) begin
        rb_valid[head] <= 1'b0;
        released       <= released + 16'd1;
      end
      if (have) begin
        rb_valid[picked.gseq[RW-1:0]] <= 1'b1;
        rb_code[picked.gseq[RW-1:0]]  <= picked.code;
        rr <= (rr == VW'(N - 1)) ? '0 : rr + 1'b1;
      end
    end
  end
endmodule
