# Timing and configuration constraints of the BMac card on an Alveo U250 (hw/alveo/build.tcl).
#
# No pin is placed here. Board automation takes the PCIe lanes, the PCIe reference clock, PERST# and the
# 300 MHz oscillator from AMD's U250 board file, and those IPs write their own LOC and IOSTANDARD
# constraints. Clocks made by IP carry their own definitions: XDMA's user clock (axi_aclk, 250 MHz) and
# the clocking wizard's card clock (card_mhz), which the wizard derives from the oscillator it defines.
# The two converters (h2c_cdc, regs_cdc) and the interrupt synchroniser (xpm_cdc_single in bmac_alveo.v)
# constrain their own crossings; there is deliberately no set_clock_groups between the PCIe and card
# clocks, since it would override those bounded-skew constraints.

## Clocks

# The slot's 100 MHz PCIe reference clock, at the port board automation creates for the pcie_refclk
# interface. XDMA expects the top level to define it (its example design does). If IP already defines a
# clock here, this one replaces it with the same period and Vivado says so.
create_clock -period 10.000 -name pcie_refclk [get_ports pcie_refclk_clk_p]

## Asynchronous resets

# PERST# from the slot: asynchronous to every clock; XDMA synchronises it.
set_false_path -from [get_ports pcie_perstn]

# card_reset (proc_sys_reset) takes XDMA's axi_aresetn, a signal of the PCIe user clock, as its
# asynchronous external reset and synchronises it to the card clock itself.
set_false_path -through [get_pins -hierarchical -filter {NAME =~ */card_reset/ext_reset_in}]

# No false path on bmac_top's rst_n, on purpose. It leaves card_reset synchronously to the card clock,
# and recovery/removal timing keeps every flip-flop of the card leaving reset in the same cycle: the
# card's state machines (the reg_map bitmap clear, the FIFOs) start on their own right after reset, and
# a flip-flop released a cycle late would put them in a state no simulation has seen. If this reset net
# is what misses timing, let implementation replicate its driver rather than cut the path.

## Configuration (the U250 boots from a 1 Gb quad-SPI flash; build.tcl writes the .mcs to match)

# Bank 0 (configuration) is powered at 1.8 V on the card ...
set_property CONFIG_VOLTAGE 1.8 [current_design]
# ... so the configuration-bank voltage select pin is tied to ground.
set_property CFGBVS GND [current_design]
# Master SPI, four data lines: the mode the card's mode pins select.
set_property CONFIG_MODE SPIx4 [current_design]
# The bitstream tells the FPGA to switch to x4 reads once the header is in.
set_property BITSTREAM.CONFIG.SPI_BUSWIDTH 4 [current_design]
# A 1 Gb flash needs 32-bit addresses beyond 16 MiB; the user image sits at 0x01002000.
set_property BITSTREAM.CONFIG.SPI_32BIT_ADDR YES [current_design]
# Sample flash data on the falling clock edge, the usual setting for this flash at this rate.
set_property BITSTREAM.CONFIG.SPI_FALL_EDGE YES [current_design]
# Configuration clock in MHz (internal oscillator): the rate the U250 designs published by others use; it
# sets how long the card takes to load from flash after power-on.
set_property BITSTREAM.CONFIG.CONFIGRATE 63.8 [current_design]
# The card has no external configuration clock.
set_property BITSTREAM.CONFIG.EXTMASTERCCLK_EN DISABLE [current_design]
# If this image fails to load (a CRC error), fall back to the golden image at the bottom of the flash.
set_property BITSTREAM.CONFIG.CONFIGFALLBACK ENABLE [current_design]
# Compress the bitstream: a smaller image loads sooner, which matters for PCIe enumeration at boot.
set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]
# Pull unused I/O up, as AMD's U250 reference constraints do.
set_property BITSTREAM.CONFIG.UNUSEDPIN PULLUP [current_design]
