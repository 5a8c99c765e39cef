//! Raw bindings to `libtutti.so`: every `tutti_*` function and type and every `TUTTI_*` constant
//! of `tutti/tutti.h`, generated at build time by the `bindgen` command (see build.rs), plus the
//! header's `_INIT` initializers (which bindgen cannot translate) as functions.
//!
//! Everything here is `unsafe` C. The safe API is the `tutti` crate; use this one only to reach
//! what it does not wrap. The rules of the C ABI (docs/abi-policy.md) apply unchanged: start
//! every struct from its `*_init()` value so that `struct_size` is right, keep tensor data alive
//! until its request completes, and read `tutti_last_error()` on the thread that got the error.
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]
// bindgen's layout tests compare raw field offsets; clippy's opinion of them is not ours.
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/tutti_bindings.rs"));

/// `TUTTI_VERSION` of the header these bindings were generated from (a function-like macro in C,
/// so bindgen leaves it out). `tutti_init` refuses a library of another major or older minor
/// version with `TUTTI_ERR_VERSION_MISMATCH`.
pub const TUTTI_VERSION: i32 =
    TUTTI_VERSION_MAJOR * 10000 + TUTTI_VERSION_MINOR * 100 + TUTTI_VERSION_PATCH;

// Compiled from the header's own initializers (src/defaults.c).
extern "C" {
    // Read by the test that holds TUTTI_VERSION above to the C macro.
    #[allow(dead_code)]
    static tutti_sys_header_version: i32;
    static tutti_sys_tensor_init: tutti_tensor_t;
    static tutti_sys_init_options_init: tutti_init_options_t;
    static tutti_sys_allreduce_options_init: tutti_allreduce_options_t;
    static tutti_sys_counters_init: tutti_counters_t;
    static tutti_sys_peer_stats_init: tutti_peer_stats_t;
    static tutti_sys_set_counters_init: tutti_set_counters_t;
}

/// `TUTTI_TENSOR_INIT`: a CPU tensor descriptor with `struct_size` set.
pub fn tutti_tensor_init() -> tutti_tensor_t {
    unsafe { tutti_sys_tensor_init }
}

/// `TUTTI_INIT_OPTIONS_INIT`: everything from the environment, `header_version` set.
pub fn tutti_init_options_init() -> tutti_init_options_t {
    unsafe { tutti_sys_init_options_init }
}

/// `TUTTI_ALLREDUCE_OPTIONS_INIT`: sum, scale factors 1, priority 0.
pub fn tutti_allreduce_options_init() -> tutti_allreduce_options_t {
    unsafe { tutti_sys_allreduce_options_init }
}

/// `TUTTI_COUNTERS_INIT`.
pub fn tutti_counters_init() -> tutti_counters_t {
    unsafe { tutti_sys_counters_init }
}

/// `TUTTI_PEER_STATS_INIT`.
pub fn tutti_peer_stats_init() -> tutti_peer_stats_t {
    unsafe { tutti_sys_peer_stats_init }
}

/// `TUTTI_SET_COUNTERS_INIT`.
pub fn tutti_set_counters_init() -> tutti_set_counters_t {
    unsafe { tutti_sys_set_counters_init }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::{CStr, CString};
    use std::mem::size_of;

    #[test]
    fn version_constant_matches_the_header_macro() {
        assert_eq!(TUTTI_VERSION, unsafe { tutti_sys_header_version });
    }

    #[test]
    fn library_and_header_versions_agree() {
        // A library of another version than the header would be refused by tutti_init; this
        // names the mismatch before any job runs.
        let mut version = 0;
        assert_eq!(unsafe { tutti_get_version(&mut version) }, TUTTI_OK);
        assert_eq!(version, TUTTI_VERSION);
    }

    #[test]
    fn initializers_set_struct_size_and_defaults() {
        assert_eq!(tutti_tensor_init().struct_size, size_of::<tutti_tensor_t>());
        assert_eq!(tutti_tensor_init().device_type, TUTTI_DEVICE_CPU);
        let init = tutti_init_options_init();
        assert_eq!(init.struct_size, size_of::<tutti_init_options_t>());
        assert_eq!(init.header_version, TUTTI_VERSION);
        assert_eq!((init.rank, init.size, init.cache_capacity), (-1, -1, -1));
        assert!(init.coordinator.is_null() && init.allocate.is_none());
        let reduce = tutti_allreduce_options_init();
        assert_eq!(reduce.struct_size, size_of::<tutti_allreduce_options_t>());
        assert_eq!(reduce.reduce_op, TUTTI_OP_SUM);
        assert_eq!((reduce.prescale_factor, reduce.postscale_factor), (1.0, 1.0));
        assert_eq!(tutti_counters_init().struct_size, size_of::<tutti_counters_t>());
        assert_eq!(tutti_peer_stats_init().struct_size, size_of::<tutti_peer_stats_t>());
        assert_eq!(tutti_set_counters_init().struct_size, size_of::<tutti_set_counters_t>());
    }

    #[test]
    fn a_struct_size_too_small_is_refused_with_its_message() {
        // docs/abi-policy.md rule 5, through the generated declarations.
        let mut options = tutti_init_options_init();
        options.struct_size = 4;
        let mut runtime: tutti_runtime_t = std::ptr::null_mut();
        let status = unsafe { tutti_init(&options, &mut runtime) };
        assert_eq!(status, TUTTI_ERR_INVALID_ARGUMENT);
        let message = unsafe { CStr::from_ptr(tutti_last_error()) }.to_str().unwrap();
        assert_eq!(
            message,
            "options.struct_size is 4; initialize the struct with its _INIT macro"
        );
    }

    #[test]
    fn last_error_round_trips_on_this_thread() {
        let text = CString::new("from a binding").unwrap();
        let status = unsafe { tutti_set_last_error(TUTTI_ERR_UNSUPPORTED, text.as_ptr()) };
        assert_eq!(status, TUTTI_ERR_UNSUPPORTED);
        assert_eq!(unsafe { CStr::from_ptr(tutti_last_error()) }.to_bytes(), b"from a binding");
        // Thread-local: another thread sees its own (empty) detail.
        std::thread::spawn(|| {
            assert_eq!(unsafe { CStr::from_ptr(tutti_last_error()) }.to_bytes(), b"");
        })
        .join()
        .unwrap();
    }
}
