// Streaming SHA-256 (FIPS 180-4) with its own message padding.
//
// Input: an AXI-Stream-like beat interface. Each accepted beat (s_valid &&
// s_ready) carries DATA_W bits of message, first byte in the most significant
// lane (s_data[DATA_W-1 -: 8]), i.e. big-endian like SHA-256 itself. Every beat
// but the last is full. On the beat with s_last, s_keep[i] enables lane i
// (s_data[8*i +: 8]); enabled lanes must be contiguous from the top lane, and
// s_keep may be all zero (that is how an empty message, or one whose length is
// a multiple of DATA_W/8, is ended without data). s_keep is ignored on other
// beats.
//
// Output: `digest` (H0 in bits 255:224, i.e. the byte order hashlib prints)
// is updated and `digest_valid` pulses for one cycle when a message is done.
// Messages may follow back to back; a new message can start streaming while
// the last block of the previous one is still being compressed.
//
// Micro-architecture: a 512-bit fill buffer feeds a one-round-per-cycle
// compressor with a 16-word rolling message schedule. The buffer is copied
// into the compressor when it starts, so the next block fills while the
// current one is compressed; a block costs 65 cycles of compression, plus the
// hand-over cycle. Padding (0x80, zeros, 64-bit bit length) is inserted when
// the last beat is written; if it does not fit, one extra block is generated.
module sha256_engine #(
    parameter int DATA_W = 32   // beat width in bits: 32 or 64 (any 8*2^k <= 512 works)
) (
    input  logic                  clk,
    input  logic                  rst_n,
    input  logic                  s_valid,
    output logic                  s_ready,
    input  logic [DATA_W-1:0]     s_data,
    input  logic [DATA_W/8-1:0]   s_keep,
    input  logic                  s_last,
    output logic [255:0]          digest,
    output logic                  digest_valid,
    output logic                  busy
);
  localparam int NB    = DATA_W / 8;      // bytes per beat
  localparam int BEATS = 512 / DATA_W;    // beats per block
  localparam int BW    = (BEATS > 1) ? $clog2(BEATS) : 1;

  if (DATA_W % 8 != 0 || 512 % DATA_W != 0) begin : g_bad_width
    $error("sha256_engine: DATA_W must be a multiple of 8 that divides 512");
  end

  localparam logic [255:0] IV =
      256'h6a09e667_bb67ae85_3c6ef372_a54ff53a_510e527f_9b05688c_1f83d9ab_5be0cd19;

  function automatic logic [31:0] k_rom(input logic [5:0] t);
    case (t)
      6'd0: k_rom = 32'h428a2f98;  6'd1: k_rom = 32'h71374491;  6'd2: k_rom = 32'hb5c0fbcf;  6'd3: k_rom = 32'he9b5dba5;
      6'd4: k_rom = 32'h3956c25b;  6'd5: k_rom = 32'h59f111f1;  6'd6: k_rom = 32'h923f82a4;  6'd7: k_rom = 32'hab1c5ed5;
      6'd8: k_rom = 32'hd807aa98;  6'd9: k_rom = 32'h12835b01;  6'd10: k_rom = 32'h243185be;  6'd11: k_rom = 32'h550c7dc3;
      6'd12: k_rom = 32'h72be5d74;  6'd13: k_rom = 32'h80deb1fe;  6'd14: k_rom = 32'h9bdc06a7;  6'd15: k_rom = 32'hc19bf174;
      6'd16: k_rom = 32'he49b69c1;  6'd17: k_rom = 32'hefbe4786;  6'd18: k_rom = 32'h0fc19dc6;  6'd19: k_rom = 32'h240ca1cc;
      6'd20: k_rom = 32'h2de92c6f;  6'd21: k_rom = 32'h4a7484aa;  6'd22: k_rom = 32'h5cb0a9dc;  6'd23: k_rom = 32'h76f988da;
      6'd24: k_rom = 32'h983e5152;  6'd25: k_rom = 32'ha831c66d;  6'd26: k_rom = 32'hb00327c8;  6'd27: k_rom = 32'hbf597fc7;
      6'd28: k_rom = 32'hc6e00bf3;  6'd29: k_rom = 32'hd5a79147;  6'd30: k_rom = 32'h06ca6351;  6'd31: k_rom = 32'h14292967;
      6'd32: k_rom = 32'h27b70a85;  6'd33: k_rom = 32'h2e1b2138;  6'd34: k_rom = 32'h4d2c6dfc;  6'd35: k_rom = 32'h53380d13;
      6'd36: k_rom = 32'h650a7354;  6'd37: k_rom = 32'h766a0abb;  6'd38: k_rom = 32'h81c2c92e;  6'd39: k_rom = 32'h92722c85;
      6'd40: k_rom = 32'ha2bfe8a1;  6'd41: k_rom = 32'ha81a664b;  6'd42: k_rom = 32'hc24b8b70;  6'd43: k_rom = 32'hc76c51a3;
      6'd44: k_rom = 32'hd192e819;  6'd45: k_rom = 32'hd6990624;  6'd46: k_rom = 32'hf40e3585;  6'd47: k_rom = 32'h106aa070;
      6'd48: k_rom = 32'h19a4c116;  6'd49: k_rom = 32'h1e376c08;  6'd50: k_rom = 32'h2748774c;  6'd51: k_rom = 32'h34b0bcb5;
      6'd52: k_rom = 32'h391c0cb3;  6'd53: k_rom = 32'h4ed8aa4a;  6'd54: k_rom = 32'h5b9cca4f;  6'd55: k_rom = 32'h682e6ff3;
      6'd56: k_rom = 32'h748f82ee;  6'd57: k_rom = 32'h78a5636f;  6'd58: k_rom = 32'h84c87814;  6'd59: k_rom = 32'h8cc70208;
      6'd60: k_rom = 32'h90befffa;  6'd61: k_rom = 32'ha4506ceb;  6'd62: k_rom = 32'hbef9a3f7;  6'd63: k_rom = 32'hc67178f2;
      default: k_rom = 32'h0;
    endcase
  endfunction

  function automatic logic [31:0] rotr(input logic [31:0] x, input int n);
    rotr = (x >> n) | (x << (32 - n));
  endfunction

  // ------------------------------------------------------------ fill side
  logic [511:0] blk;          // block being filled / waiting for the compressor
  logic [BW-1:0] beat_idx;    // next beat slot in blk
  logic [63:0]  len_bits;     // message length so far
  logic [63:0]  len_final;    // total length, kept for a padding-only block
  logic         blk_full;     // blk is complete and waits for the compressor
  logic         blk_final;    // blk is the last block of its message
  logic         need_extra;   // after blk, a padding-only block follows
  logic         extra_80;     // that block starts with the 0x80 marker

  logic accept;
  assign s_ready = !blk_full;
  assign accept  = s_valid && s_ready;

  // Number of valid bytes in the last beat.
  logic [$clog2(NB+1)-1:0] keep_cnt;
  always_comb begin
    keep_cnt = '0;
    for (int i = 0; i < NB; i++) keep_cnt = keep_cnt + {{($clog2(NB+1)-1){1'b0}}, s_keep[i]};
  end

  // Block with the current beat written into its slot.
  logic [511:0] blk_in;
  always_comb begin
    blk_in = blk;
    for (int i = 0; i < BEATS; i++) begin
      if (BW'(i) == beat_idx) blk_in[511-i*DATA_W -: DATA_W] = s_data;
    end
  end

  // Padded form of blk_in, for a last beat: bytes from `pos` on become
  // 0x80, 0, 0, ... and the length goes into bytes 56..63 when pos <= 55.
  logic [6:0]   pos;          // message bytes in this block, 0..64
  logic [63:0]  total_bits;
  logic         fits;
  logic [511:0] blk_pad;
  always_comb begin
    pos        = 7'(beat_idx) * 7'(NB) + 7'(keep_cnt);
    total_bits = len_bits + 64'(keep_cnt) * 64'd8;
    fits       = (pos <= 7'd55);
    for (int j = 0; j < 64; j++) begin
      if (7'(j) < pos) blk_pad[511-8*j -: 8] = blk_in[511-8*j -: 8];
      else if (7'(j) == pos) blk_pad[511-8*j -: 8] = 8'h80;
      else blk_pad[511-8*j -: 8] = 8'h00;
    end
    if (fits) blk_pad[63:0] = total_bits;
  end

  // ----------------------------------------------------------- compressor
  logic        c_busy;
  logic        c_fin;         // H update cycle after round 63
  logic        c_final;       // block being compressed ends its message
  logic [6:0]  round;
  logic [31:0] wq [16];       // w[t] .. w[t+15]
  logic [31:0] va, vb, vc, vd, ve, vf, vg, vh;
  logic [255:0] hs;           // chaining value H0..H7

  logic take;
  assign take = blk_full && !c_busy;

  logic [31:0] t1, t2, w_new;
  always_comb begin
    t1 = vh + (rotr(ve, 6) ^ rotr(ve, 11) ^ rotr(ve, 25)) + ((ve & vf) ^ (~ve & vg))
       + k_rom(round[5:0]) + wq[0];
    t2 = (rotr(va, 2) ^ rotr(va, 13) ^ rotr(va, 22)) + ((va & vb) ^ (va & vc) ^ (vb & vc));
    w_new = (rotr(wq[14], 17) ^ rotr(wq[14], 19) ^ (wq[14] >> 10)) + wq[9]
          + (rotr(wq[1], 7) ^ rotr(wq[1], 18) ^ (wq[1] >> 3)) + wq[0];
  end

  logic [255:0] h_next;
  assign h_next = {hs[255:224] + va, hs[223:192] + vb, hs[191:160] + vc, hs[159:128] + vd,
                   hs[127:96] + ve, hs[95:64] + vf, hs[63:32] + vg, hs[31:0] + vh};

  assign busy = c_busy || blk_full || (beat_idx != '0) || (len_bits != '0);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      blk          <= '0;
      beat_idx     <= '0;
      len_bits     <= '0;
      len_final    <= '0;
      blk_full     <= 1'b0;
      blk_final    <= 1'b0;
      need_extra   <= 1'b0;
      extra_80     <= 1'b0;
      c_busy       <= 1'b0;
      c_fin        <= 1'b0;
      c_final      <= 1'b0;
      round        <= '0;
      for (int i = 0; i < 16; i++) wq[i] <= '0;
      {va, vb, vc, vd, ve, vf, vg, vh} <= '0;
      hs           <= IV;
      digest       <= '0;
      digest_valid <= 1'b0;
    end else begin
      digest_valid <= 1'b0;

      // Fill side: accept a beat, or hand the block to the compressor.
      if (accept) begin
        if (s_last) begin
          blk        <= blk_pad;
          blk_full   <= 1'b1;
          blk_final  <= fits;
          need_extra <= !fits;
          extra_80   <= (pos == 7'd64);
          len_final  <= total_bits;
          len_bits   <= '0;
          beat_idx   <= '0;
        end else begin
          blk      <= blk_in;
          len_bits <= len_bits + 64'(DATA_W);
          if (beat_idx == BW'(BEATS - 1)) begin
            blk_full  <= 1'b1;
            blk_final <= 1'b0;
            beat_idx  <= '0;
          end else begin
            beat_idx <= beat_idx + 1'b1;
          end
        end
      end else if (take) begin
        if (need_extra) begin
          blk        <= {extra_80, 447'b0, len_final};
          blk_final  <= 1'b1;
          need_extra <= 1'b0;
        end else begin
          blk_full <= 1'b0;
        end
      end

      // Compressor.
      if (take) begin
        for (int i = 0; i < 16; i++) wq[i] <= blk[511-32*i -: 32];
        {va, vb, vc, vd, ve, vf, vg, vh} <= hs;
        c_final <= blk_final;
        c_busy  <= 1'b1;
        round   <= '0;
      end else if (c_fin) begin
        c_fin  <= 1'b0;
        c_busy <= 1'b0;
        if (c_final) begin
          digest       <= h_next;
          digest_valid <= 1'b1;
          hs           <= IV;
        end else begin
          hs <= h_next;
        end
      end else if (c_busy) begin
        {va, vb, vc, vd, ve, vf, vg, vh} <= {t1 + t2, va, vb, vc, vd + t1, ve, vf, vg};
        for (int i = 0; i < 15; i++) wq[i] <= wq[i+1];
        wq[15] <= w_new;
        if (round == 7'd63) c_fin <= 1'b1;
        round <= round + 1'b1;
      end
    end
  end

endmodule
