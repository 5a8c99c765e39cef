//! Collectives and point-to-point: started in a [`Scope`] (asynchronous, over borrowed buffers)
//! or called on the [`Runtime`] (submit and wait, up to the runtime's timeout).
use std::marker::PhantomData;
use std::ptr;

use tutti_sys as sys;

use crate::error::{check, Result};
use crate::request::{GatherRequest, Request, Scope};
use crate::runtime::{c_string, ProcessSet, Runtime};
use crate::tensor::{Element, Gathered, Tensor, TensorMut};

/// Reduction operations (`TUTTI_OP_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Sum,
    Average,
    Min,
    Max,
    Product,
}

impl Op {
    fn raw(self) -> i32 {
        match self {
            Op::Sum => sys::TUTTI_OP_SUM,
            Op::Average => sys::TUTTI_OP_AVERAGE,
            Op::Min => sys::TUTTI_OP_MIN,
            Op::Max => sys::TUTTI_OP_MAX,
            Op::Product => sys::TUTTI_OP_PRODUCT,
        }
    }
}

/// An allreduce's options; the defaults are `TUTTI_ALLREDUCE_OPTIONS_INIT`'s (sum, no scaling,
/// priority 0).
#[derive(Clone, Copy)]
pub struct AllreduceOptions {
    raw: sys::tutti_allreduce_options_t,
}

impl Default for AllreduceOptions {
    fn default() -> Self {
        AllreduceOptions { raw: sys::tutti_allreduce_options_init() }
    }
}

impl AllreduceOptions {
    pub fn new(op: Op) -> Self {
        Self::default().op(op)
    }
    pub fn op(mut self, op: Op) -> Self {
        self.raw.reduce_op = op.raw();
        self
    }
    /// Applied to the input before the reduction.
    pub fn prescale(mut self, factor: f64) -> Self {
        self.raw.prescale_factor = factor;
        self
    }
    /// Applied to the result.
    pub fn postscale(mut self, factor: f64) -> Self {
        self.raw.postscale_factor = factor;
        self
    }
    /// Among tensors of a set released together, higher priorities run first.
    pub fn priority(mut self, priority: i32) -> Self {
        self.raw.priority = priority;
        self
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    fn start(&'scope self, name: &str, submit: impl FnOnce(*const std::os::raw::c_char, *mut sys::tutti_request_t) -> i32) -> Result<Request<'scope>> {
        // "" is C's NULL: an automatic name from a per-set counter (submit in the same order).
        let c_name = if name.is_empty() { None } else { Some(c_string("tensor name", name)?) };
        let mut handle: sys::tutti_request_t = ptr::null_mut();
        check(submit(c_name.as_ref().map_or(ptr::null(), |c| c.as_ptr()), &mut handle))?;
        Ok(self.track(handle, name.to_string()))
    }

    /// Reduces `data` in place across the set's members. `name` identifies the tensor across
    /// ranks (unique among this rank's pending requests of the set); "" picks one from a per-set
    /// counter, so that every member must then submit in the same order.
    pub fn allreduce<T: Element>(
        &'scope self,
        name: &str,
        set: ProcessSet<'_>,
        data: impl Into<TensorMut<'scope, T>>,
        op: Op,
    ) -> Result<Request<'scope>> {
        let data = data.into();
        let id = self.runtime.own(set)?;
        let options = AllreduceOptions::new(op).raw;
        let raw = data.raw();
        self.start(name, |n, h| unsafe { sys::tutti_allreduce(self.runtime.raw(), n, id, &raw, &raw, &options, h) })
    }

    /// Reduces `input` into `output` (same element count) with `options`.
    pub fn allreduce_into<T: Element>(
        &'scope self,
        name: &str,
        set: ProcessSet<'_>,
        input: impl Into<Tensor<'scope, T>>,
        output: impl Into<TensorMut<'scope, T>>,
        options: &AllreduceOptions,
    ) -> Result<Request<'scope>> {
        let (input, output) = (input.into(), output.into());
        let id = self.runtime.own(set)?;
        let (i, o) = (input.raw(), output.raw());
        self.start(name, |n, h| unsafe { sys::tutti_allreduce(self.runtime.raw(), n, id, &i, &o, &options.raw, h) })
    }

    /// Broadcasts `data` in place from `root` (a global rank in the set).
    pub fn broadcast<T: Element>(
        &'scope self,
        name: &str,
        set: ProcessSet<'_>,
        data: impl Into<TensorMut<'scope, T>>,
        root: i32,
    ) -> Result<Request<'scope>> {
        let data = data.into();
        let id = self.runtime.own(set)?;
        let raw = data.raw();
        self.start(name, |n, h| unsafe { sys::tutti_broadcast(self.runtime.raw(), n, id, &raw, root, h) })
    }

    /// Gathers every member's `input` along its first dimension, in set order. Members may give
    /// different numbers of rows.
    pub fn allgather<T: Element>(
        &'scope self,
        name: &str,
        set: ProcessSet<'_>,
        input: impl Into<Tensor<'scope, T>>,
    ) -> Result<GatherRequest<'scope, T>> {
        let input = input.into();
        let id = self.runtime.own(set)?;
        let raw = input.raw();
        let request = self.start(name, |n, h| unsafe { sys::tutti_allgather(self.runtime.raw(), n, id, &raw, h) })?;
        Ok(GatherRequest { request, _element: PhantomData })
    }

    /// Sends `data` to `destination` (a global rank in the set); matched by tag, in order.
    pub fn send<T: Element>(
        &'scope self,
        set: ProcessSet<'_>,
        data: impl Into<Tensor<'scope, T>>,
        destination: i32,
        tag: i32,
    ) -> Result<Request<'scope>> {
        let data = data.into();
        let id = self.runtime.own(set)?;
        let raw = data.raw();
        let request = self.start("", |_, h| unsafe { sys::tutti_send(self.runtime.raw(), id, &raw, destination, tag, h) })?;
        Ok(request)
    }

    /// Receives into `data` (exactly the sent size) from `source`.
    pub fn recv<T: Element>(
        &'scope self,
        set: ProcessSet<'_>,
        data: impl Into<TensorMut<'scope, T>>,
        source: i32,
        tag: i32,
    ) -> Result<Request<'scope>> {
        let data = data.into();
        let id = self.runtime.own(set)?;
        let raw = data.raw();
        self.start("", |_, h| unsafe { sys::tutti_recv(self.runtime.raw(), id, &raw, source, tag, h) })
    }

    /// Completes once every member entered the barrier.
    pub fn barrier(&'scope self, set: ProcessSet<'_>) -> Result<Request<'scope>> {
        let id = self.runtime.own(set)?;
        self.start("", |_, h| unsafe { sys::tutti_barrier(self.runtime.raw(), id, h) })
    }
}

/// Blocking forms: each submits, then waits up to the runtime's timeout.
impl Runtime {
    pub fn allreduce<'a, T: Element>(&self, name: &str, set: ProcessSet<'_>, data: impl Into<TensorMut<'a, T>>, op: Op) -> Result<()> {
        let data = data.into();
        self.scope(|s| s.allreduce(name, set, data, op)?.wait(None))
    }

    pub fn allreduce_into<'a, T: Element>(
        &self,
        name: &str,
        set: ProcessSet<'_>,
        input: impl Into<Tensor<'a, T>>,
        output: impl Into<TensorMut<'a, T>>,
        options: &AllreduceOptions,
    ) -> Result<()> {
        let (input, output) = (input.into(), output.into());
        self.scope(|s| s.allreduce_into(name, set, input, output, options)?.wait(None))
    }

    pub fn broadcast<'a, T: Element>(&self, name: &str, set: ProcessSet<'_>, data: impl Into<TensorMut<'a, T>>, root: i32) -> Result<()> {
        let data = data.into();
        self.scope(|s| s.broadcast(name, set, data, root)?.wait(None))
    }

    pub fn allgather<'a, T: Element>(&self, name: &str, set: ProcessSet<'_>, input: impl Into<Tensor<'a, T>>) -> Result<Gathered<T>> {
        let input = input.into();
        self.scope(|s| s.allgather(name, set, input)?.wait(None))
    }

    pub fn send<'a, T: Element>(&self, set: ProcessSet<'_>, data: impl Into<Tensor<'a, T>>, destination: i32, tag: i32) -> Result<()> {
        let data = data.into();
        self.scope(|s| s.send(set, data, destination, tag)?.wait(None))
    }

    pub fn recv<'a, T: Element>(&self, set: ProcessSet<'_>, data: impl Into<TensorMut<'a, T>>, source: i32, tag: i32) -> Result<()> {
        let data = data.into();
        self.scope(|s| s.recv(set, data, source, tag)?.wait(None))
    }

    pub fn barrier(&self, set: ProcessSet<'_>) -> Result<()> {
        self.scope(|s| s.barrier(set)?.wait(None))
    }
}
