//! tutti's statuses as a Rust enum: one variant per `TUTTI_ERR_*` of tutti.h, each carrying the
//! library's detail (`tutti_last_error()`, read on the thread that got the status, right after
//! the call: it is thread-local and cleared by the next call).
use std::ffi::CStr;
use std::fmt;

use tutti_sys as sys;

pub type Result<T> = std::result::Result<T, Error>;

macro_rules! statuses {
    ($($variant:ident = $code:ident,)*) => {
        /// A failed tutti call: the variant is the status, the string the library's message.
        /// Statuses a newer library may add arrive as `Other`.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Error {
            $(
                #[doc = concat!("`", stringify!($code), "`")]
                $variant(String),
            )*
            /// A status this binding does not know yet (values are never reused, so it is new).
            Other { status: i32, message: String },
        }

        impl Error {
            /// The error for a status and its message (`status` must not be `TUTTI_OK`).
            pub fn new(status: i32, message: impl Into<String>) -> Error {
                let message = message.into();
                match status {
                    $(sys::$code => Error::$variant(message),)*
                    _ => Error::Other { status, message },
                }
            }

            /// The numeric status of tutti.h (negative; values never change).
            pub fn status(&self) -> i32 {
                match self {
                    $(Error::$variant(_) => sys::$code,)*
                    Error::Other { status, .. } => *status,
                }
            }

            /// The C name of the status, e.g. `"TUTTI_ERR_NOT_A_MEMBER"`.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Error::$variant(_) => stringify!($code),)*
                    Error::Other { .. } => "TUTTI_ERR_UNKNOWN",
                }
            }

            /// The library's detail for this failure (what `tutti_last_error()` said).
            pub fn message(&self) -> &str {
                match self {
                    $(Error::$variant(m) => m,)*
                    Error::Other { message, .. } => message,
                }
            }
        }
    };
}

statuses! {
    InvalidArgument = TUTTI_ERR_INVALID_ARGUMENT,
    UnknownSet = TUTTI_ERR_UNKNOWN_SET,
    NotAMember = TUTTI_ERR_NOT_A_MEMBER,
    DuplicateName = TUTTI_ERR_DUPLICATE_NAME,
    Mismatch = TUTTI_ERR_MISMATCH,
    PeerLost = TUTTI_ERR_PEER_LOST,
    CoordinatorLost = TUTTI_ERR_COORDINATOR_LOST,
    Timeout = TUTTI_ERR_TIMEOUT,
    Aborted = TUTTI_ERR_ABORTED,
    Stalled = TUTTI_ERR_STALLED,
    VersionMismatch = TUTTI_ERR_VERSION_MISMATCH,
    AuthFailed = TUTTI_ERR_AUTH_FAILED,
    ShutDown = TUTTI_ERR_SHUT_DOWN,
    Internal = TUTTI_ERR_INTERNAL,
    SetRemoved = TUTTI_ERR_SET_REMOVED,
    Unsupported = TUTTI_ERR_UNSUPPORTED,
    Evicted = TUTTI_ERR_EVICTED,
    LimitExceeded = TUTTI_ERR_LIMIT_EXCEEDED,
    DeviceUnavailable = TUTTI_ERR_DEVICE_UNAVAILABLE,
    Reformed = TUTTI_ERR_REFORMED,
}

impl Error {
    /// The library's sentence on what the status means and what to do next
    /// (`tutti_status_string`).
    pub fn explanation(&self) -> &'static str {
        status_string(self.status())
    }
}

/// `tutti_status_string`: static text, never NULL.
pub(crate) fn status_string(status: i32) -> &'static str {
    // The library returns pointers to string literals, valid for the life of the process.
    let text = unsafe { CStr::from_ptr(sys::tutti_status_string(status)) };
    text.to_str().unwrap_or("(not UTF-8)")
}

/// The calling thread's `tutti_last_error()`, copied.
pub(crate) fn last_error() -> String {
    let text = unsafe { CStr::from_ptr(sys::tutti_last_error()) };
    text.to_string_lossy().into_owned()
}

/// `Ok(())` for `TUTTI_OK`, otherwise the error with this thread's last message. Call it right
/// after the C call, on the same thread, before any other tutti call.
pub(crate) fn check(status: i32) -> Result<()> {
    if status == sys::TUTTI_OK {
        Ok(())
    } else {
        Err(Error::new(status, last_error()))
    }
}

/// `NAME: message`, or `NAME: explanation` when the library gave no detail.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let detail = if self.message().is_empty() { self.explanation() } else { self.message() };
        write!(f, "{}: {}", self.name(), detail)
    }
}

impl std::error::Error for Error {}
