// ECDSA P-256 signature verification engine.
//
// Accepts (Qx, Qy, e, r, s) on `start` and reports `valid` with a one-cycle
// `done` strobe. The verdict follows Fabric's rules for endorsement and
// creator signatures: the signature is rejected when
//   - r or s is 0 or >= n,
//   - s > floor(n/2) (Fabric only accepts low-S signatures),
//   - Qx or Qy >= p, or Q is not on the curve,
//   - R = u1*G + u2*Q is the point at infinity,
//   - R.x mod n != r,
// with w = s^-1 mod n, u1 = e*w mod n, u2 = r*w mod n. e is the 256-bit hash
// taken as a big-endian integer (for SHA-256 no truncation is needed).
//
// R is computed with Shamir's trick: one pass over the 256 bit positions of
// (u1, u2), doubling a Jacobian accumulator and adding G, Q or G+Q (all kept
// affine) for the bit pair. Field arithmetic, sequencing and the microcode live
// in p256_point_ops; this module runs the checks, the scalar loop and the
// exceptional cases of the addition (equal or opposite points, infinity).
// Instead of inverting Z at the end, R.x == r is checked as X == r*Z^2, and
// X == (r+n)*Z^2 when r + n < p.
//
// Latency is data dependent (an addition is done only for bit pairs that are
// not both zero, ~3/4 of them): about 46k cycles with WORD = 64 and 79k with
// WORD = 32 (measured numbers in hw/README.md). A range or low-S reject
// raises done 2 cycles after start; an off-curve key is rejected after the
// scalar phase (~450 cycles).
//
// Handshake: `start` is sampled while `busy` is low; inputs need to be valid
// only in that cycle. `done` pulses once; `valid` is held until the next start.
module ecdsa_engine #(
    parameter int WORD = 64   // Montgomery multiplier digit width (divides 256)
) (
    input  logic         clk,
    input  logic         rst_n,
    input  logic         start,
    input  logic [255:0] qx,
    input  logic [255:0] qy,
    input  logic [255:0] e,
    input  logic [255:0] r,
    input  logic [255:0] s,
    output logic         busy,
    output logic         done,
    output logic         valid
);

  typedef enum logic [3:0] {
    S_IDLE,
    S_CHECK,    // act on the range checks latched at start
    S_PREP,     // scalars, key conversion, on-curve test
    S_SUM,      // G + Q
    S_BIT,      // top of the per-bit loop
    S_DBL,      // doubling of the accumulator
    S_ADD,      // pick the table point for the bit pair
    S_LOADT,    // accumulator was infinity: take the table point
    S_MADD1,    // first half of the addition
    S_MADD2,    // second half of the addition (or doubling when R == T)
    S_NEXT,     // advance to the next bit
    S_FINAL,    // x-coordinate comparison
    S_DONE
  } state_e;

  state_e       state;
  logic         pre_ok;     // range / low-S checks passed
  logic         r_small;    // r < p - n: r + n is also a candidate x
  logic         acc_inf;    // accumulator is the point at infinity
  logic         sum_inf;    // G + Q is the point at infinity (Q = -G)
  logic [255:0] k1, k2;     // u1, u2, consumed from the most significant bit
  logic [7:0]   bit_cnt;
  logic [1:0]   tsel;

  logic         po_start, po_done, po_load;
  logic [2:0]   po_prog;
  logic [255:0] po_u1, po_u2;
  logic         t1_zero, t2_zero, t3_zero;

  // Checks that need only the raw inputs, evaluated in the start cycle.
  logic in_ok;
  always_comb begin
    in_ok = (r != '0) && (r < p256_pkg::N) && (s != '0) && (s <= p256_pkg::HALF_N) && (qx < p256_pkg::P) && (qy < p256_pkg::P);
  end

  assign po_load = (state == S_IDLE) && start;
  assign busy    = (state != S_IDLE);

  /* verilator lint_off PINCONNECTEMPTY */
  p256_point_ops #(
      .WORD(WORD)
  ) u_ops (
      .clk    (clk),
      .rst_n  (rst_n),
      .load   (po_load),
      .qx     (qx),
      .qy     (qy),
      .e      (e),
      .r      (r),
      .s      (s),
      .tsel   (tsel),
      .start  (po_start),
      .prog   (po_prog),
      .busy   (),
      .done   (po_done),
      .u1     (po_u1),
      .u2     (po_u2),
      .t1_zero(t1_zero),
      .t2_zero(t2_zero),
      .t3_zero(t3_zero)
  );
  /* verilator lint_on PINCONNECTEMPTY */

  logic [1:0] pair;
  assign pair = {k2[255], k1[255]};  // 1: G (u1 bit), 2: Q (u2 bit), 3: G + Q

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      state    <= S_IDLE;
      pre_ok   <= 1'b0;
      r_small  <= 1'b0;
      acc_inf  <= 1'b1;
      sum_inf  <= 1'b0;
      k1       <= '0;
      k2       <= '0;
      bit_cnt  <= '0;
      tsel     <= 2'd1;
      po_start <= 1'b0;
      po_prog  <= p256_pkg::PRG_PREP;
      done     <= 1'b0;
      valid    <= 1'b0;
    end else begin
      po_start <= 1'b0;
      done     <= 1'b0;
      case (state)
        S_IDLE: begin
          if (start) begin
            pre_ok  <= in_ok;
            r_small <= (r < p256_pkg::P_MINUS_N);
            valid   <= 1'b0;
            state   <= S_CHECK;
          end
        end
        S_CHECK: begin
          if (pre_ok) begin
            po_prog  <= p256_pkg::PRG_PREP;
            po_start <= 1'b1;
            state    <= S_PREP;
          end else begin
            state <= S_DONE;
          end
        end
        S_PREP: begin
          if (po_done) begin
            sum_inf <= 1'b0;
            if (!t1_zero) begin
              state <= S_DONE;  // Q not on the curve
            end else if (t2_zero && !t3_zero) begin
              sum_inf <= 1'b1;  // Q = -G
              state   <= S_SUM;
            end else begin
              po_prog  <= t2_zero ? p256_pkg::PRG_SUM2G : p256_pkg::PRG_SUM;
              po_start <= 1'b1;
              state    <= S_SUM;
            end
          end
        end
        S_SUM: begin
          if (po_done || sum_inf) begin
            k1      <= po_u1;
            k2      <= po_u2;
            bit_cnt <= 8'd255;
            acc_inf <= 1'b1;
            state   <= S_BIT;
          end
        end
        S_BIT: begin
          if (acc_inf) begin
            state <= S_ADD;  // doubling infinity is a no-op
          end else begin
            po_prog  <= p256_pkg::PRG_DBL;
            po_start <= 1'b1;
            state    <= S_DBL;
          end
        end
        S_DBL: begin
          if (po_done) state <= S_ADD;
        end
        S_ADD: begin
          tsel <= pair;
          if (pair == 2'd0 || (pair == 2'd3 && sum_inf)) begin
            state <= S_NEXT;
          end else if (acc_inf) begin
            po_prog  <= p256_pkg::PRG_LOADT;
            po_start <= 1'b1;
            state    <= S_LOADT;
          end else begin
            po_prog  <= p256_pkg::PRG_MADD1;
            po_start <= 1'b1;
            state    <= S_MADD1;
          end
        end
        S_LOADT: begin
          if (po_done) begin
            acc_inf <= 1'b0;
            state   <= S_NEXT;
          end
        end
        S_MADD1: begin
          if (po_done) begin
            if (!t2_zero) begin
              po_prog  <= p256_pkg::PRG_MADD2;
              po_start <= 1'b1;
              state    <= S_MADD2;
            end else if (t1_zero) begin
              po_prog  <= p256_pkg::PRG_DBL;  // R == T: the sum is 2R
              po_start <= 1'b1;
              state    <= S_MADD2;
            end else begin
              acc_inf <= 1'b1;  // R == -T
              state   <= S_NEXT;
            end
          end
        end
        S_MADD2: begin
          if (po_done) state <= S_NEXT;
        end
        S_NEXT: begin
          k1 <= k1 << 1;
          k2 <= k2 << 1;
          if (bit_cnt == 8'd0) begin
            if (acc_inf) begin
              state <= S_DONE;  // R = infinity
            end else begin
              po_prog  <= p256_pkg::PRG_FINAL;
              po_start <= 1'b1;
              state    <= S_FINAL;
            end
          end else begin
            bit_cnt <= bit_cnt - 1'b1;
            state   <= S_BIT;
          end
        end
        S_FINAL: begin
          if (po_done) begin
            valid <= t3_zero || (r_small && t2_zero);
            state <= S_DONE;
          end
        end
        default: begin  // S_DONE
          done  <= 1'b1;
          state <= S_IDLE;
        end
      endcase
    end
  end

endmodule
