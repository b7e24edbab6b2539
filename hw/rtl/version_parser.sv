// Byte-serial decoder of a marshaled kvrwset.Version: field 1 (block_num) and
// field 2 (tx_num), both varints. The sender only sends this layout
// (crates/bmac/src/encoder.rs); anything else clears `ok`. Same region
// protocol as der_parser: `first` and `last` mark a region's first and last
// byte, and `done` pulses one cycle after the last byte.
module version_parser (
    input  logic        clk,
    input  logic        rst_n,
    input  logic        in_valid,
    input  logic        first,
    input  logic        last,
    input  logic [7:0]  in_byte,
    output logic        done,
    output logic        ok,
    output logic [63:0] blk,
    output logic [63:0] txn
);
  logic        in_value;   // inside a varint value
  logic        is_txn;
  logic [6:0]  shift;
  logic [63:0] acc;
  logic        bad;

  logic        cur_in_value, cur_bad;
  assign cur_in_value = first ? 1'b0 : in_value;
  assign cur_bad      = first ? 1'b0 : bad;

  logic [63:0] acc_next;
  assign acc_next = (first || !cur_in_value ? 64'd0 : acc) |
                    ((shift < 7'd64 && cur_in_value) ? (64'(in_byte[6:0]) << shift) : 64'd0);

  always_ff @(posedge clk or negedge rst_n) begin
    if (!rst_n) begin
      in_value <= 1'b0;
      is_txn <= 1'b0;
      shift <= '0;
      acc <= '0;
      bad <= 1'b0;
      done <= 1'b0;
      ok <= 1'b0;
      blk <= '0;
      txn <= '0;
    end else begin
      done <= 1'b0;
      if (in_valid) begin
        if (first) begin
          blk <= '0;
          txn <= '0;
          bad <= 1'b0;
        end
        if (!cur_in_value) begin
          // Field key: 0x08 block_num, 0x10 tx_num.
          in_value <= 1'b1;
          is_txn   <= in_byte == 8'h10;
          shift    <= '0;
          acc      <= '0;
          if (in_byte != 8'h08 && in_byte != 8'h10) bad <= 1'b1;
        end else begin
          acc   <= acc_next;
          shift <= shift + 7'd7;
          if (shift > 7'd63) bad <= 1'b1;
          if (!in_byte[7]) begin
            in_value <= 1'b0;
            if (is_txn) txn <= acc_next;
            else blk <= acc_next;
          end
        end
        if (last) begin
          done <= 1'b1;
          ok   <= !cur_bad && cur_in_value && !in_byte[7] && shift <= 7'd63;
        end
      end
    end
  end
endmodule
