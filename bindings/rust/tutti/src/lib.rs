//! tutti from Rust: collective communication on process sets over `libtutti.so`.
//!
//! ```no_run
//! use tutti::{Op, Runtime};
//!
//! fn main() -> tutti::Result<()> {
//!     let rt = Runtime::init()?;                    // rank, size, coordinator from tuttirun
//!     let evens = rt.add_process_set(&[0, 2], None)?;
//!     let mut grad = vec![1.0f32; 1024];
//!     if evens.includes_me()? {
//!         rt.allreduce("grad", evens, &mut grad, Op::Average)?;
//!     }
//!     Ok(())                                        // the runtime finalizes on drop
//! }
//! ```
//!
//! - [`Runtime`]: `tutti_init` / `tutti_finalize` (on drop); rank and size; process sets.
//! - [`ProcessSet`]: a set's id tied to its runtime; members, this rank's position, removal.
//! - Blocking collectives on the runtime (`allreduce`, `broadcast`, `allgather`, `send`, `recv`,
//!   `barrier`), each waiting up to the runtime's timeout.
//! - [`Runtime::scope`]: the same started asynchronously over borrowed slices, as [`Request`]s
//!   (`Send`, waited with a timeout), several in flight at once.
//! - [`Error`]: one variant per tutti status, carrying the library's message.
//!
//! What this crate does not wrap (reducescatter, alltoall, grouped collectives, join, counters,
//! device tensors) is reachable through `tutti_sys`, the raw bindings.
#![deny(unsafe_op_in_unsafe_fn)]

mod collectives;
mod error;
mod request;
mod runtime;
mod tensor;

pub use collectives::{AllreduceOptions, Op};
pub use error::{Error, Result};
pub use request::{GatherRequest, Request, Scope};
pub use runtime::{InitOptions, ProcessSet, Runtime};
pub use tensor::{Bool, Element, Gathered, Tensor, TensorMut};
/// The raw bindings, for what the safe API does not wrap.
pub use tutti_sys as sys;

/// The version of the library loaded at run time (`tutti_get_version`), e.g. 1100 for 0.11.0.
pub fn library_version() -> Result<i32> {
    let mut version = 0;
    error::check(unsafe { sys::tutti_get_version(&mut version) })?;
    Ok(version)
}

/// The version of the header these bindings were generated from.
pub const HEADER_VERSION: i32 = sys::TUTTI_VERSION;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_has_its_variant_and_the_library_explains_it() {
        for status in -20..=-1 {
            let error = Error::new(status, "detail");
            assert_eq!(error.status(), status);
            assert_ne!(error.name(), "TUTTI_ERR_UNKNOWN", "status {} has no variant", status);
            assert_eq!(error.message(), "detail");
            assert!(!error.explanation().is_empty());
            assert_eq!(error.to_string(), format!("{}: detail", error.name()));
        }
        assert_eq!(Error::new(-3, "x"), Error::NotAMember("x".into()));
        assert_eq!(Error::new(-20, "x").name(), "TUTTI_ERR_REFORMED");
        let newer = Error::new(-99, "from a newer library");
        assert_eq!((newer.status(), newer.name()), (-99, "TUTTI_ERR_UNKNOWN"));
        // No detail: Display falls back on the library's sentence for the status.
        assert_eq!(
            Error::new(-3, "").to_string(),
            "TUTTI_ERR_NOT_A_MEMBER: not a member: only the set's ranks may run collectives on it"
        );
    }

    #[test]
    fn library_matches_header() {
        assert_eq!(library_version().unwrap(), HEADER_VERSION);
    }
}
