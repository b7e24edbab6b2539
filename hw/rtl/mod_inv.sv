// Modular inverse by the binary extended Euclidean algorithm.
//
// result = a^-1 mod m for an odd modulus m and gcd(a, m) = 1 (always true for
// a prime m and 0 < a < m, which is how the ECDSA engine uses it). Keeps
// u = x1*a and v = x2*a (mod m), starting from u = a, v = m, and strips one
// factor of two per cycle; an odd/odd step subtracts the smaller value and
// halves the (now even) difference in the same cycle, so the loop runs for at
// most about 2*WIDTH cycles (typically ~1.4*WIDTH).
//
// Degenerate inputs (a = 0, or a common factor with m) finish with result 0
// and ok low instead of looping forever.
//
// Handshake: `start` is sampled while idle; `done` pulses for one cycle with
// `result`/`ok` valid and held until the next start.
module mod_inv #(
    parameter int WIDTH = 256
) (
    input  logic             clk,
    input  logic             rst_n,
    input  logic             start,
    input  logic [WIDTH-1:0] a,
    input  logic [WIDTH-1:0] m,
    output logic             busy,
    output logic             done,
    output logic [WIDTH-1:0] result,
    output logic             ok
);
  typedef enum logic [1:0] {
    S_IDLE,
    S_RUN,
    S_DONE
  } state_e;

  state_e           state;
  logic [WIDTH-1:0] u, v, x1, x2, m_r;

  // x/2 mod m for x < m: add m first when x is odd (m is odd, so x+m is even).
  function automatic logic [WIDTH-1:0] half_mod(input logic [WIDTH-1:0] x,
                                                input logic [WIDTH-1:0] md);
    logic [WIDTH:0] sh;
    sh = x[0] ? ({1'b0, x} + {1'b0, md}) : {1'b0, x};
    half_mod = WIDTH'(sh >> 1);
  endfunction

  // (x - y) mod m for x, y < m.
  function automatic logic [WIDTH-1:0] sub_mod(input logic [WIDTH-1:0] x,
                                               input logic [WIDTH-1:0] y,
                                               input logic [WIDTH-1:0] md);
    logic [WIDTH:0] d;
    d = {1'b0, x} - {1'b0, y};
    sub_mod = d[WIDTH] ? (d[WIDTH-1:0] + md) : d[WIDTH-1:0];
  endfunction

  logic u_one, v_one, stuck, u_ge_v;
  logic [WIDTH-1:0] u_minus_v, v_minus_u;
  always_comb begin
    u_one     = (u == WIDTH'(1));
    v_one     = (v == WIDTH'(1));
    stuck     = (u == '0) || (v == '0);
    u_ge_v    = (u >= v);
    u_minus_v = u - v;
    v_minus_u = v - u;
  end

  assign busy = (state != S_IDLE);
  assign done = (state == S_DONE);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      state  <= S_IDLE;
      u      <= '0;
      v      <= '0;
      x1     <= '0;
      x2     <= '0;
      m_r    <= '0;
      result <= '0;
      ok     <= 1'b0;
    end else begin
      case (state)
        S_IDLE: begin
          if (start) begin
            u     <= a;
            v     <= m;
            x1    <= WIDTH'(1);
            x2    <= '0;
            m_r   <= m;
            state <= S_RUN;
          end
        end
        S_RUN: begin
          if (u_one || v_one || stuck) begin
            result <= u_one ? x1 : (v_one ? x2 : '0);
            ok     <= u_one || v_one;
            state  <= S_DONE;
          end else if (!u[0]) begin
            u  <= u >> 1;
            x1 <= half_mod(x1, m_r);
          end else if (!v[0]) begin
            v  <= v >> 1;
            x2 <= half_mod(x2, m_r);
          end else if (u_ge_v) begin
            u  <= u_minus_v >> 1;
            x1 <= half_mod(sub_mod(x1, x2, m_r), m_r);
          end else begin
            v  <= v_minus_u >> 1;
            x2 <= half_mod(sub_mod(x2, x1, m_r), m_r);
          end
        end
        default: begin  // S_DONE
          state <= S_IDLE;
        end
      endcase
    end
  end

endmodule
