# Builds the BMac card (hw/rtl, top bmac_top) for an AMD Alveo U250 as a bare XDMA design: the card behind
# AMD's DMA/Bridge Subsystem for PCI Express (XDMA) in AXI-Stream mode, no Vitis/XRT shell. Then synthesis,
# implementation, reports, bitstream and the flash image.
#
#   vivado -mode batch -source hw/alveo/build.tcl -tclargs <N> <M> [outdir] [card_mhz]
#
#   N, M      transaction validators and ECDSA engines per validator (the co-simulation measures 4 2, 8 2
#             and 16 2)
#   outdir    project, reports, bitstream and .mcs; default hw/build/alveo-<N>x<M> (ignored by git)
#   card_mhz  bmac_top's clock; default 250, the frequency every cycle count in docs/PERFORMANCE.md is
#             converted at. Lower it to get a bitstream that closes timing while the RTL is not pipelined.
#
# Environment:
#   BMAC_JOBS=<n>                 parallel runs (default 4)
#   BMAC_BOARD_REPO=<dir>         a directory with AMD's board files, if they are not in Vivado's store
#   BMAC_ALLOW_TIMING_FAILURE=1   write the bitstream even if the routed design misses timing (see
#                                 require_timing_met for why the default refuses)
#
# Written for Vivado 2023.x. Nobody has run it yet: the property names below are AMD's as far as their
# documentation and other published U250 designs show them, and the places where that is not certain say
# so. See hw/alveo/README.md.
#
# The block design:
#
#   PCIe Gen3 x16 -- xdma_0 -- M_AXIS_H2C_0 (512 b) -- h2c_width (512 to 64) -- h2c_cdc --> bmac_0/s_axis
#                      |   `-- M_AXI_LITE (BAR 64 KiB) ------------------------ regs_cdc --> bmac_0/s_axil
#                      `-- usr_irq_req[0] <------------------------------------------------ bmac_0/irq
#   300 MHz -- card_clk (clocking wizard) -- card_mhz --> bmac_0, the converters' card side, card_reset
#
# xdma_0's axi_aclk (250 MHz) clocks everything on the PCIe side of the two converters.

set script_dir [file dirname [file normalize [info script]]]
set hw_dir     [file dirname $script_dir]
set rtl_dir    [file join $hw_dir rtl]

set part    xcu250-figd2104-2L-e
set bd_name bmac_u250

# The user-image address in the U250's 1 Gb configuration flash. The bottom of the flash holds AMD's
# write-protected golden image, which the card falls back to; the user image goes above it. Published U250
# flows write it at this offset; AMD's card documentation is the authority if it disagrees.
set flash_user_offset 0x01002000

# ---------------------------------------------------------------------------------------------- arguments

proc usage {} {
  puts stderr "usage: vivado -mode batch -source hw/alveo/build.tcl -tclargs <N> <M> \[outdir\] \[card_mhz\]"
  exit 2
}

proc parse_args {} {
  if {$::argc < 2 || $::argc > 4} { usage }
  set n [lindex $::argv 0]
  set m [lindex $::argv 1]
  # CONFIG (0x004) reports N and M in 8 bits each.
  foreach v [list $n $m] {
    if {![string is integer -strict $v] || $v < 1 || $v > 255} { usage }
  }
  set out [file normalize [file join $::hw_dir build "alveo-${n}x${m}"]]
  if {$::argc >= 3} { set out [file normalize [lindex $::argv 2]] }
  set mhz 250
  if {$::argc == 4} { set mhz [lindex $::argv 3] }
  if {![string is double -strict $mhz] || $mhz < 10 || $mhz > 400} { usage }
  return [list $n $m $out $mhz]
}

proc env_or {name default} {
  if {[info exists ::env($name)] && $::env($name) ne ""} { return $::env($name) }
  return $default
}

# ------------------------------------------------------------------------------------------------ project

# The IP versions of Vivado 2023.x. A newer Vivado may carry a newer version of an IP (XDMA is 4.2 in
# 2025.1); then the newest installed one is taken with a warning, since its CONFIG names may have moved.
proc ip_vlnv {wanted} {
  if {[llength [get_ipdefs -quiet $wanted]] > 0} { return $wanted }
  set base [join [lrange [split $wanted :] 0 2] :]
  set found [lsort -dictionary [get_ipdefs -quiet $base:*]]
  if {[llength $found] == 0} { error "IP $base is not in this Vivado's catalog" }
  set newest [lindex $found end]
  puts "WARNING: $wanted is not in this Vivado's catalog; using $newest"
  return $newest
}

proc create_u250_project {proj_dir} {
  set repo [env_or BMAC_BOARD_REPO ""]
  if {$repo ne ""} { set_param board.repoPaths [list $repo] }
  create_project -force $::bd_name $proj_dir -part $::part
  # The board part gives IP integrator the U250's board interfaces (PCIe lanes, PCIe reference clock,
  # PERST#, the 300 MHz oscillators) with their pins, so no pin is repeated in this design's XDC. Take the
  # newest installed version instead of naming one: the board store moves on independently of this file.
  set boards [lsort -dictionary [get_board_parts -quiet xilinx.com:au250:part0:*]]
  if {[llength $boards] == 0} {
    error "no Alveo U250 board files (xilinx.com:au250:part0:*): install them from the Vivado Store\
           (Boards) or point BMAC_BOARD_REPO at them"
  }
  set_property board_part [lindex $boards end] [current_project]
  puts "INFO: board part [lindex $boards end]"
}

# The card's RTL, packages first (p256_pkg, bmac_regs_pkg, bmac_pkg are imported by the rest), then every
# other module; the Verilog module-reference wrapper; the constraints.
proc add_card_sources {} {
  set pkgs {p256_pkg.sv bmac_regs_pkg.sv bmac_pkg.sv}
  set files {}
  foreach p $pkgs { lappend files [file join $::rtl_dir $p] }
  foreach f [lsort [glob -directory $::rtl_dir *.sv]] {
    if {[lsearch -exact $pkgs [file tail $f]] < 0} { lappend files $f }
  }
  add_files -norecurse -fileset sources_1 $files
  set_property file_type SystemVerilog [get_files $files]
  add_files -norecurse -fileset sources_1 [file join $::script_dir bmac_alveo.v]
  add_files -norecurse -fileset constrs_1 [file join $::script_dir bmac_u250.xdc]
  update_compile_order -fileset sources_1
}

# ------------------------------------------------------------------------------------------- block design

# The PCIe endpoint: XDMA, Gen3 x16, AXI-Stream, one H2C and one C2H channel (XDMA has at least one of
# each; the C2H one stays unused), an AXI-Lite master BAR of 64 KiB for the registers, one user interrupt.
proc create_pcie_endpoint {} {
  set xdma [create_bd_cell -type ip -vlnv [ip_vlnv xilinx.com:ip:xdma:4.1] xdma_0]

  # Board automation: ports named after the U250's board interfaces, LOCs from the board file. The
  # interface names (pci_express_x16, pcie_perstn, pcie_refclk) are those of the au250 board file as other
  # published U250 block designs use them; RST.sys_rst_n is XDMA's reset interface as the GUI names it.
  apply_board_connection -board_interface pci_express_x16 -ip_intf xdma_0/pcie_mgt -diagram $::bd_name
  apply_board_connection -board_interface pcie_perstn -ip_intf xdma_0/RST.sys_rst_n -diagram $::bd_name

  # The reference clock enters through an IBUFDS_GTE4: its full-rate output drives the GTs (sys_clk_gt),
  # its divided-by-2 output XDMA's logic (sys_clk), which is how XDMA on UltraScale+ expects it.
  set refbuf [create_bd_cell -type ip -vlnv [ip_vlnv xilinx.com:ip:util_ds_buf:2.2] pcie_refclk_buf]
  set_property CONFIG.C_BUF_TYPE IBUFDSGTE $refbuf
  apply_board_connection -board_interface pcie_refclk -ip_intf pcie_refclk_buf/CLK_IN_D -diagram $::bd_name
  connect_bd_net [get_bd_pins pcie_refclk_buf/IBUF_OUT]      [get_bd_pins xdma_0/sys_clk_gt]
  connect_bd_net [get_bd_pins pcie_refclk_buf/IBUF_DS_ODIV2] [get_bd_pins xdma_0/sys_clk]

  # After the board connections, which set the lane count and GT quad from the board file.
  #   mode_selection Advanced     exposes the AXI-Lite BAR and channel settings
  #   axi_data_width/axisten_freq Gen3 x16 needs the 512-bit, 250 MHz user interface
  #   pf0_device_id 903F          XDMA's default for Gen3 x16, in the xdma driver's PCI id table
  #   xdma_rnum_chnl / wnum_chnl  H2C (DMA reads host memory) / C2H channels
  #   axilite_master_*            the user BAR /dev/xdma0_user maps; BAR offset = AXI address, from 0
  #   xdma_num_usr_irq 1          bmac's irq as user interrupt 0 (/dev/xdma0_events_0)
  # axilite_master_scale and pciebar2axibar_axil_master are spelled as in other published XDMA 4.1
  # scripts, not checked against Vivado here.
  set_property -dict [list \
      CONFIG.mode_selection             {Advanced} \
      CONFIG.pl_link_cap_max_link_width {X16} \
      CONFIG.pl_link_cap_max_link_speed {8.0_GT/s} \
      CONFIG.axi_data_width             {512_bit} \
      CONFIG.axisten_freq               {250} \
      CONFIG.pf0_device_id              {903F} \
      CONFIG.xdma_axi_intf_mm           {AXI_Stream} \
      CONFIG.xdma_rnum_chnl             {1} \
      CONFIG.xdma_wnum_chnl             {1} \
      CONFIG.axilite_master_en          {true} \
      CONFIG.axilite_master_size        {64} \
      CONFIG.axilite_master_scale       {Kilobytes} \
      CONFIG.pciebar2axibar_axil_master {0x00000000} \
      CONFIG.xdma_num_usr_irq           {1} \
      CONFIG.cfg_mgmt_if                {false} \
  ] $xdma
}

# The card's clock comes from one of the U250's 300 MHz board oscillators, not from XDMA's axi_aclk, so
# its frequency is free (card_mhz) and it keeps running through PCIe link resets. proc_sys_reset holds the
# card in reset until the clock is locked and while XDMA holds axi_aresetn low (link down, hot reset), and
# releases it synchronously to the card clock.
proc create_card_clock_and_reset {card_mhz} {
  set wiz [create_bd_cell -type ip -vlnv [ip_vlnv xilinx.com:ip:clk_wiz:6.0] card_clk]
  set_property -dict [list \
      CONFIG.CLK_IN1_BOARD_INTERFACE    {default_300mhz_clk1} \
      CONFIG.USE_BOARD_FLOW             {true} \
      CONFIG.PRIM_SOURCE                {Differential_clock_capable_pin} \
  ] $wiz
  apply_board_connection -board_interface default_300mhz_clk1 -ip_intf card_clk/CLK_IN1_D -diagram $::bd_name
  set_property -dict [list \
      CONFIG.CLKOUT1_REQUESTED_OUT_FREQ $card_mhz \
      CONFIG.USE_RESET                  {false} \
      CONFIG.USE_LOCKED                 {true} \
  ] $wiz

  set rst [create_bd_cell -type ip -vlnv [ip_vlnv xilinx.com:ip:proc_sys_reset:5.0] card_reset]
  # ext_reset_in is active low here (axi_aresetn). IP integrator usually infers this from the source.
  set_property CONFIG.C_EXT_RESET_HIGH {0} $rst
  connect_bd_net [get_bd_pins card_clk/clk_out1]  [get_bd_pins card_reset/slowest_sync_clk]
  connect_bd_net [get_bd_pins card_clk/locked]    [get_bd_pins card_reset/dcm_locked]
  connect_bd_net [get_bd_pins xdma_0/axi_aresetn] [get_bd_pins card_reset/ext_reset_in]
  puts "INFO: card clock requested $card_mhz MHz, wizard gives\
        [get_property CONFIG.FREQ_HZ [get_bd_pins card_clk/clk_out1]] Hz"
}

# IP integrator does not propagate clock frequencies into a module reference; copy them from the nets'
# sources so the interface checks compare like with like. Setting CONFIG.FREQ_HZ on a module reference's
# pin is what exported block-design scripts do; not checked here.
proc copy_freq {from_pin to_pin} {
  set hz [get_property CONFIG.FREQ_HZ [get_bd_pins $from_pin]]
  set_property CONFIG.FREQ_HZ $hz [get_bd_pins $to_pin]
}

# bmac_top, through the Verilog wrapper (IP integrator takes no SystemVerilog module as a module
# reference's top), with the N x M configuration.
proc create_card {n m} {
  set card [create_bd_cell -type module -reference bmac_alveo bmac_0]
  set_property -dict [list CONFIG.N $n CONFIG.M $m] $card
  copy_freq card_clk/clk_out1 bmac_0/clk
  copy_freq xdma_0/axi_aclk   bmac_0/irq_clk
  connect_bd_net [get_bd_pins card_clk/clk_out1]             [get_bd_pins bmac_0/clk]
  connect_bd_net [get_bd_pins card_reset/peripheral_aresetn] [get_bd_pins bmac_0/rst_n]
  connect_bd_net [get_bd_pins xdma_0/axi_aclk]               [get_bd_pins bmac_0/irq_clk]
  # usr_irq_req is [0:0]; bmac_alveo synchronised irq to axi_aclk. XDMA raises one MSI/MSI-X message per
  # request/acknowledge handshake; the host protocol in README.md does not depend on how many arrive.
  connect_bd_net [get_bd_pins bmac_0/irq]                    [get_bd_pins xdma_0/usr_irq_req]
}

# H2C frames: 512 bits at axi_aclk, narrowed to 64 bits still at axi_aclk (cheaper than crossing 512 bits),
# then across to the card clock. The width converter needs TKEEP: it drops the null 8-byte slices after a
# frame's last byte and moves TLAST onto the last slice that holds data, which is what axis_to_bytes wants
# (keep contiguous from lane 0, last beat not empty). XDMA's per-byte parity on TUSER is not used by the
# card; validate_bd_design may warn that the TUSER widths differ.
proc connect_frame_stream {} {
  set dw [create_bd_cell -type ip -vlnv [ip_vlnv xilinx.com:ip:axis_dwidth_converter:1.1] h2c_width]
  set_property -dict [list \
      CONFIG.S_TDATA_NUM_BYTES {64} \
      CONFIG.M_TDATA_NUM_BYTES {8} \
      CONFIG.HAS_TKEEP         {1} \
      CONFIG.HAS_TLAST         {1} \
  ] $dw
  create_bd_cell -type ip -vlnv [ip_vlnv xilinx.com:ip:axis_clock_converter:1.1] h2c_cdc

  connect_bd_intf_net [get_bd_intf_pins xdma_0/M_AXIS_H2C_0] [get_bd_intf_pins h2c_width/S_AXIS]
  connect_bd_intf_net [get_bd_intf_pins h2c_width/M_AXIS]    [get_bd_intf_pins h2c_cdc/S_AXIS]
  connect_bd_intf_net [get_bd_intf_pins h2c_cdc/M_AXIS]      [get_bd_intf_pins bmac_0/s_axis]

  connect_bd_net [get_bd_pins xdma_0/axi_aclk] \
      [get_bd_pins h2c_width/aclk] [get_bd_pins h2c_cdc/s_axis_aclk]
  connect_bd_net [get_bd_pins xdma_0/axi_aresetn] \
      [get_bd_pins h2c_width/aresetn] [get_bd_pins h2c_cdc/s_axis_aresetn]
  connect_bd_net [get_bd_pins card_clk/clk_out1]               [get_bd_pins h2c_cdc/m_axis_aclk]
  connect_bd_net [get_bd_pins card_reset/interconnect_aresetn] [get_bd_pins h2c_cdc/m_axis_aresetn]
}

# Registers: XDMA's AXI-Lite master (axi_aclk) across to the card clock, mapped at AXI address 0 with the
# BAR's 64 KiB, so a pread/pwrite offset on /dev/xdma0_user is the register address of hw/DESIGN.md.
proc connect_registers {} {
  create_bd_cell -type ip -vlnv [ip_vlnv xilinx.com:ip:axi_clock_converter:2.1] regs_cdc
  connect_bd_intf_net [get_bd_intf_pins xdma_0/M_AXI_LITE] [get_bd_intf_pins regs_cdc/S_AXI]
  connect_bd_intf_net [get_bd_intf_pins regs_cdc/M_AXI]    [get_bd_intf_pins bmac_0/s_axil]
  connect_bd_net [get_bd_pins xdma_0/axi_aclk]                 [get_bd_pins regs_cdc/s_axi_aclk]
  connect_bd_net [get_bd_pins xdma_0/axi_aresetn]              [get_bd_pins regs_cdc/s_axi_aresetn]
  connect_bd_net [get_bd_pins card_clk/clk_out1]               [get_bd_pins regs_cdc/m_axi_aclk]
  connect_bd_net [get_bd_pins card_reset/interconnect_aresetn] [get_bd_pins regs_cdc/m_axi_aresetn]

  # The module reference's address block is found through its interface rather than by name (IP
  # integrator calls it reg0, as far as exported scripts show).
  assign_bd_address -offset 0x00000000 -range 0x00010000 \
      -target_address_space [get_bd_addr_spaces xdma_0/M_AXI_LITE] \
      [get_bd_addr_segs -of_objects [get_bd_intf_pins bmac_0/s_axil]] -force
}

proc create_block_design {n m card_mhz} {
  create_bd_design $::bd_name
  create_pcie_endpoint
  create_card_clock_and_reset $card_mhz
  create_card $n $m
  connect_frame_stream
  connect_registers
  validate_bd_design
  save_bd_design

  set bd_file [get_files $::bd_name.bd]
  generate_target all $bd_file
  add_files -norecurse [make_wrapper -files $bd_file -top]
  set_property top ${::bd_name}_wrapper [current_fileset]
  update_compile_order -fileset sources_1
}

# ------------------------------------------------------------------------------------------------- runs

# A run that stopped on an error leaves a STATUS with ERROR in it; one that finished its last step says
# "<step> Complete!".
proc require_run {run} {
  set status [get_property STATUS [get_runs $run]]
  if {[string match -nocase *error* $status] || ![string match *Complete* $status]} {
    error "$run did not finish ($status): see [get_property DIRECTORY [get_runs $run]]/runme.log"
  }
}

# Synthesis, with a first utilisation and timing estimate: at 250 MHz the estimate alone tells whether the
# hours of implementation are worth waiting for.
proc run_synthesis {out jobs} {
  launch_runs synth_1 -jobs $jobs
  wait_on_run synth_1
  require_run synth_1
  open_run synth_1 -name synth_1
  report_utilization -file [file join $out utilization_synth.rpt]
  report_timing_summary -max_paths 20 -file [file join $out timing_summary_synth.rpt]
  close_design
}

# Implementation up to routing only: the bitstream is written below, after the timing check.
proc run_implementation {out jobs} {
  launch_runs impl_1 -to_step route_design -jobs $jobs
  wait_on_run impl_1
  require_run impl_1
  open_run impl_1 -name impl_1
  report_timing_summary -delay_type min_max -max_paths 20 -report_unconstrained \
      -file [file join $out timing_summary.rpt]
  report_utilization -file [file join $out utilization.rpt]
  report_utilization -hierarchical -hierarchical_depth 4 -file [file join $out utilization_hierarchical.rpt]
  report_clock_interaction -file [file join $out clock_interaction.rpt]
  report_cdc -details -file [file join $out cdc.rpt]
}

# Worst setup and hold slack of the routed design ({} when there is no timed path).
proc worst_slack {delay_type} {
  set path [get_timing_paths -quiet -delay_type $delay_type -max_paths 1 -nworst 1]
  if {[llength $path] == 0} { return {} }
  return [get_property SLACK $path]
}

# Refuse to write a bitstream for a design that misses timing. The host trusts the card's signature
# verdicts (hw/DESIGN.md section 1.2: a creator or endorsement signature the card calls good is not checked
# again), so a card that computes wrongly because a path is too slow could accept a bad signature without
# anyone noticing. Everything else the card reports the host checks itself.
proc require_timing_met {out} {
  set wns [worst_slack max]
  set whs [worst_slack min]
  set met [expr {$wns ne {} && $whs ne {} && $wns >= 0 && $whs >= 0}]
  set summary [format "WNS %s ns, WHS %s ns: timing %s" $wns $whs [expr {$met ? "met" : "NOT met"}]]
  puts "INFO: $summary"
  if {!$met} {
    if {[env_or BMAC_ALLOW_TIMING_FAILURE 0] eq "1"} {
      puts "WARNING: writing the bitstream anyway (BMAC_ALLOW_TIMING_FAILURE=1): not for a committer"
    } else {
      error "$summary; see [file join $out timing_summary.rpt]. Lower card_mhz, or set\
             BMAC_ALLOW_TIMING_FAILURE=1 for a bitstream that must not validate a real ledger"
    }
  }
  return $summary
}

# The bitstream and the flash image for the U250's 1 Gb quad-SPI flash (SPIx4; the configuration
# properties in bmac_u250.xdc match), at the user-image address above the golden image.
proc write_images {out name} {
  set bit [file join $out $name.bit]
  set mcs [file join $out $name.mcs]
  write_bitstream -force $bit
  write_cfgmem -force -format mcs -size 1024 -interface SPIx4 \
      -loadbit [list up $::flash_user_offset $bit] -file $mcs
  return [list $bit $mcs]
}

# ------------------------------------------------------------------------------------------------- main

proc main {} {
  lassign [parse_args] n m out mhz
  set jobs [env_or BMAC_JOBS 4]
  set name "bmac_u250_${n}x${m}"
  file mkdir $out

  create_u250_project [file join $out project]
  add_card_sources
  create_block_design $n $m $mhz
  run_synthesis $out $jobs
  run_implementation $out $jobs
  set timing [require_timing_met $out]
  lassign [write_images $out $name] bit mcs

  set f [open [file join $out build_summary.txt] w]
  puts $f "bmac_top N=$n M=$m, card clock $mhz MHz requested"
  puts $f "Vivado [version -short], part $::part, board [get_property board_part [current_project]]"
  puts $f $timing
  puts $f "bitstream $bit"
  puts $f "flash image $mcs (user image at $::flash_user_offset)"
  close $f
  puts "INFO: done: $bit, $mcs; reports in $out"
}

if {[catch {main} err]} {
  puts stderr "ERROR: $err"
  puts stderr $::errorInfo
  exit 1
}
exit 0
