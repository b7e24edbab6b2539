// NIST P-256 (secp256r1) constants for the ECDSA verification datapath.
//
// Field elements on the curve side are kept in Montgomery form x*R mod p with
// R = 2^256; the *_M constants below are already in that form so the microcode
// never has to convert them at run time. Scalars (mod n) are converted only
// where a product is needed (see ecdsa_engine.sv for the flow).
// Not every user needs every constant.
/* verilator lint_off UNUSEDPARAM */
package p256_pkg;

  // Field prime p = 2^256 - 2^224 + 2^192 + 2^96 - 1 and group order n.
  localparam logic [255:0] P = 256'hffffffff00000001000000000000000000000000ffffffffffffffffffffffff;
  localparam logic [255:0] N = 256'hffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551;

  // -m^-1 mod 2^256. Montgomery reduction with a WORD-bit digit needs
  // -m^-1 mod 2^WORD, which is simply the low WORD bits of these values.
  localparam logic [255:0] P_NINV = 256'hffffffff00000002000000000000000000000001000000000000000000000001;
  localparam logic [255:0] N_NINV = 256'h60d06633a9d6281c50fe77ecc588c6f648c944087d74d2e4ccd1c8aaee00bc4f;

  // Conversion constants: R^2 mod p (to Montgomery form), R^3 mod p (fixes up
  // the R^-1 factor left by the binary inverter), R^2 mod n.
  localparam logic [255:0] R2P = 256'h00000004fffffffdfffffffffffffffefffffffbffffffff0000000000000003;
  localparam logic [255:0] R3P = 256'h000000180000000100000005fffffffcffffffedfffffff7fffffffd0000000a;
  localparam logic [255:0] R2N = 256'h66e12d94f3d956202845b2392b6bec594699799c49bd6fa683244c95be79eea2;

  // Montgomery-form field constants: 1, 3, curve coefficient b, n (for the
  // r + n candidate of the final x-coordinate check).
  localparam logic [255:0] ONE_M   = 256'h00000000fffffffeffffffffffffffffffffffff000000000000000000000001;
  localparam logic [255:0] THREE_M = 256'h00000002fffffffcfffffffffffffffffffffffd000000000000000000000003;
  localparam logic [255:0] B_M     = 256'hdc30061d04874834e5a220abf7212ed6acf005cd78843090d89cdf6229c4bddf;
  localparam logic [255:0] N_M     = 256'h98648c200fe30feb9c0166ce652e96b789b1054463fe99319ad169483335f568;

  // Base point G and 2G (used when the public key equals G) in Montgomery form.
  localparam logic [255:0] GX_M  = 256'h18905f76a53755c679fb732b7762251075ba95fc5fedb60179e730d418a9143c;
  localparam logic [255:0] GY_M  = 256'h8571ff1825885d85d2e88688dd21f3258b4ab8e4ba19e45cddf25357ce95560a;
  localparam logic [255:0] G2X_M = 256'hf6bb32e43dcf3a3b732205038d1490d9aa6ae3c1a433827d850046d410ddd64d;
  localparam logic [255:0] G2Y_M = 256'h78c577510a5b8a3b19a8fb0e92042dbe152cd7cbeb236ff82f3648d361bee1a5;

  // Plain (non-Montgomery) G coordinates, for comparing against the raw key.
  localparam logic [255:0] GX = 256'h6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296;
  localparam logic [255:0] GY = 256'h4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5;

  // floor(n/2): Fabric accepts only s <= n/2 ("low S").
  localparam logic [255:0] HALF_N = 256'h7fffffff800000007fffffffffffffffde737d56d38bcf4279dce5617e3192a8;
  // p - n: r + n is a second x-coordinate candidate only when r < p - n.
  localparam logic [255:0] P_MINUS_N = 256'h000000000000000000000000000000004319055358e8617b0c46353d039cdaae;

  // Program numbers of the p256_point_ops microcode (see that file).
  localparam logic [2:0] PRG_PREP  = 3'd0;
  localparam logic [2:0] PRG_SUM   = 3'd1;
  localparam logic [2:0] PRG_SUM2G = 3'd2;
  localparam logic [2:0] PRG_LOADT = 3'd3;
  localparam logic [2:0] PRG_DBL   = 3'd4;
  localparam logic [2:0] PRG_MADD1 = 3'd5;
  localparam logic [2:0] PRG_MADD2 = 3'd6;
  localparam logic [2:0] PRG_FINAL = 3'd7;

endpackage
/* verilator lint_on UNUSEDPARAM */
