// AXI-Stream (DATA_W bits, byte lanes little-endian: the frame's first byte in
// tdata[7:0]) to a one-byte-per-cycle stream. tkeep must be contiguous from
// lane 0, as Ethernet MACs deliver it. The last kept byte of a tlast beat
// carries b_last.
module axis_to_bytes #(
    parameter int DATA_W = 64
) (
    input  logic                clk,
    input  logic                rst_n,
    input  logic [DATA_W-1:0]   s_tdata,
    input  logic [DATA_W/8-1:0] s_tkeep,
    input  logic                s_tlast,
    input  logic                s_tvalid,
    output logic                s_tready,
    output logic                b_valid,
    output logic [7:0]          b_data,
    output logic                b_last,
    input  logic                b_ready
);
  localparam int NB = DATA_W / 8;
  localparam int LW = $clog2(NB);

  logic [DATA_W-1:0] data;
  logic [NB-1:0]     keep;
  logic              last;
  logic              full;
  logic [LW-1:0]     lane;

  logic lane_is_last;
  assign lane_is_last = (lane == LW'(NB - 1)) || !keep[lane + 1'b1];
  assign b_valid  = full && keep[lane];
  assign b_data   = data[8*lane +: 8];
  assign b_last   = last && lane_is_last;
  // A beat is taken when the register is empty or its last byte leaves now.
  assign s_tready = !full || (b_ready && lane_is_last) || !keep[lane];

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      data <= '0;
      keep <= '0;
      last <= 1'b0;
      full <= 1'b0;
      lane <= '0;
    end else begin
      if (s_tvalid && s_tready) begin
        data <= s_tdata;
        keep <= s_tkeep;
        last <= s_tlast;
        full <= 1'b1;
        lane <= '0;
      end else if (full && (!keep[lane] || (b_ready && lane_is_last))) begin
        full <= 1'b0;
      end else if (b_valid && b_ready) begin
        lane <= lane + 1'b1;
      end
    end
  end
endmodule
