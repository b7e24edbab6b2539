//! Verilates `hw/rtl/bmac_top.sv` for each N×M in `FERROFABRIC_HW_CONFIGS` (default `8x2`) and compiles the
//! generated C++ with `csrc/shim.cpp` (hw/DESIGN.md §6).
//!
//! Without Verilator on the PATH (or with `FERROFABRIC_HW_NO_VERILATOR=1`), the backend is compiled out with a
//! warning. The rest of the crate still builds, and `ferrofabric_bmac_sim::available_sim_configs()` then reports none.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rustc-check-cfg=cfg(bmac_verilator)");
    for cfg in ["4x2", "8x2", "5x3", "16x2", "2x2", "1x1"] {
        println!("cargo:rustc-check-cfg=cfg(bmac_cfg, values(\"{cfg}\"))");
    }
    println!("cargo:rerun-if-env-changed=FERROFABRIC_HW_CONFIGS");
    println!("cargo:rerun-if-env-changed=FERROFABRIC_HW_NO_VERILATOR");
    println!("cargo:rerun-if-changed=csrc/shim.cpp");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let rtl = manifest.join("../../hw/rtl");
    println!("cargo:rerun-if-changed={}", rtl.display());

    if std::env::var_os("FERROFABRIC_HW_NO_VERILATOR").is_some_and(|v| v == "1") {
        println!(
            "cargo:warning=ferrofabric-bmac-sim: FERROFABRIC_HW_NO_VERILATOR=1, the Verilator backend is compiled out"
        );
        return;
    }
    let Some(root) = verilator_root() else {
        // Watch where an install would put `verilator` (a missing file makes cargo rerun this script), so that the
        // backend is built as soon as Verilator is installed, e.g. by hw/run-tests.
        if let Some(path) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&path) {
                println!("cargo:rerun-if-changed={}", dir.join("verilator").display());
            }
        }
        println!(
            "cargo:warning=ferrofabric-bmac-sim: `verilator` not found on PATH; the Verilator backend is compiled out \
             (install Verilator 5, e.g. with hw/run-tests, and rebuild)"
        );
        return;
    };
    let configs = std::env::var("FERROFABRIC_HW_CONFIGS").unwrap_or_else(|_| "8x2".into());
    let mut sources: Vec<PathBuf> = std::fs::read_dir(&rtl)
        .expect("hw/rtl exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sv"))
        .collect();
    // Packages first, then the modules, in a fixed order.
    sources.sort_by_key(|p| (!p.to_string_lossy().ends_with("_pkg.sv"), p.clone()));
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let include = root.join("include");

    // The Verilator runtime, shared by every configuration.
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .opt_level(2)
        .debug(false)
        .warnings(false)
        .include(&include)
        .include(include.join("vltstd"))
        .files([include.join("verilated.cpp"), include.join("verilated_threads.cpp")])
        .flags(common_flags())
        .compile("bmac_verilated");

    let mut built = Vec::new();
    for cfg in configs.split(',').map(str::trim).filter(|c| !c.is_empty()) {
        let Some((n, m)) = cfg.split_once('x') else {
            panic!("FERROFABRIC_HW_CONFIGS: `{cfg}` is not N x M (e.g. 8x2)");
        };
        let prefix = format!("Vbmac_{n}x{m}");
        let mdir = out.join(format!("vl_{n}x{m}"));
        let status = Command::new("verilator")
            .args([
                "--cc",
                "-O3",
                "--x-assign",
                "fast",
                "--x-initial",
                "fast",
                "--noassert",
                "-fno-inline",
                "-Wno-fatal",
            ])
            .arg(format!("-GN={n}"))
            .arg(format!("-GM={m}"))
            .args(["--top-module", "bmac_top", "--prefix", &prefix, "--Mdir"])
            .arg(&mdir)
            .args(&sources)
            .status()
            .expect("running verilator");
        assert!(status.success(), "verilator failed for configuration {cfg}");
        let (fast, slow) = classes(&mdir.join(format!("{prefix}_classes.mk")));
        let lib = format!("bmac_{n}x{m}");
        let mut b = cc::Build::new();
        b.cpp(true)
            .std("c++17")
            .debug(false)
            .warnings(false)
            .include(&mdir)
            .include(&include)
            .include(include.join("vltstd"))
            .flags(common_flags());
        b.clone()
            .opt_level(0)
            .files(slow.iter().map(|c| mdir.join(format!("{c}.cpp"))))
            .compile(&format!("{lib}_slow"));
        b.opt_level(2)
            .files(fast.iter().map(|c| mdir.join(format!("{c}.cpp"))))
            .file(manifest.join("csrc/shim.cpp"))
            .define("VTOP", prefix.as_str())
            .define("VTOP_H", format!("\"{prefix}.h\"").as_str())
            .define("PFX(x)", format!("bmac_{n}x{m}_##x").as_str())
            .compile(&lib);
        println!("cargo:rustc-cfg=bmac_cfg=\"{n}x{m}\"");
        built.push(cfg.to_string());
    }
    if !built.is_empty() {
        println!("cargo:rustc-cfg=bmac_verilator");
        println!("cargo:rustc-link-lib=pthread");
        println!("cargo:rustc-link-lib=atomic");
    }
}

/// Flags Verilator's makefiles pass to every file (verilated.mk).
fn common_flags() -> Vec<&'static str> {
    vec![
        "-DVM_COVERAGE=0",
        "-DVM_SC=0",
        "-DVM_TRACE=0",
        "-DVM_TRACE_FST=0",
        "-DVM_TRACE_VCD=0",
        "-faligned-new",
        "-fcf-protection=none",
    ]
}

/// `verilator --getenv VERILATOR_ROOT`, or `None` if Verilator is not installed.
fn verilator_root() -> Option<PathBuf> {
    let out = Command::new("verilator").args(["--getenv", "VERILATOR_ROOT"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let root = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    root.join("include/verilated.cpp").is_file().then_some(root)
}

/// The fast and slow C++ classes listed in `<prefix>_classes.mk`.
fn classes(mk: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(mk).expect("verilator wrote the classes makefile");
    let (mut fast, mut slow) = (Vec::new(), Vec::new());
    let mut current: Option<&mut Vec<String>> = None;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("VM_CLASSES_FAST") || t.starts_with("VM_SUPPORT_FAST") {
            current = Some(&mut fast);
        } else if t.starts_with("VM_CLASSES_SLOW") || t.starts_with("VM_SUPPORT_SLOW") {
            current = Some(&mut slow);
        } else if t.starts_with("VM_") || t.is_empty() || t.starts_with('#') {
            current = None;
        } else if let Some(list) = current.as_mut() {
            let name = t.trim_end_matches('\\').trim();
            if !name.is_empty() {
                list.push(name.to_string());
            }
        }
    }
    (fast, slow)
}
