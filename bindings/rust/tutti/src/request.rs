//! Requests in flight over borrowed buffers, made sound the way `std::thread::scope` makes
//! borrowing threads sound.
//!
//! The library writes a request's output until the request completes, and `tutti_request_free`
//! does not stop it. A request that borrows a slice must therefore never let that borrow end
//! while it is pending, even when the `Request` value is leaked with `mem::forget`. So requests
//! are started inside [`Runtime::scope`], which records every handle it hands out and, when the
//! closure returns (or panics), settles each one that is still there: it waits for it (up to the
//! runtime's timeout), and if it is still pending then, aborts the runtime, the one call that
//! makes the library complete it at once. Dropping a `Request` settles it the same way.
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tutti_sys as sys;

use crate::error::{check, Error, Result};
use crate::runtime::{millis, Runtime};
use crate::tensor::{Element, Gathered};

/// One request handle and the runtime it runs on; freed exactly once, by whoever settles it.
struct Slot {
    handle: Mutex<Option<(sys::tutti_runtime_t, sys::tutti_request_t)>>,
}

// The C ABI lets any thread test, wait on and free a request.
unsafe impl Send for Slot {}
unsafe impl Sync for Slot {}

impl Slot {
    fn settle(&self) {
        let taken = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((runtime, request)) = taken {
            unsafe {
                sys::tutti_request_wait(request, -1);
                if sys::tutti_request_test(request) == sys::TUTTI_IN_PROGRESS {
                    eprintln!(
                        "tutti: a request was still pending after the runtime's timeout when its \
                         buffers went out of scope; aborting this rank so that the library stops \
                         writing into them"
                    );
                    sys::tutti_abort(runtime);
                    while sys::tutti_request_wait(request, -1) == sys::TUTTI_ERR_TIMEOUT
                        && sys::tutti_request_test(request) == sys::TUTTI_IN_PROGRESS
                    {}
                }
                sys::tutti_request_free(request);
            }
        }
    }
}

/// Where requests over borrowed buffers are started (see [`Runtime::scope`]). Buffers passed to
/// it must outlive the scope: declare them before calling `scope`. A buffer that would die
/// while its request may still be pending is refused at compile time:
///
/// ```compile_fail
/// # let rt = tutti::Runtime::init().unwrap();
/// rt.scope(|s| {
///     let mut local = vec![0.0f32; 4]; // dropped at the end of the closure, before the scope
///     s.allreduce("x", rt.world(), &mut local, tutti::Op::Sum).unwrap();
/// });
/// ```
pub struct Scope<'scope, 'env: 'scope> {
    pub(crate) runtime: &'env Runtime,
    slots: Mutex<Vec<Arc<Slot>>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl Runtime {
    /// Runs `f` with a [`Scope`] in which collectives may be started without waiting for them,
    /// over buffers borrowed from outside the closure, several at once (on one set or on several,
    /// which then run independently). Every request still pending when `f` returns is waited for
    /// before `scope` returns (see the module's documentation).
    ///
    /// ```no_run
    /// # fn main() -> tutti::Result<()> {
    /// let rt = tutti::Runtime::init()?;
    /// let (mut a, mut b) = (vec![1.0f32; 8], vec![2.0f64; 8]);
    /// rt.scope(|s| {
    ///     let mut first = s.allreduce("a", rt.world(), &mut a, tutti::Op::Sum)?;
    ///     let mut second = s.allreduce("b", rt.world(), &mut b, tutti::Op::Max)?;
    ///     first.wait(None)?;
    ///     second.wait(Some(std::time::Duration::from_secs(30)))
    /// })?;
    /// # Ok(()) }
    /// ```
    pub fn scope<'env, F, R>(&'env self, f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        let scope = Scope { runtime: self, slots: Mutex::new(Vec::new()), _scope: PhantomData, _env: PhantomData };
        let result = catch_unwind(AssertUnwindSafe(|| f(&scope)));
        for slot in scope.slots.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            slot.settle();
        }
        match result {
            Ok(r) => r,
            Err(panic) => resume_unwind(panic),
        }
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Records a request the library accepted and hands out its `Request`.
    pub(crate) fn track(&'scope self, handle: sys::tutti_request_t, name: String) -> Request<'scope> {
        let slot = Arc::new(Slot { handle: Mutex::new(Some((self.runtime.raw(), handle))) });
        self.slots.lock().unwrap_or_else(|e| e.into_inner()).push(slot.clone());
        Request { slot, name, _scope: PhantomData }
    }
}

/// A collective or point-to-point transfer in flight. `Send`: it may be waited on by another
/// thread of a `std::thread::scope` inside the tutti scope. Dropping it waits for it.
pub struct Request<'scope> {
    slot: Arc<Slot>,
    name: String,
    _scope: PhantomData<&'scope ()>,
}

impl<'scope> Request<'scope> {
    /// The tensor name it was started with ("" for point-to-point).
    pub fn name(&self) -> &str {
        &self.name
    }

    fn with<R>(&self, f: impl FnOnce(sys::tutti_request_t) -> R) -> R {
        let guard = self.slot.handle.lock().unwrap_or_else(|e| e.into_inner());
        // Only the scope or the request's own Drop take the handle, and neither runs while the
        // request is borrowed.
        let (_, handle) = guard.expect("a live request has its handle");
        f(handle)
    }

    /// Waits up to `timeout` (`None`: the runtime's timeout). `Err(Error::Timeout)` when the
    /// wait expired: the request is still pending and may be waited on again.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<()> {
        self.with(|handle| check(unsafe { sys::tutti_request_wait(handle, millis(timeout, -1)) }))
    }

    /// `Ok(true)` once completed, `Ok(false)` while pending, or the request's error.
    pub fn test(&mut self) -> Result<bool> {
        self.with(|handle| match unsafe { sys::tutti_request_test(handle) } {
            sys::TUTTI_IN_PROGRESS => Ok(false),
            status => check(status).map(|()| true),
        })
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        self.slot.settle();
    }
}

/// An allgather in flight: its result belongs to the request until it is copied out by `wait`.
pub struct GatherRequest<'scope, T: Element> {
    pub(crate) request: Request<'scope>,
    pub(crate) _element: PhantomData<fn() -> T>,
}

impl<'scope, T: Element> GatherRequest<'scope, T> {
    /// Waits as [`Request::wait`] does, then copies the result (owned by the library until the
    /// request is freed) into a `Vec`.
    pub fn wait(&mut self, timeout: Option<Duration>) -> Result<Gathered<T>> {
        self.request.wait(timeout)?;
        self.request.with(copy_output)
    }

    pub fn test(&mut self) -> Result<bool> {
        self.request.test()
    }
}

/// Copies a completed request's library-owned result (`tutti_request_output`). `handle` is a
/// live request of this crate (its slot holds it), so the library's pointers are valid here.
fn copy_output<T: Element>(handle: sys::tutti_request_t) -> Result<Gathered<T>> {
    let mut output = sys::tutti_tensor_init();
    check(unsafe { sys::tutti_request_output(handle, &mut output) })?;
    if output.dtype != T::DTYPE {
        return Err(Error::Internal(format!("result has dtype {}, expected {}", output.dtype, T::DTYPE)));
    }
    let shape = if output.ndim == 0 {
        Vec::new()
    } else {
        // Owned by the request until tutti_request_free, which cannot run while we hold it.
        unsafe { std::slice::from_raw_parts(output.shape, output.ndim as usize) }.to_vec()
    };
    let count = shape.iter().product::<i64>() as usize;
    let mut data: Vec<T> = Vec::with_capacity(count);
    if count > 0 {
        // Byte-wise: the result's alignment is the allocator's business, not ours. Every bit
        // pattern is a valid T (Element's contract), so the copied bytes are valid values.
        unsafe {
            std::ptr::copy_nonoverlapping(
                output.data as *const u8,
                data.as_mut_ptr() as *mut u8,
                count * std::mem::size_of::<T>(),
            );
            data.set_len(count);
        }
    }
    Ok(Gathered { data, shape })
}
