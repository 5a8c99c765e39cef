//! Runs without LD_LIBRARY_PATH: an rpath to the libtutti.so that tutti-sys linked
//! (DEP_TUTTI_LIB_DIR, from its `links = "tutti"`). Not needed when libtutti is installed.
fn main() {
    if let Ok(dir) = std::env::var("DEP_TUTTI_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
