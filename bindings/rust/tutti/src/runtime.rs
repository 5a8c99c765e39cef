//! The runtime (one rank's membership of a job) and its process sets.
use std::ffi::CString;
use std::ptr;
use std::time::Duration;

use tutti_sys as sys;

use crate::error::{check, Error, Result};

/// One rank of a job: `tutti_init` on creation, `tutti_finalize` on drop (or [`finalize`],
/// which reports its error). Every method may be called from any thread (the C ABI allows it),
/// so a `Runtime` is `Send` and `Sync`; share it by reference or in an `Arc`.
///
/// [`finalize`]: Runtime::finalize
pub struct Runtime {
    raw: sys::tutti_runtime_t,
}

unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

/// How to join a job. Anything not set comes from the environment (`TUTTI_COORDINATOR`,
/// `TUTTI_JOB`, `TUTTI_TOKEN`, `TUTTI_RANK`, `TUTTI_SIZE`, `TUTTI_TIMEOUT_MS`, ...), as
/// `tuttirun` sets it, or takes tutti's default.
#[derive(Clone, Debug, Default)]
pub struct InitOptions {
    coordinator: Option<String>,
    job: Option<String>,
    token: Option<String>,
    rank: Option<i32>,
    size: Option<i32>,
    timeout: Option<Duration>,
    transport: Option<String>,
    static_sets: Vec<Vec<i32>>,
}

impl InitOptions {
    pub fn new() -> Self {
        Self::default()
    }
    /// tuttid's ZeroMQ endpoint, e.g. `"tcp://10.0.0.1:5555"`.
    pub fn coordinator(mut self, endpoint: &str) -> Self {
        self.coordinator = Some(endpoint.to_string());
        self
    }
    pub fn job(mut self, job: &str) -> Self {
        self.job = Some(job.to_string());
        self
    }
    pub fn token(mut self, token: &str) -> Self {
        self.token = Some(token.to_string());
        self
    }
    pub fn rank(mut self, rank: i32) -> Self {
        self.rank = Some(rank);
        self
    }
    pub fn size(mut self, size: i32) -> Self {
        self.size = Some(size);
        self
    }
    /// Bounds the rendezvous, set changes and each data-plane step (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// `"auto"`, `"tcp"` or `"shm"` (the same on every rank).
    pub fn transport(mut self, transport: &str) -> Self {
        self.transport = Some(transport.to_string());
        self
    }
    /// A static process set, registered at init on every rank (every rank passes the same list;
    /// the i-th set added here gets id i + 1).
    pub fn static_set(mut self, ranks: &[i32]) -> Self {
        self.static_sets.push(ranks.to_vec());
        self
    }
}

pub(crate) fn c_string(what: &str, text: &str) -> Result<CString> {
    CString::new(text).map_err(|_| Error::InvalidArgument(format!("{} {:?} contains a NUL byte", what, text)))
}

/// Milliseconds for the C API: `None` is `fallback` (the runtime's own timeout).
pub(crate) fn millis(timeout: Option<Duration>, fallback: i64) -> i64 {
    timeout.map(|d| d.as_millis().min(i64::MAX as u128) as i64).unwrap_or(fallback)
}

impl Runtime {
    /// Joins the job described by the environment (what `tuttirun` sets); returns once every rank
    /// registered.
    pub fn init() -> Result<Runtime> {
        Self::init_with(&InitOptions::default())
    }

    pub fn init_with(options: &InitOptions) -> Result<Runtime> {
        let strings = |what, v: &Option<String>| v.as_deref().map(|s| c_string(what, s)).transpose();
        let coordinator = strings("coordinator", &options.coordinator)?;
        let job = strings("job", &options.job)?;
        let token = strings("token", &options.token)?;
        let transport = strings("transport", &options.transport)?;
        let sizes: Vec<i32> = options.static_sets.iter().map(|s| s.len() as i32).collect();
        let ranks: Vec<i32> = options.static_sets.concat();
        let text = |s: &Option<CString>| s.as_ref().map_or(ptr::null(), |c| c.as_ptr());

        let mut raw = sys::tutti_init_options_init();
        raw.coordinator = text(&coordinator);
        raw.job = text(&job);
        raw.token = text(&token);
        raw.transport = text(&transport);
        raw.rank = options.rank.unwrap_or(raw.rank);
        raw.size = options.size.unwrap_or(raw.size);
        raw.timeout_ms = millis(options.timeout, raw.timeout_ms);
        raw.num_static_sets = sizes.len() as i32;
        if !sizes.is_empty() {
            raw.static_set_sizes = sizes.as_ptr();
            raw.static_set_ranks = ranks.as_ptr();
        }
        let mut runtime: sys::tutti_runtime_t = ptr::null_mut();
        check(unsafe { sys::tutti_init(&raw, &mut runtime) })?;
        Ok(Runtime { raw: runtime })
    }

    pub(crate) fn raw(&self) -> sys::tutti_runtime_t {
        self.raw
    }

    /// Leaves the job, reporting a failure (dropping the runtime does the same silently).
    pub fn finalize(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        check(unsafe { sys::tutti_finalize(raw) })
    }

    /// Aborts this rank: its pending requests fail with `Error::Aborted` at once, and so do the
    /// other members' requests on its sets. The runtime must still be finalized (or dropped).
    pub fn abort(&self) -> Result<()> {
        check(unsafe { sys::tutti_abort(self.raw) })
    }

    fn get(&self, f: unsafe extern "C" fn(sys::tutti_runtime_t, *mut i32) -> i32) -> Result<i32> {
        let mut value = 0;
        check(unsafe { f(self.raw, &mut value) })?;
        Ok(value)
    }

    /// This rank's global rank.
    pub fn rank(&self) -> Result<i32> {
        self.get(sys::tutti_rank)
    }
    pub fn size(&self) -> Result<i32> {
        self.get(sys::tutti_size)
    }
    pub fn local_rank(&self) -> Result<i32> {
        self.get(sys::tutti_local_rank)
    }
    pub fn local_size(&self) -> Result<i32> {
        self.get(sys::tutti_local_size)
    }
    pub fn cross_rank(&self) -> Result<i32> {
        self.get(sys::tutti_cross_rank)
    }
    pub fn cross_size(&self) -> Result<i32> {
        self.get(sys::tutti_cross_size)
    }

    /// The set of all ranks.
    pub fn world(&self) -> ProcessSet<'_> {
        ProcessSet { runtime: self, id: sys::TUTTI_WORLD }
    }

    /// A set known by id (a static set from [`InitOptions::static_set`], or one another part of
    /// the program added). Nothing is checked until it is used.
    pub fn process_set(&self, id: i32) -> ProcessSet<'_> {
        ProcessSet { runtime: self, id }
    }

    /// Adds the set of these global ranks; collective over its members, who wait for each other
    /// (up to `timeout`; `None`: the runtime's). A non-member returns at once. Adding an existing
    /// set returns it again.
    pub fn add_process_set(&self, ranks: &[i32], timeout: Option<Duration>) -> Result<ProcessSet<'_>> {
        let mut id = 0;
        check(unsafe {
            sys::tutti_process_set_add(self.raw, ranks.as_ptr(), ranks.len() as i32, millis(timeout, 0), &mut id)
        })?;
        Ok(ProcessSet { runtime: self, id })
    }

    /// Refuses a set handle that came from another runtime (the C ABI would take its id as one
    /// of this runtime's).
    pub(crate) fn own(&self, set: ProcessSet<'_>) -> Result<i32> {
        if ptr::eq(set.runtime, self) {
            Ok(set.id)
        } else {
            Err(Error::InvalidArgument(format!("process set {} belongs to another runtime", set.id)))
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // Nothing to report to: finalize() is there for callers who want the status.
            unsafe { sys::tutti_finalize(self.raw) };
        }
    }
}

/// A process set of one runtime: its id and the runtime it belongs to. `Copy`: pass it by value.
#[derive(Clone, Copy)]
pub struct ProcessSet<'rt> {
    runtime: &'rt Runtime,
    id: i32,
}

impl<'rt> ProcessSet<'rt> {
    /// The set's id (0 is the world).
    pub fn id(&self) -> i32 {
        self.id
    }

    pub fn size(&self) -> Result<i32> {
        let mut size = 0;
        check(unsafe { sys::tutti_process_set_size(self.runtime.raw, self.id, &mut size) })?;
        Ok(size)
    }

    /// The members' global ranks, sorted.
    pub fn ranks(&self) -> Result<Vec<i32>> {
        let mut ranks = vec![0; self.size()? as usize];
        let mut count = 0;
        check(unsafe {
            sys::tutti_process_set_ranks(self.runtime.raw, self.id, ranks.as_mut_ptr(), ranks.len() as i32, &mut count)
        })?;
        ranks.truncate(count as usize);
        Ok(ranks)
    }

    /// Whether this rank is a member.
    pub fn includes_me(&self) -> Result<bool> {
        let mut included = 0;
        check(unsafe { sys::tutti_process_set_included(self.runtime.raw, self.id, &mut included) })?;
        Ok(included != 0)
    }

    /// This rank's position among the members (`Error::NotAMember` if it is not one).
    pub fn rank(&self) -> Result<i32> {
        let mut rank = 0;
        check(unsafe { sys::tutti_process_set_rank(self.runtime.raw, self.id, &mut rank) })?;
        Ok(rank)
    }

    /// Tunes the set's fusion threshold and algorithm cut-offs by the measured speed of its own
    /// collectives (docs/autotune.md). One member's call is enough; it returns at once.
    pub fn autotune(&self) -> Result<()> {
        check(unsafe { sys::tutti_process_set_autotune(self.runtime.raw, self.id) })
    }

    /// Removes the set: collective over its members, like adding it; returns at once on others.
    pub fn remove(self, timeout: Option<Duration>) -> Result<()> {
        check(unsafe { sys::tutti_process_set_remove(self.runtime.raw, self.id, millis(timeout, 0)) })
    }
}

impl std::fmt::Debug for ProcessSet<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProcessSet({})", self.id)
    }
}
