//! The generator of the BMac register map and validation-code table (hw/DESIGN.md §4, §6): one source,
//! `hw/gen/regmap.toml`, gives the SystemVerilog package `hw/rtl/bmac_regs_pkg.sv`, the Rust module
//! `ferrofabric_bmac::regs` (`crates/bmac/src/regs.rs`) and the Python module `hw/tests/bmac_regs.py` of the cocotb
//! testbenches, so the RTL, the host and the tests cannot disagree on an address, a bit or a code.
//!
//! The source is read as a small subset of TOML: `[[register]]`, `[[field]]`, `[[window]]` and `[[code]]`
//! tables whose `key = value` lines hold integers (decimal or `0x` hex, `_` allowed) or strings without
//! backslashes; `#` starts a comment. Every code must be a Fabric `TxValidationCode` (`peer/transaction.proto`)
//! with Fabric's value.
//!
//! Names in the generated files: `REG_<REGISTER>` (byte address), `<REGISTER>_VALUE` (the constant a register
//! reads, if any), `<REGISTER>_<FIELD>_{LSB,WIDTH,MASK}`, `REG_<WINDOW>`, `REG_<WINDOW>_{SIZE,PER_WORD}` and
//! `CODE_<FABRIC NAME>`.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write;

use ferrofabric_protos::peer::TxValidationCode;

/// The source, relative to the repository root.
pub const SOURCE: &str = "hw/gen/regmap.toml";
/// The generated SystemVerilog package, relative to the repository root.
pub const SV_PATH: &str = "hw/rtl/bmac_regs_pkg.sv";
/// The generated Rust module, relative to the repository root.
pub const RUST_PATH: &str = "crates/bmac/src/regs.rs";
/// The generated Python module, relative to the repository root.
pub const PY_PATH: &str = "hw/tests/bmac_regs.py";

/// The AXI-Lite address space: 16-bit byte addresses.
const ADDR_SPACE: u32 = 0x1_0000;

/// Why the source was refused.
#[derive(Debug, thiserror::Error)]
#[error("{SOURCE}:{line}: {reason}")]
pub struct RegMapError {
    /// 1-based line of the source the problem is on (the table's header for a table-level problem).
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

fn err<T>(line: usize, reason: impl Into<String>) -> Result<T, RegMapError> {
    Err(RegMapError { line, reason: reason.into() })
}

/// Whether a 32-bit register is read or written by the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read-only.
    Read,
    /// Write-only.
    Write,
}

/// One 32-bit register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Register {
    /// Upper-case name.
    pub name: String,
    /// Byte address (a multiple of 4).
    pub addr: u16,
    /// Direction.
    pub access: Access,
    /// The constant a read returns, if the register is one.
    pub value: Option<u32>,
    /// One-line description.
    pub doc: String,
}

/// A bit field of a register.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The register's name.
    pub register: String,
    /// Upper-case name.
    pub name: String,
    /// Least significant bit (0..32).
    pub lsb: u32,
    /// Width in bits (`lsb + width <= 32`).
    pub width: u32,
    /// One-line description.
    pub doc: String,
}

impl Field {
    /// The field's bits in place in the 32-bit register.
    pub fn mask(&self) -> u32 {
        let ones = if self.width >= 32 { u32::MAX } else { (1u32 << self.width) - 1 };
        ones << self.lsb
    }
}

/// An array of 32-bit words (per-transaction results).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// Upper-case name.
    pub name: String,
    /// Byte address of word 0 (a multiple of 4).
    pub base: u16,
    /// Bytes reserved for the window (a multiple of 4); the words used depend on the card's MAX_TX.
    pub size: u32,
    /// Entries (transactions) per 32-bit word: 1, 2, 4, 8, 16 or 32.
    pub per_word: u32,
    /// One-line description.
    pub doc: String,
}

/// A Fabric `TxValidationCode` the card produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Code {
    /// Fabric's name (`TxValidationCode::as_str_name`), e.g. `MVCC_READ_CONFLICT`.
    pub name: String,
    /// Fabric's value, as the TRANSACTIONS_FILTER byte.
    pub value: u8,
}

/// The parsed and checked source.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegMap {
    /// Registers in source order.
    pub registers: Vec<Register>,
    /// Fields in source order.
    pub fields: Vec<Field>,
    /// Windows in source order.
    pub windows: Vec<Window>,
    /// Codes in source order.
    pub codes: Vec<Code>,
}

/// One `[[table]]` of the source: its kind, header line and `key -> (line, value)`.
struct Table {
    kind: String,
    line: usize,
    entries: BTreeMap<String, (usize, Value)>,
}

enum Value {
    Int(u64),
    Str(String),
}

impl Table {
    fn take(&mut self, key: &str) -> Result<(usize, Value), RegMapError> {
        match self.entries.remove(key) {
            Some(v) => Ok(v),
            None => err(self.line, format!("[[{}]] has no `{key}`", self.kind)),
        }
    }

    fn int(&mut self, key: &str, max: u64) -> Result<u64, RegMapError> {
        match self.take(key)? {
            (_, Value::Int(v)) if v <= max => Ok(v),
            (line, Value::Int(v)) => err(line, format!("`{key}` = {v:#x} is larger than {max:#x}")),
            (line, Value::Str(_)) => err(line, format!("`{key}` must be an integer")),
        }
    }

    fn string(&mut self, key: &str) -> Result<String, RegMapError> {
        match self.take(key)? {
            (_, Value::Str(s)) => Ok(s),
            (line, Value::Int(_)) => err(line, format!("`{key}` must be a string")),
        }
    }

    fn name(&mut self, key: &str) -> Result<String, RegMapError> {
        let line = self.entries.get(key).map_or(self.line, |(l, _)| *l);
        let s = self.string(key)?;
        let ok = s.starts_with(|c: char| c.is_ascii_uppercase())
            && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return err(line, format!("`{key}` = {s:?} is not an upper-case identifier"));
        }
        Ok(s)
    }

    /// Refuses keys the table's kind does not have.
    fn done(self) -> Result<(), RegMapError> {
        match self.entries.into_iter().next() {
            Some((key, (line, _))) => err(line, format!("[[{}]] has no key `{key}`", self.kind)),
            None => Ok(()),
        }
    }
}

fn parse_value(line: usize, text: &str) -> Result<Value, RegMapError> {
    if let Some(rest) = text.strip_prefix('"') {
        let Some(s) = rest.strip_suffix('"') else { return err(line, "unterminated string") };
        if s.contains(['"', '\\']) {
            return err(line, "strings may not contain quotes or backslashes");
        }
        return Ok(Value::Str(s.to_owned()));
    }
    let digits = text.replace('_', "");
    let parsed = match digits.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => digits.parse(),
    };
    parsed.map(Value::Int).map_err(|_| RegMapError { line, reason: format!("`{text}` is not an integer or string") })
}

/// Splits the source into tables.
fn tables(text: &str) -> Result<Vec<Table>, RegMapError> {
    let mut out: Vec<Table> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        // The comment starts at the first `#` outside a string.
        let mut in_string = false;
        let end = raw
            .char_indices()
            .find(|&(_, c)| {
                if c == '"' {
                    in_string = !in_string;
                }
                c == '#' && !in_string
            })
            .map_or(raw.len(), |(i, _)| i);
        let content = &raw[..end];
        let t = content.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(kind) = t.strip_prefix("[[").and_then(|r| r.strip_suffix("]]")) {
            let kind = kind.trim();
            if !["register", "field", "window", "code"].contains(&kind) {
                return err(line, format!("unknown table [[{kind}]]"));
            }
            out.push(Table { kind: kind.to_owned(), line, entries: BTreeMap::new() });
            continue;
        }
        let Some((key, value)) = t.split_once('=') else {
            return err(line, "expected `[[table]]` or `key = value`");
        };
        let key = key.trim();
        let value = parse_value(line, value.trim())?;
        let Some(table) = out.last_mut() else { return err(line, "a key outside any [[table]]") };
        if table.entries.insert(key.to_owned(), (line, value)).is_some() {
            return err(line, format!("`{key}` given twice"));
        }
    }
    Ok(out)
}

/// Parses and checks the source: names are upper-case and unique, registers and windows are word-aligned and
/// do not overlap in the 16-bit address space, fields fit their register without overlapping, and every code
/// is a Fabric `TxValidationCode` with Fabric's value.
///
/// Errors: [`RegMapError`] with the line of the first problem.
pub fn parse(text: &str) -> Result<RegMap, RegMapError> {
    let mut map = RegMap::default();
    let mut code_lines = Vec::new();
    let mut field_lines = Vec::new();
    let mut spans: Vec<(u32, u32, String, usize)> = Vec::new();
    for mut t in tables(text)? {
        let line = t.line;
        match t.kind.as_str() {
            "register" => {
                let name = t.name("name")?;
                let addr = t.int("addr", u64::from(u16::MAX))? as u16;
                let access = match t.string("access")?.as_str() {
                    "r" => Access::Read,
                    "w" => Access::Write,
                    other => return err(line, format!("access {other:?}: use \"r\" or \"w\"")),
                };
                let value = match t.entries.contains_key("value") {
                    true => Some(t.int("value", u64::from(u32::MAX))? as u32),
                    false => None,
                };
                let doc = t.string("doc")?;
                t.done()?;
                if !addr.is_multiple_of(4) {
                    return err(line, format!("{name}: address {addr:#x} is not a multiple of 4"));
                }
                spans.push((u32::from(addr), 4, name.clone(), line));
                map.registers.push(Register { name, addr, access, value, doc });
            }
            "field" => {
                let register = t.name("register")?;
                let name = t.name("name")?;
                let lsb = t.int("lsb", 31)? as u32;
                let width = t.int("width", 32)? as u32;
                let doc = t.string("doc")?;
                t.done()?;
                if width == 0 || lsb + width > 32 {
                    return err(line, format!("{register}.{name}: bits {lsb}+{width} do not fit 32 bits"));
                }
                field_lines.push(line);
                map.fields.push(Field { register, name, lsb, width, doc });
            }
            "window" => {
                let name = t.name("name")?;
                let base = t.int("base", u64::from(u16::MAX))? as u16;
                let size = t.int("size", u64::from(ADDR_SPACE))? as u32;
                let per_word = t.int("per_word", 32)? as u32;
                let doc = t.string("doc")?;
                t.done()?;
                if !base.is_multiple_of(4)
                    || !size.is_multiple_of(4)
                    || size == 0
                    || u32::from(base) + size > ADDR_SPACE
                {
                    return err(
                        line,
                        format!("{name}: base {base:#x} size {size:#x} is not a word range below 0x10000"),
                    );
                }
                if !per_word.is_power_of_two() {
                    return err(line, format!("{name}: per_word {per_word} is not 1, 2, 4, 8, 16 or 32"));
                }
                spans.push((u32::from(base), size, name.clone(), line));
                map.windows.push(Window { name, base, size, per_word, doc });
            }
            _ => {
                let name = t.name("name")?;
                let value = t.int("value", u64::from(u8::MAX))? as u8;
                t.done()?;
                code_lines.push(line);
                map.codes.push(Code { name, value });
            }
        }
    }
    spans.sort();
    for pair in spans.windows(2) {
        let ((a, alen, an, _), (b, _, bn, bl)) = (&pair[0], &pair[1]);
        if a + alen > *b {
            return err(*bl, format!("{bn} at {b:#x} overlaps {an} at {a:#x}"));
        }
    }
    for (f, &line) in map.fields.iter().zip(&field_lines) {
        if !map.registers.iter().any(|r| r.name == f.register) {
            return err(line, format!("field {}: no register {}", f.name, f.register));
        }
        let overlaps = map
            .fields
            .iter()
            .zip(&field_lines)
            .any(|(g, &gl)| gl < line && g.register == f.register && g.mask() & f.mask() != 0);
        if overlaps {
            return err(line, format!("field {}.{} overlaps another field", f.register, f.name));
        }
    }
    for (c, &line) in map.codes.iter().zip(&code_lines) {
        match TxValidationCode::from_str_name(&c.name) {
            Some(fabric) if fabric as i32 == i32::from(c.value) => {}
            Some(fabric) => {
                return err(line, format!("{} is {} in Fabric, not {}", c.name, fabric as i32, c.value));
            }
            None => return err(line, format!("{} is not a Fabric TxValidationCode", c.name)),
        }
    }
    let mut seen = HashSet::new();
    for name in map.constant_names() {
        if !seen.insert(name.clone()) {
            return err(1, format!("two entries generate the constant {name}"));
        }
    }
    Ok(map)
}

impl RegMap {
    /// Every constant name the generated files define, in order.
    pub fn constant_names(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in &self.registers {
            out.push(format!("REG_{}", r.name));
            if r.value.is_some() {
                out.push(format!("{}_VALUE", r.name));
            }
        }
        for f in &self.fields {
            for suffix in ["LSB", "WIDTH", "MASK"] {
                out.push(format!("{}_{}_{suffix}", f.register, f.name));
            }
        }
        for w in &self.windows {
            out.extend([format!("REG_{}", w.name), format!("REG_{}_SIZE", w.name), format!("REG_{}_PER_WORD", w.name)]);
        }
        out.extend(self.codes.iter().map(|c| format!("CODE_{}", c.name)));
        out
    }

    fn field_doc(f: &Field) -> String {
        let bits = match f.width {
            1 => format!("bit {}", f.lsb),
            w => format!("bits {}:{}", f.lsb + w - 1, f.lsb),
        };
        format!("{}.{}, {bits}. {}", f.register, f.name, f.doc)
    }

    fn access_doc(r: &Register) -> &'static str {
        match r.access {
            Access::Read => "Read-only.",
            Access::Write => "Write-only.",
        }
    }

    /// The SystemVerilog package `bmac_regs_pkg` (`hw/rtl/bmac_regs_pkg.sv`).
    pub fn to_systemverilog(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!("// GENERATED by bmac-regmap-gen (crates/bmac-regmap) from {SOURCE}; do not edit.\n"));
        s.push_str("// The BMac register map (reg_map.sv, AXI-Lite, byte addresses) and the Fabric TxValidationCode\n");
        s.push_str("// values the card produces (hw/DESIGN.md section 4).\n");
        s.push_str("/* verilator lint_off UNUSEDPARAM */\npackage bmac_regs_pkg;\n\n  // Registers.\n");
        for r in &self.registers {
            let _ = writeln!(s, "  // {} {}", r.doc, Self::access_doc(r));
            let _ = writeln!(s, "  localparam logic [15:0] REG_{} = 16'h{:04X};", r.name, r.addr);
            if let Some(v) = r.value {
                let _ = writeln!(s, "  localparam logic [31:0] {}_VALUE = 32'h{v:08X};", r.name);
            }
        }
        s.push_str("\n  // Register fields.\n");
        for f in &self.fields {
            let _ = writeln!(s, "  // {}", Self::field_doc(f));
            let p = format!("{}_{}", f.register, f.name);
            let _ = writeln!(s, "  localparam int {p}_LSB = {};", f.lsb);
            let _ = writeln!(s, "  localparam int {p}_WIDTH = {};", f.width);
            let _ = writeln!(s, "  localparam logic [31:0] {p}_MASK = 32'h{:08X};", f.mask());
        }
        s.push_str(
            "\n  // Result windows: word w at REG_<name> + 4w, PER_WORD entries per word, SIZE bytes reserved.\n",
        );
        for w in &self.windows {
            let _ = writeln!(s, "  // {}", w.doc);
            let _ = writeln!(s, "  localparam logic [15:0] REG_{} = 16'h{:04X};", w.name, w.base);
            let _ = writeln!(s, "  localparam int REG_{}_SIZE = {};", w.name, w.size);
            let _ = writeln!(s, "  localparam int REG_{}_PER_WORD = {};", w.name, w.per_word);
        }
        s.push_str("\n  // Fabric TxValidationCode values (peer/transaction.proto).\n");
        for c in &self.codes {
            let _ = writeln!(s, "  localparam logic [7:0] CODE_{} = 8'd{};", c.name, c.value);
        }
        s.push_str("\nendpackage\n");
        s
    }

    /// The Rust module `ferrofabric_bmac::regs` (`crates/bmac/src/regs.rs`), formatted as `cargo fmt` leaves it.
    pub fn to_rust(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "//! GENERATED by `bmac-regmap-gen` (crates/bmac-regmap) from `{SOURCE}`; do not edit.");
        s.push_str(
            "//! The BMac register map (`reg_map.sv`, AXI-Lite, byte addresses) and the Fabric `TxValidationCode`\n",
        );
        s.push_str("//! values the card produces (hw/DESIGN.md §4).\n");
        for r in &self.registers {
            let _ = writeln!(s, "\n/// {} {}", r.doc, Self::access_doc(r));
            let _ = writeln!(s, "pub const REG_{}: u16 = 0x{:04X};", r.name, r.addr);
            if let Some(v) = r.value {
                let _ = writeln!(s, "/// What `REG_{}` reads.", r.name);
                let _ = writeln!(s, "pub const {}_VALUE: u32 = 0x{v:08X};", r.name);
            }
        }
        for f in &self.fields {
            let p = format!("{}_{}", f.register, f.name);
            let doc = Self::field_doc(f);
            let _ = writeln!(s, "\n/// {doc} Its least significant bit.");
            let _ = writeln!(s, "pub const {p}_LSB: u32 = {};", f.lsb);
            let _ = writeln!(s, "/// Width in bits of {}.{}.", f.register, f.name);
            let _ = writeln!(s, "pub const {p}_WIDTH: u32 = {};", f.width);
            let _ = writeln!(s, "/// The bits of {}.{} in place.", f.register, f.name);
            let _ = writeln!(s, "pub const {p}_MASK: u32 = 0x{:08X};", f.mask());
        }
        for w in &self.windows {
            let _ = writeln!(s, "\n/// {} Word w is at `REG_{} + 4 * w`.", w.doc, w.name);
            let _ = writeln!(s, "pub const REG_{}: u16 = 0x{:04X};", w.name, w.base);
            let _ = writeln!(s, "/// Bytes reserved for `REG_{}`.", w.name);
            let _ = writeln!(s, "pub const REG_{}_SIZE: u32 = 0x{:04X};", w.name, w.size);
            let _ = writeln!(s, "/// Transactions per word of `REG_{}`.", w.name);
            let _ = writeln!(s, "pub const REG_{}_PER_WORD: u32 = {};", w.name, w.per_word);
        }
        s.push('\n');
        for c in &self.codes {
            let _ = writeln!(s, "/// Fabric's `TxValidationCode::{}`.", c.name);
            let _ = writeln!(s, "pub const CODE_{}: u8 = {};", c.name, c.value);
        }
        s.push_str("\n/// Every code above with its Fabric name (`TxValidationCode::as_str_name`).\n");
        s.push_str("pub const CODES: &[(&str, u8)] = &[\n");
        for c in &self.codes {
            let _ = writeln!(s, "    (\"{}\", CODE_{}),", c.name, c.name);
        }
        s.push_str("];\n");
        s
    }

    /// The Python module `bmac_regs` (`hw/tests/bmac_regs.py`).
    pub fn to_python(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "\"\"\"GENERATED by bmac-regmap-gen (crates/bmac-regmap) from {SOURCE}; do not edit.");
        s.push_str("\nThe BMac register map (reg_map.sv, AXI-Lite, byte addresses) and the Fabric TxValidationCode\n");
        s.push_str("values the card produces (hw/DESIGN.md section 4).\n\"\"\"\n\n# Registers.\n");
        for r in &self.registers {
            let _ = writeln!(s, "REG_{} = 0x{:04X}  # {} {}", r.name, r.addr, r.doc, Self::access_doc(r));
            if let Some(v) = r.value {
                let _ = writeln!(s, "{}_VALUE = 0x{v:08X}", r.name);
            }
        }
        s.push_str("\n# Register fields.\n");
        for f in &self.fields {
            let p = format!("{}_{}", f.register, f.name);
            let _ = writeln!(s, "# {}", Self::field_doc(f));
            let _ = writeln!(s, "{p}_LSB = {}", f.lsb);
            let _ = writeln!(s, "{p}_WIDTH = {}", f.width);
            let _ = writeln!(s, "{p}_MASK = 0x{:08X}", f.mask());
        }
        s.push_str("\n# Result windows: word w at REG_<name> + 4w, PER_WORD entries per word, SIZE bytes reserved.\n");
        for w in &self.windows {
            let _ = writeln!(s, "# {}", w.doc);
            let _ = writeln!(s, "REG_{} = 0x{:04X}", w.name, w.base);
            let _ = writeln!(s, "REG_{}_SIZE = 0x{:04X}", w.name, w.size);
            let _ = writeln!(s, "REG_{}_PER_WORD = {}", w.name, w.per_word);
        }
        s.push_str("\n# Fabric TxValidationCode values (peer/transaction.proto).\n");
        for c in &self.codes {
            let _ = writeln!(s, "CODE_{} = {}", c.name, c.value);
        }
        s.push_str("\nCODES = {\n");
        for c in &self.codes {
            let _ = writeln!(s, "    \"{}\": CODE_{},", c.name, c.name);
        }
        s.push_str("}\n");
        s
    }

    /// The three generated files: `(path relative to the repository root, contents)`.
    pub fn outputs(&self) -> [(&'static str, String); 3] {
        [(SV_PATH, self.to_systemverilog()), (RUST_PATH, self.to_rust()), (PY_PATH, self.to_python())]
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const REG: &str = "[[register]]\nname = \"A\"\naddr = 0x0\naccess = \"r\"\ndoc = \"a # not a comment\" # comment\n";

    #[test]
    fn parses_the_subset() {
        let m = parse(REG).unwrap();
        assert_eq!(m.registers[0].doc, "a # not a comment");
        assert_eq!(m.registers[0].access, Access::Read);
    }

    #[test]
    fn refuses_what_it_cannot_trust() {
        let code = |name: &str, v: u32| format!("[[code]]\nname = \"{name}\"\nvalue = {v}\n");
        assert!(parse(&code("MVCC_READ_CONFLICT", 11)).is_ok());
        let e = parse(&code("MVCC_READ_CONFLICT", 12)).unwrap_err();
        assert!(e.to_string().contains("is 11 in Fabric"), "{e}");
        assert!(parse(&code("NO_SUCH_CODE", 1)).is_err());
        let overlap = format!("{REG}[[window]]\nname = \"W\"\nbase = 0\nsize = 8\nper_word = 4\ndoc = \"w\"\n");
        assert!(parse(&overlap).unwrap_err().to_string().contains("overlaps"));
        let field = |lsb: u32, w: u32| {
            format!("[[field]]\nregister = \"A\"\nname = \"F{lsb}\"\nlsb = {lsb}\nwidth = {w}\ndoc = \"\"\n")
        };
        assert!(parse(&format!("{REG}{}{}", field(0, 4), field(4, 4))).is_ok());
        assert!(parse(&format!("{REG}{}{}", field(0, 4), field(3, 4))).is_err());
        assert!(parse(&format!("{REG}{}", field(30, 4))).is_err());
        assert!(parse(&format!("{REG}extra = 1\n")).is_err());
        assert!(parse("[[register]]\nname = \"a\"\n").is_err());
        assert!(parse("x = 1\n").is_err());
    }
}
