// Byte-serial decoder of a DER ECDSA signature, SEQUENCE { INTEGER r, INTEGER s }.
// It accepts what Go's encoding/asn1 accepts, and Fabric uses Go's decoder:
// minimal lengths (long form only from 128, at most two length bytes), minimal
// non-negative integers, and the elements fitting their enclosing lengths.
// Bytes after s, inside the SEQUENCE or after it, are ignored.
//
// Integers longer than 32 bytes of magnitude are refused: such a value is >= n
// and could never verify. Zero is passed on, and the ECDSA engine rejects it.
// Feed one region: `first` on its first byte, `region_len` valid then, `last`
// on its final byte. `done` pulses one cycle after the last byte. `ok`, `r` and
// `s` then hold until the next region.
module der_parser (
    input  logic         clk,
    input  logic         rst_n,
    input  logic         in_valid,
    input  logic         first,
    input  logic         last,
    input  logic [15:0]  region_len,
    input  logic [7:0]   in_byte,
    output logic         done,
    output logic         ok,
    output logic [255:0] r,
    output logic [255:0] s
);
  typedef enum logic [3:0] {
    D_TAG, D_LEN, D_L81, D_L82H, D_L82L, D_ITAG, D_ILEN, D_IVAL, D_REST, D_FAIL
  } state_t;

  state_t      st;
  logic [15:0] rem;       // region bytes after the current one
  logic [15:0] seq_rem;   // sequence content bytes not yet consumed
  logic [7:0]  hi;
  logic        second;    // parsing s
  logic [5:0]  cnt;       // integer bytes still to read
  logic [5:0]  ilen;
  logic        first_int_byte, second_int_byte;
  logic [7:0]  c0;
  logic [247:0] acc;       // integer bytes so far (the 33rd, a leading zero, falls off)

  // State as seen by the current byte (a new region restarts at D_TAG).
  state_t      cur;
  logic [15:0] cur_rem;
  assign cur     = first ? D_TAG : st;
  assign cur_rem = first ? region_len - 16'd1 : rem - 16'd1;

  state_t      nx;
  always_comb begin
    nx = cur;
    unique case (cur)
      D_TAG: nx = (in_byte == 8'h30) ? D_LEN : D_FAIL;
      D_LEN:
        if (in_byte < 8'h80) nx = (16'(in_byte) <= cur_rem) ? D_ITAG : D_FAIL;
        else if (in_byte == 8'h81) nx = D_L81;
        else if (in_byte == 8'h82) nx = D_L82H;
        else nx = D_FAIL;
      D_L81:  nx = (in_byte >= 8'h80 && 16'(in_byte) <= cur_rem) ? D_ITAG : D_FAIL;
      D_L82H: nx = (in_byte != 8'h00) ? D_L82L : D_FAIL;
      D_L82L: nx = ({hi, in_byte} <= cur_rem) ? D_ITAG : D_FAIL;
      D_ITAG: nx = (seq_rem >= 16'd2 && in_byte == 8'h02) ? D_ILEN : D_FAIL;
      D_ILEN: nx = (in_byte != 8'h00 && in_byte <= 8'd33 && 16'(in_byte) <= seq_rem - 16'd1) ? D_IVAL : D_FAIL;
      D_IVAL: begin
        if (first_int_byte && (in_byte[7] || (ilen == 6'd33 && in_byte != 8'h00))) nx = D_FAIL;
        else if (second_int_byte && c0 == 8'h00 && !in_byte[7]) nx = D_FAIL;
        else if (cnt == 6'd1) nx = second ? D_REST : D_ITAG;
      end
      default: ;
    endcase
  end

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      st <= D_TAG;
      rem <= '0;
      seq_rem <= '0;
      hi <= '0;
      second <= 1'b0;
      cnt <= '0;
      ilen <= '0;
      first_int_byte <= 1'b0;
      second_int_byte <= 1'b0;
      c0 <= '0;
      acc <= '0;
      done <= 1'b0;
      ok <= 1'b0;
      r <= '0;
      s <= '0;
    end else begin
      done <= 1'b0;
      if (in_valid) begin
        st  <= nx;
        rem <= cur_rem;
        if (first) second <= 1'b0;
        // Sequence content accounting: every byte after the length counts.
        if (cur == D_ITAG || cur == D_ILEN || cur == D_IVAL) seq_rem <= seq_rem - 16'd1;
        unique case (cur)
          D_LEN:  seq_rem <= 16'(in_byte);
          D_L81:  seq_rem <= 16'(in_byte);
          D_L82H: hi <= in_byte;
          D_L82L: seq_rem <= {hi, in_byte};
          D_ILEN: begin
            cnt <= 6'(in_byte);
            ilen <= 6'(in_byte);
            first_int_byte <= 1'b1;
            second_int_byte <= 1'b0;
            acc <= '0;
          end
          D_IVAL: begin
            first_int_byte <= 1'b0;
            second_int_byte <= first_int_byte;
            if (first_int_byte) c0 <= in_byte;
            acc <= {acc[239:0], in_byte};
            cnt <= cnt - 6'd1;
            if (cnt == 6'd1) begin
              if (second) s <= {acc[247:0], in_byte};
              else r <= {acc[247:0], in_byte};
              second <= 1'b1;
            end
          end
          default: ;
        endcase
        if (last) begin
          done <= 1'b1;
          ok <= nx == D_REST;
        end
      end
    end
  end
endmodule
