//! Generates the raw bindings from tutti.h with the `bindgen` command (Debian's `bindgen`
//! package) rather than the bindgen crate: these builds must not need crates.io (`--offline`).
//! Also compiles `src/defaults.c`, which exports the header's `_INIT` initializers as constants,
//! so that the Rust side takes its defaults from the header itself and never copies them.
//!
//! Where tutti is found (first match wins):
//!   header:  $TUTTI_INCLUDE_DIR, else the checkout's capi/include;
//!   library: $TUTTI_LIB_DIR, else $TUTTI_BUILD_DIR, else the checkout's build/.
//! Tools: $BINDGEN (default `bindgen`), $CC (default `cc`), $AR (default `ar`).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let checkout = manifest.join("../../..");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for var in ["TUTTI_INCLUDE_DIR", "TUTTI_LIB_DIR", "TUTTI_BUILD_DIR", "BINDGEN", "CC", "AR"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }

    let include = env::var_os("TUTTI_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| checkout.join("capi/include"));
    let lib_dir = env::var_os("TUTTI_LIB_DIR")
        .or_else(|| env::var_os("TUTTI_BUILD_DIR"))
        .map(PathBuf::from)
        .unwrap_or_else(|| checkout.join("build"));
    let include = canonical(&include, "TUTTI_INCLUDE_DIR (the directory holding tutti/tutti.h)");
    let lib_dir = canonical(&lib_dir, "TUTTI_LIB_DIR or TUTTI_BUILD_DIR (where libtutti.so is)");
    let header = include.join("tutti/tutti.h");
    if !header.is_file() {
        panic!("{} not found: set TUTTI_INCLUDE_DIR to the directory holding tutti/tutti.h", header.display());
    }
    if !lib_dir.join("libtutti.so").exists() {
        panic!("{}/libtutti.so not found: build tutti first, or set TUTTI_BUILD_DIR", lib_dir.display());
    }
    println!("cargo:rerun-if-changed={}", header.display());
    println!("cargo:rerun-if-changed=src/defaults.c");

    generate(&header, &include, &out.join("tutti_bindings.rs"));
    compile_defaults(&manifest.join("src/defaults.c"), &include, &out);

    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=dylib=tutti");
    // The crate's own test binaries (bindgen's layout tests) find the library without
    // LD_LIBRARY_PATH; dependents add the same rpath from DEP_TUTTI_LIB_DIR in their build.rs,
    // since link arguments do not propagate to them.
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    println!("cargo:lib_dir={}", lib_dir.display());
    println!("cargo:include_dir={}", include.display());
}

fn canonical(path: &Path, what: &str) -> PathBuf {
    match path.canonicalize() {
        Ok(p) => p,
        Err(e) => panic!("{}: {} ({})", what, path.display(), e),
    }
}

fn run(command: &mut Command, what: &str, install: &str) {
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => panic!("{} failed ({}): {:?}", what, status, command),
        Err(e) => panic!("cannot run {} ({}): {}", what, e, install),
    }
}

/// Every `tutti_*` function and type and every `TUTTI_*` constant. Macro constants are signed
/// (statuses are negative), size_t is usize, and C enums become newtypes (a value the library
/// adds later must not be undefined behaviour in Rust). bindgen writes its layout tests
/// (size, alignment and offset of every field) into the same file: `cargo test` runs them.
fn generate(header: &Path, include: &Path, output: &Path) {
    let bindgen = env::var("BINDGEN").unwrap_or_else(|_| "bindgen".to_string());
    let mut command = Command::new(&bindgen);
    command
        .arg(header)
        .args(["--allowlist-function", "tutti_.*"])
        .args(["--allowlist-type", "tutti_.*"])
        .args(["--allowlist-var", "TUTTI_.*"])
        .args(["--default-macro-constant-type", "signed"])
        .args(["--default-enum-style", "newtype"])
        .arg("--size_t-is-usize")
        .args(["--rust-target", "1.47"])
        .arg("-o")
        .arg(output)
        .arg("--")
        .arg(format!("-I{}", include.display()))
        .arg("-std=c99");
    run(&mut command, &bindgen, "install Debian's bindgen (apt-get install bindgen libclang-dev) or set BINDGEN");
}

fn compile_defaults(source: &Path, include: &Path, out: &Path) {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let ar = env::var("AR").unwrap_or_else(|_| "ar".to_string());
    let object = out.join("defaults.o");
    let archive = out.join("libtutti_sys_defaults.a");
    let _ = std::fs::remove_file(&archive);
    run(
        Command::new(&cc)
            .args(["-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-fPIC", "-O2", "-c"])
            .arg(format!("-I{}", include.display()))
            .arg(source)
            .arg("-o")
            .arg(&object),
        &cc,
        "install a C compiler (apt-get install build-essential) or set CC",
    );
    run(Command::new(&ar).arg("crs").arg(&archive).arg(&object), &ar, "install binutils or set AR");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=tutti_sys_defaults");
}
