//! Link arguments of tutti-sys do not reach this crate's test binaries, so the rpath to the
//! libtutti.so it was built against is added here too (DEP_TUTTI_LIB_DIR comes from tutti-sys's
//! `links = "tutti"`): `cargo test` then runs without LD_LIBRARY_PATH.
fn main() {
    if let Ok(dir) = std::env::var("DEP_TUTTI_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        // The integration tests start the tuttid of the same build.
        println!("cargo:rustc-env=TUTTI_SYS_LIB_DIR={}", dir);
    }
}
