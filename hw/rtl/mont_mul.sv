// Word-serial Montgomery multiplier: result = a * b * 2^-WIDTH mod m.
//
// One WORD-bit digit of `a` is consumed per two clock cycles (digit product,
// then reduction), so a multiplication takes 2*WIDTH/WORD + 1 cycles from the
// `start` cycle to the `done` cycle. The modulus is an input, which lets one
// instance serve both the P-256 field prime and the group order.
//
// Operand contract: a < 2^WIDTH, b < m, m odd with m > 2^(WIDTH-1). Then the
// running sum t stays below m + b < 2m, so one conditional subtraction at the
// end gives a fully reduced result in [0, m).
//
// Handshake: `start` is sampled only while idle (busy low). `done` is high for
// exactly one cycle, during which `result` is valid (it is combinational from
// internal registers and should be captured by the caller in that cycle).
module mont_mul #(
    parameter int WIDTH = 256,
    parameter int WORD  = 64
) (
    input  logic             clk,
    input  logic             rst_n,
    input  logic             start,
    input  logic [WIDTH-1:0] a,
    input  logic [WIDTH-1:0] b,
    input  logic [WIDTH-1:0] m,
    input  logic [WORD-1:0]  m_ninv,   // -m^-1 mod 2^WORD
    output logic             busy,
    output logic             done,
    output logic [WIDTH-1:0] result
);
  localparam int NW = WIDTH / WORD;
  localparam int CW = (NW > 1) ? $clog2(NW) : 1;
  // t + a_i*b + q*m < 2^WORD * (m + b) < 2^(WIDTH+WORD+1)
  localparam int UW = WIDTH + WORD + 1;

  if (WIDTH % WORD != 0) begin : g_bad_word
    $error("mont_mul: WIDTH must be a multiple of WORD");
  end

  typedef enum logic [1:0] {
    S_IDLE,
    S_RED,   // reduce: u += q*m, t = u >> WORD
    S_MUL,   // accumulate: u = t + a_i*b
    S_FIN    // conditional subtraction, done
  } state_e;

  state_e           state;
  logic [WIDTH-1:0] a_sh;   // remaining digits of a, least significant first
  logic [WIDTH-1:0] b_r;
  logic [WIDTH-1:0] m_r;
  logic [WORD-1:0]  ninv_r;
  logic [WIDTH:0]   t;      // < m + b, needs WIDTH+1 bits
  logic [UW-1:0]    u;
  logic [CW-1:0]    cnt;    // digits already reduced

  // Digit product. In the idle/start cycle the first digit is taken straight
  // from the inputs so no cycle is spent only latching operands.
  logic [WORD-1:0]  digit;
  logic [WIDTH-1:0] mul_b;
  logic [WIDTH:0]   acc_t;
  logic [UW-1:0]    u_mul;
  always_comb begin
    if (state == S_IDLE) begin
      digit = a[WORD-1:0];
      mul_b = b;
      acc_t = '0;
    end else begin
      digit = a_sh[WORD-1:0];
      mul_b = b_r;
      acc_t = t;
    end
    u_mul = UW'(acc_t) + UW'(digit) * UW'(mul_b);
  end

  // Reduction: pick q so that the low WORD bits of u + q*m vanish.
  logic [WORD-1:0] q;
  /* verilator lint_off UNUSEDSIGNAL */
  logic [UW-1:0]   u_red;   // low WORD bits are zero by construction
  /* verilator lint_on UNUSEDSIGNAL */
  always_comb begin
    q     = u[WORD-1:0] * ninv_r;
    u_red = u + UW'(q) * UW'(m_r);
  end

  // Final conditional subtraction (t < 2m here).
  logic [WIDTH+1:0] t_sub;
  always_comb begin
    t_sub  = {1'b0, t} - {2'b00, m_r};
    result = t_sub[WIDTH+1] ? t[WIDTH-1:0] : t_sub[WIDTH-1:0];
  end

  assign busy = (state != S_IDLE);
  assign done = (state == S_FIN);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      state  <= S_IDLE;
      a_sh   <= '0;
      b_r    <= '0;
      m_r    <= '0;
      ninv_r <= '0;
      t      <= '0;
      u      <= '0;
      cnt    <= '0;
    end else begin
      case (state)
        S_IDLE: begin
          if (start) begin
            a_sh   <= a;
            b_r    <= b;
            m_r    <= m;
            ninv_r <= m_ninv;
            u      <= u_mul;
            cnt    <= '0;
            state  <= S_RED;
          end
        end
        S_RED: begin
          t <= u_red[UW-1:WORD];
          if (cnt == CW'(NW - 1)) begin
            state <= S_FIN;
          end else begin
            cnt   <= cnt + 1'b1;
            a_sh  <= a_sh >> WORD;
            state <= S_MUL;
          end
        end
        S_MUL: begin
          u     <= u_mul;
          state <= S_RED;
        end
        default: begin  // S_FIN
          state <= S_IDLE;
        end
      endcase
    end
  end

endmodule
