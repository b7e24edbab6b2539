// Microcoded P-256 field/point processor used by ecdsa_engine.
//
// A 16-entry register file of 256-bit values, one Montgomery multiplier
// (mod p or mod n), one binary inverter (mod p or mod n) and a one-cycle
// modular adder/subtractor (mod p) execute short programs from a ROM. The
// controller (ecdsa_engine) picks a program with `prog` + `start`, waits for
// `done`, then inspects the zero flags of T1..T3 to branch. Curve values are
// in Montgomery form (x*2^256 mod p); see p256_pkg.sv for the constants.
//
// Programs (the point formulas are the standard a = -3 Jacobian doubling with
// 3M+5S and mixed Jacobian+affine addition with 8M+3S):
//   PREP   w = s^-1, u1 = e*w, u2 = r*w (mod n); Q to Montgomery form;
//          T1 = (x^3 - 3x + b) - y^2 (zero iff Q on the curve);
//          T2 = Qx - Gx, T3 = Qy - Gy (detect Q = +-G).
//   SUM    S = G + Q in affine coordinates (needs T2 != 0).
//   SUM2G  S = 2G (used when Q = G).
//   LOADT  (X, Y, Z) = (TX, TY, 1): the accumulator was the point at infinity.
//   DBL    (X, Y, Z) = 2 * (X, Y, Z).
//   MADD1  first half of (X, Y, Z) + (TX, TY): T2 = H, T1 = R (both zero means
//          the points are equal, H zero alone means they are opposite).
//   MADD2  second half of the addition.
//   FINAL  T3 = r*Z^2 - X and T2 = (r+n)*Z^2 - X (mod p): zero iff the affine
//          x-coordinate of the result equals r (resp. r + n).
// (TX, TY) name the table point selected by `tsel`: 1 = G, 2 = Q, 3 = G + Q.
//
// Handshake: `load` writes the raw inputs into the register file (only while
// idle). `start` is sampled while idle; `done` pulses for one cycle after the
// last instruction of the program has written its result.
module p256_point_ops #(
    parameter int WORD = 64   // Montgomery digit width; must divide 256
) (
    input  logic         clk,
    input  logic         rst_n,
    // raw inputs, written on `load`
    input  logic         load,
    input  logic [255:0] qx,
    input  logic [255:0] qy,
    input  logic [255:0] e,
    input  logic [255:0] r,
    input  logic [255:0] s,
    // program control
    input  logic [1:0]   tsel,
    input  logic         start,
    input  logic [2:0]   prog,
    output logic         busy,
    output logic         done,
    // results
    output logic [255:0] u1,
    output logic [255:0] u2,
    output logic         t1_zero,
    output logic         t2_zero,
    output logic         t3_zero
);

  // ---------------------------------------------------------------- operands
  // 0..15: register file, 16..31: constants and the TX/TY aliases.
  localparam logic [4:0] X = 5'd0, Y = 5'd1, Z = 5'd2;
  localparam logic [4:0] T1 = 5'd3, T2 = 5'd4, T3 = 5'd5, T4 = 5'd6, T5 = 5'd7;
  localparam logic [4:0] QX = 5'd8, QY = 5'd9, SX = 5'd10, SY = 5'd11;
  localparam logic [4:0] U1 = 5'd12;  // holds e until PREP replaces it by u1
  localparam logic [4:0] RS = 5'd13;  // r
  localparam logic [4:0] W  = 5'd14;  // holds s, then s^-1 mod n
  localparam logic [4:0] U2 = 5'd15;
  localparam logic [4:0] C_ZERO = 5'd16, C_ONE = 5'd17, C_R2P = 5'd18, C_R3P = 5'd19;
  localparam logic [4:0] C_R2N = 5'd20, C_THREE = 5'd21, C_B = 5'd22, C_GX = 5'd23;
  localparam logic [4:0] C_GY = 5'd24, C_G2X = 5'd25, C_G2Y = 5'd26, C_NM = 5'd27;
  localparam logic [4:0] TX = 5'd30, TY = 5'd31;

  // ------------------------------------------------------------ instructions
  typedef enum logic [2:0] {
    OP_ADDP,  // dst = a + b mod p
    OP_SUBP,  // dst = a - b mod p
    OP_MULP,  // dst = a * b / 2^256 mod p
    OP_MULN,  // dst = a * b / 2^256 mod n
    OP_INVP,  // dst = a^-1 mod p
    OP_INVN   // dst = a^-1 mod n
  } op_e;

  typedef struct packed {
    logic       last;
    op_e        op;
    logic [3:0] dst;
    logic [4:0] a;
    logic [4:0] b;
  } instr_t;

  // RF destinations are named with 5-bit operand codes; bit 4 is always 0.
  /* verilator lint_off UNUSEDSIGNAL */
  function automatic instr_t mk(input logic last, input op_e op, input logic [4:0] dst,
                                input logic [4:0] a, input logic [4:0] b);
    mk = {last, op, dst[3:0], a, b};  // instr_t's field order
  endfunction
  /* verilator lint_on UNUSEDSIGNAL */

  // Entry points into the ROM below.
  localparam logic [6:0] PC_PREP = 7'd0, PC_SUM = 7'd14, PC_SUM2G = 7'd23, PC_LOADT = 7'd25;
  localparam logic [6:0] PC_DBL = 7'd28, PC_MADD1 = 7'd52, PC_MADD2 = 7'd58, PC_FINAL = 7'd70;

  function automatic instr_t rom(input logic [6:0] pc);
    case (pc)
      // PREP: scalars mod n, then Q checks
      7'd0:  rom = mk(1'b0, OP_INVN, W, W, C_ZERO);      // s^-1
      7'd1:  rom = mk(1'b0, OP_MULN, W, W, C_R2N);       // w*2^256 (Montgomery form)
      7'd2:  rom = mk(1'b0, OP_MULN, U1, U1, W);         // u1 = e*w
      7'd3:  rom = mk(1'b0, OP_MULN, U2, RS, W);         // u2 = r*w
      7'd4:  rom = mk(1'b0, OP_MULP, QX, QX, C_R2P);     // to Montgomery form
      7'd5:  rom = mk(1'b0, OP_MULP, QY, QY, C_R2P);
      7'd6:  rom = mk(1'b0, OP_MULP, T1, QX, QX);
      7'd7:  rom = mk(1'b0, OP_SUBP, T1, T1, C_THREE);
      7'd8:  rom = mk(1'b0, OP_MULP, T1, T1, QX);        // x^3 - 3x
      7'd9:  rom = mk(1'b0, OP_ADDP, T1, T1, C_B);
      7'd10: rom = mk(1'b0, OP_MULP, T2, QY, QY);
      7'd11: rom = mk(1'b0, OP_SUBP, T1, T1, T2);        // 0 iff on curve
      7'd12: rom = mk(1'b0, OP_SUBP, T2, QX, C_GX);
      7'd13: rom = mk(1'b1, OP_SUBP, T3, QY, C_GY);
      // SUM: lambda = (Qy - Gy) / (Qx - Gx)
      7'd14: rom = mk(1'b0, OP_INVP, T4, T2, C_ZERO);    // (d*2^256)^-1
      7'd15: rom = mk(1'b0, OP_MULP, T4, T4, C_R3P);     // d^-1 in Montgomery form
      7'd16: rom = mk(1'b0, OP_MULP, T3, T3, T4);        // lambda
      7'd17: rom = mk(1'b0, OP_MULP, SX, T3, T3);
      7'd18: rom = mk(1'b0, OP_SUBP, SX, SX, C_GX);
      7'd19: rom = mk(1'b0, OP_SUBP, SX, SX, QX);        // lambda^2 - Gx - Qx
      7'd20: rom = mk(1'b0, OP_SUBP, T5, C_GX, SX);
      7'd21: rom = mk(1'b0, OP_MULP, SY, T3, T5);
      7'd22: rom = mk(1'b1, OP_SUBP, SY, SY, C_GY);
      // SUM2G
      7'd23: rom = mk(1'b0, OP_ADDP, SX, C_G2X, C_ZERO);
      7'd24: rom = mk(1'b1, OP_ADDP, SY, C_G2Y, C_ZERO);
      // LOADT
      7'd25: rom = mk(1'b0, OP_ADDP, X, TX, C_ZERO);
      7'd26: rom = mk(1'b0, OP_ADDP, Y, TY, C_ZERO);
      7'd27: rom = mk(1'b1, OP_ADDP, Z, C_ONE, C_ZERO);
      // DBL
      7'd28: rom = mk(1'b0, OP_MULP, T1, Z, Z);          // delta = Z^2
      7'd29: rom = mk(1'b0, OP_MULP, T2, Y, Y);          // gamma = Y^2
      7'd30: rom = mk(1'b0, OP_MULP, T3, X, T2);         // beta = X*gamma
      7'd31: rom = mk(1'b0, OP_SUBP, T4, X, T1);
      7'd32: rom = mk(1'b0, OP_ADDP, T5, X, T1);
      7'd33: rom = mk(1'b0, OP_MULP, T4, T4, T5);        // X^2 - delta^2
      7'd34: rom = mk(1'b0, OP_ADDP, T5, T4, T4);
      7'd35: rom = mk(1'b0, OP_ADDP, T4, T5, T4);        // alpha = 3(X^2 - delta^2)
      7'd36: rom = mk(1'b0, OP_ADDP, Z, Y, Z);
      7'd37: rom = mk(1'b0, OP_MULP, Z, Z, Z);
      7'd38: rom = mk(1'b0, OP_SUBP, Z, Z, T2);
      7'd39: rom = mk(1'b0, OP_SUBP, Z, Z, T1);          // Z3 = (Y+Z)^2 - gamma - delta
      7'd40: rom = mk(1'b0, OP_ADDP, T3, T3, T3);
      7'd41: rom = mk(1'b0, OP_ADDP, T3, T3, T3);        // 4 beta
      7'd42: rom = mk(1'b0, OP_ADDP, T5, T3, T3);        // 8 beta
      7'd43: rom = mk(1'b0, OP_MULP, X, T4, T4);
      7'd44: rom = mk(1'b0, OP_SUBP, X, X, T5);          // X3 = alpha^2 - 8 beta
      7'd45: rom = mk(1'b0, OP_SUBP, T3, T3, X);
      7'd46: rom = mk(1'b0, OP_MULP, T2, T2, T2);
      7'd47: rom = mk(1'b0, OP_ADDP, T2, T2, T2);
      7'd48: rom = mk(1'b0, OP_ADDP, T2, T2, T2);
      7'd49: rom = mk(1'b0, OP_ADDP, T2, T2, T2);        // 8 gamma^2
      7'd50: rom = mk(1'b0, OP_MULP, Y, T4, T3);
      7'd51: rom = mk(1'b1, OP_SUBP, Y, Y, T2);          // Y3 = alpha(4beta - X3) - 8gamma^2
      // MADD1
      7'd52: rom = mk(1'b0, OP_MULP, T1, Z, Z);          // Z^2
      7'd53: rom = mk(1'b0, OP_MULP, T2, TX, T1);        // U2 = TX*Z^2
      7'd54: rom = mk(1'b0, OP_MULP, T1, Z, T1);         // Z^3
      7'd55: rom = mk(1'b0, OP_MULP, T1, TY, T1);        // S2 = TY*Z^3
      7'd56: rom = mk(1'b0, OP_SUBP, T2, T2, X);         // H = U2 - X
      7'd57: rom = mk(1'b1, OP_SUBP, T1, T1, Y);         // R = S2 - Y
      // MADD2
      7'd58: rom = mk(1'b0, OP_MULP, T3, T2, T2);        // H^2
      7'd59: rom = mk(1'b0, OP_MULP, Z, Z, T2);          // Z3 = Z*H
      7'd60: rom = mk(1'b0, OP_MULP, T4, T2, T3);        // H^3
      7'd61: rom = mk(1'b0, OP_MULP, T3, X, T3);         // V = X*H^2
      7'd62: rom = mk(1'b0, OP_MULP, X, T1, T1);
      7'd63: rom = mk(1'b0, OP_SUBP, X, X, T4);
      7'd64: rom = mk(1'b0, OP_SUBP, X, X, T3);
      7'd65: rom = mk(1'b0, OP_SUBP, X, X, T3);          // X3 = R^2 - H^3 - 2V
      7'd66: rom = mk(1'b0, OP_SUBP, T3, T3, X);
      7'd67: rom = mk(1'b0, OP_MULP, T3, T1, T3);
      7'd68: rom = mk(1'b0, OP_MULP, T4, Y, T4);
      7'd69: rom = mk(1'b1, OP_SUBP, Y, T3, T4);         // Y3 = R(V - X3) - Y*H^3
      // FINAL
      7'd70: rom = mk(1'b0, OP_MULP, T1, Z, Z);
      7'd71: rom = mk(1'b0, OP_MULP, T2, RS, C_R2P);     // r in Montgomery form
      7'd72: rom = mk(1'b0, OP_MULP, T3, T2, T1);
      7'd73: rom = mk(1'b0, OP_SUBP, T3, T3, X);         // r*Z^2 - X
      7'd74: rom = mk(1'b0, OP_ADDP, T2, T2, C_NM);
      7'd75: rom = mk(1'b0, OP_MULP, T2, T2, T1);
      7'd76: rom = mk(1'b1, OP_SUBP, T2, T2, X);         // (r+n)*Z^2 - X
      default: rom = mk(1'b1, OP_ADDP, T5, C_ZERO, C_ZERO);
    endcase
  endfunction

  function automatic logic [6:0] entry_pc(input logic [2:0] pg);
    case (pg)
      p256_pkg::PRG_PREP:  entry_pc = PC_PREP;
      p256_pkg::PRG_SUM:   entry_pc = PC_SUM;
      p256_pkg::PRG_SUM2G: entry_pc = PC_SUM2G;
      p256_pkg::PRG_LOADT: entry_pc = PC_LOADT;
      p256_pkg::PRG_DBL:   entry_pc = PC_DBL;
      p256_pkg::PRG_MADD1: entry_pc = PC_MADD1;
      p256_pkg::PRG_MADD2: entry_pc = PC_MADD2;
      p256_pkg::PRG_FINAL: entry_pc = PC_FINAL;
      default:   entry_pc = PC_PREP;
    endcase
  endfunction

  // ----------------------------------------------------------------- datapath
  logic [255:0] rf [16];

  function automatic logic [255:0] tab_x(input logic [1:0] sel, input logic [255:0] qxm,
                                         input logic [255:0] sxm);
    case (sel)
      2'd1:    tab_x = p256_pkg::GX_M;
      2'd2:    tab_x = qxm;
      default: tab_x = sxm;
    endcase
  endfunction

  function automatic logic [255:0] operand(input logic [4:0] idx);
    if (!idx[4]) begin
      operand = rf[idx[3:0]];
    end else begin
      case (idx)
        C_ONE:   operand = p256_pkg::ONE_M;
        C_R2P:   operand = p256_pkg::R2P;
        C_R3P:   operand = p256_pkg::R3P;
        C_R2N:   operand = p256_pkg::R2N;
        C_THREE: operand = p256_pkg::THREE_M;
        C_B:     operand = p256_pkg::B_M;
        C_GX:    operand = p256_pkg::GX_M;
        C_GY:    operand = p256_pkg::GY_M;
        C_G2X:   operand = p256_pkg::G2X_M;
        C_G2Y:   operand = p256_pkg::G2Y_M;
        C_NM:    operand = p256_pkg::N_M;
        TX:      operand = tab_x(tsel, rf[QX[3:0]], rf[SX[3:0]]);
        TY:      operand = (tsel == 2'd1) ? p256_pkg::GY_M : ((tsel == 2'd2) ? rf[QY[3:0]] : rf[SY[3:0]]);
        default: operand = '0;
      endcase
    end
  endfunction

  typedef enum logic [1:0] {
    P_IDLE,
    P_RUN,    // execute rom(pc); add/sub retire here
    P_WAIT    // multiplier/inverter busy
  } pstate_e;

  pstate_e      pstate;
  logic [6:0]   pc;
  instr_t       ins;
  logic [255:0] opa, opb;
  logic         is_mul, is_inv, mod_n;

  always_comb begin
    ins    = rom(pc);
    opa    = operand(ins.a);
    opb    = operand(ins.b);
    is_mul = (ins.op == OP_MULP) || (ins.op == OP_MULN);
    is_inv = (ins.op == OP_INVP) || (ins.op == OP_INVN);
    mod_n  = (ins.op == OP_MULN) || (ins.op == OP_INVN);
  end

  // One-cycle add/sub mod p (both operands < p).
  logic [256:0] sum, sum_red, diff;
  logic [255:0] addsub;
  always_comb begin
    sum     = {1'b0, opa} + {1'b0, opb};
    sum_red = sum - {1'b0, p256_pkg::P};
    diff    = {1'b0, opa} - {1'b0, opb};
    if (ins.op == OP_SUBP) begin
      addsub = diff[256] ? (diff[255:0] + p256_pkg::P) : diff[255:0];
    end else begin
      addsub = sum_red[256] ? sum[255:0] : sum_red[255:0];
    end
  end

  logic         mm_done, inv_done;
  logic [255:0] mm_res, inv_res;
  logic         mm_start, inv_start;
  assign mm_start  = (pstate == P_RUN) && is_mul;
  assign inv_start = (pstate == P_RUN) && is_inv;

  /* verilator lint_off PINCONNECTEMPTY */
  mont_mul #(
      .WIDTH(256),
      .WORD (WORD)
  ) u_mm (
      .clk   (clk),
      .rst_n (rst_n),
      .start (mm_start),
      .a     (opa),
      .b     (opb),
      .m     (mod_n ? p256_pkg::N : p256_pkg::P),
      .m_ninv(mod_n ? p256_pkg::N_NINV[WORD-1:0] : p256_pkg::P_NINV[WORD-1:0]),
      .busy  (),
      .done  (mm_done),
      .result(mm_res)
  );

  mod_inv #(
      .WIDTH(256)
  ) u_inv (
      .clk   (clk),
      .rst_n (rst_n),
      .start (inv_start),
      .a     (opa),
      .m     (mod_n ? p256_pkg::N : p256_pkg::P),
      .busy  (),
      .done  (inv_done),
      .result(inv_res),
      .ok    ()
  );
  /* verilator lint_on PINCONNECTEMPTY */

  assign busy    = (pstate != P_IDLE);
  assign u1      = rf[U1[3:0]];
  assign u2      = rf[U2[3:0]];
  assign t1_zero = (rf[T1[3:0]] == '0);
  assign t2_zero = (rf[T2[3:0]] == '0);
  assign t3_zero = (rf[T3[3:0]] == '0);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      pstate <= P_IDLE;
      pc     <= '0;
      done   <= 1'b0;
      for (int i = 0; i < 16; i++) rf[i] <= '0;
    end else begin
      done <= 1'b0;
      case (pstate)
        P_IDLE: begin
          if (load) begin
            rf[QX[3:0]] <= qx;
            rf[QY[3:0]] <= qy;
            rf[U1[3:0]] <= e;
            rf[RS[3:0]] <= r;
            rf[W[3:0]]  <= s;
          end
          if (start) begin
            pc     <= entry_pc(prog);
            pstate <= P_RUN;
          end
        end
        P_RUN: begin
          if (is_mul || is_inv) begin
            pstate <= P_WAIT;
          end else begin
            rf[ins.dst] <= addsub;
            if (ins.last) begin
              done   <= 1'b1;
              pstate <= P_IDLE;
            end else begin
              pc <= pc + 1'b1;
            end
          end
        end
        default: begin  // P_WAIT
          if (mm_done || inv_done) begin
            rf[ins.dst] <= mm_done ? mm_res : inv_res;
            if (ins.last) begin
              done   <= 1'b1;
              pstate <= P_IDLE;
            end else begin
              pc     <= pc + 1'b1;
              pstate <= P_RUN;
            end
          end
        end
      endcase
    end
  end

endmodule
