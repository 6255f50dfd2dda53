//! Compiles the tc program (`bpf/ecnq.bpf.c`) into the crate when clang and
//! libbpf's headers are on the machine; without them the crate builds
//! without the kernel path, and says so (cfg `ecnq_bpf_object`).
//!
//! The result is cached like any build script's. So that a machine which
//! gains clang or the headers later (CI installs them while the lints run)
//! rebuilds with the program, a build without them asks to run again
//! whenever the missing file appears: cargo reruns a script whose
//! `rerun-if-changed` path does not exist.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const SOURCE: &str = "bpf/ecnq.bpf.c";
/// libbpf's helper definitions (Debian's libbpf-dev).
const HELPERS: &str = "/usr/include/bpf/bpf_helpers.h";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(ecnq_bpf_object)");
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed={HELPERS}");
    println!("cargo:rerun-if-env-changed=ECNQ_BPF_CLANG");
    let clang = env::var("ECNQ_BPF_CLANG").unwrap_or_else(|_| "clang".to_owned());
    let Some(clang_path) = find_in_path(&clang) else {
        // Rerun once clang appears where it is usually installed.
        let expected = if clang.contains('/') {
            clang.clone()
        } else {
            format!("/usr/bin/{clang}")
        };
        println!("cargo:rerun-if-changed={expected}");
        skip(&format!(
            "`{clang}` was not found (apt-get install clang libbpf-dev)"
        ));
        return;
    };
    println!("cargo:rerun-if-changed={}", clang_path.display());
    if !Path::new(HELPERS).exists() {
        skip(&format!(
            "{HELPERS} is missing (apt-get install libbpf-dev)"
        ));
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("ecnq.bpf.o");
    let arch = match env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86_64-linux-gnu",
        Ok("aarch64") => "aarch64-linux-gnu",
        _ => "",
    };
    let status = Command::new(&clang_path)
        .args(["-O2", "-g", "-Wall", "-target", "bpf"])
        .arg(format!("-I/usr/include/{arch}"))
        .args(["-c", SOURCE, "-o"])
        .arg(&object)
        .status();
    match status {
        Ok(s) if s.success() => println!("cargo:rustc-cfg=ecnq_bpf_object"),
        Ok(s) => panic!("{clang} failed to compile {SOURCE} ({s})"),
        Err(e) => skip(&format!("could not run {}: {e}", clang_path.display())),
    }
}

/// Builds without the kernel path, with a warning that says why.
fn skip(why: &str) {
    println!("cargo:warning=ecnq-bpf: building without the tc program: {why}");
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name)).filter(|p| p.exists());
    }
    env::split_paths(&env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
