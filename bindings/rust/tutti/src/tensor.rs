//! Typed views of caller-owned memory: what the C ABI's `tutti_tensor_t` describes, checked here
//! so that a descriptor can only ever say what the slice really holds.
use std::marker::PhantomData;

use tutti_sys as sys;

use crate::error::{Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// An element type tutti moves and reduces. Implemented for `f32`, `f64`, `i8`, `u8`, `i16`,
/// `i32`, `i64` and [`Bool`]: types for which every bit pattern a peer may send is a valid value
/// (so not Rust's `bool`, which a C peer could fill with a 2).
///
/// # Safety
/// `DTYPE` must be the tutti dtype whose element has exactly this type's size and meaning.
pub unsafe trait Element: Copy + Send + Sync + 'static + sealed::Sealed {
    /// The `TUTTI_DTYPE_*` value.
    const DTYPE: i32;
}

macro_rules! elements {
    ($($t:ty => $dtype:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        unsafe impl Element for $t {
            const DTYPE: i32 = sys::$dtype;
        }
    )*};
}

elements! {
    f32 => TUTTI_DTYPE_FLOAT32,
    f64 => TUTTI_DTYPE_FLOAT64,
    i8 => TUTTI_DTYPE_INT8,
    u8 => TUTTI_DTYPE_UINT8,
    i16 => TUTTI_DTYPE_INT16,
    i32 => TUTTI_DTYPE_INT32,
    i64 => TUTTI_DTYPE_INT64,
    Bool => TUTTI_DTYPE_BOOL,
}

/// tutti's bool element (`TUTTI_DTYPE_BOOL`): one byte, 0 false, anything else true; sum and max
/// reduce as "or", min and product as "and".
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Bool(pub u8);

impl Bool {
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

impl From<bool> for Bool {
    fn from(b: bool) -> Bool {
        Bool(b as u8)
    }
}

/// The shape of a view: dimensions whose product is the slice's length (1-D by default).
fn checked_shape(len: usize, dims: &[usize]) -> Result<Vec<i64>> {
    if dims.len() > sys::TUTTI_MAX_DIMS as usize {
        return Err(Error::InvalidArgument(format!(
            "{} dimensions; tutti takes at most {}",
            dims.len(),
            sys::TUTTI_MAX_DIMS
        )));
    }
    let product = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if product != Some(len) {
        return Err(Error::InvalidArgument(format!(
            "shape {:?} does not hold the slice's {} elements",
            dims, len
        )));
    }
    Ok(dims.iter().map(|&d| d as i64).collect())
}

/// A read-only tensor: an input (allreduce, allgather, send).
pub struct Tensor<'a, T: Element> {
    data: *const T,
    shape: Vec<i64>,
    _borrow: PhantomData<&'a [T]>,
}

/// A tensor tutti writes into (an allreduce output, a broadcast, a recv).
pub struct TensorMut<'a, T: Element> {
    data: *mut T,
    shape: Vec<i64>,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<'a, T: Element> Tensor<'a, T> {
    /// `data` seen as a tensor of shape `dims` (row-major); their product must be its length.
    pub fn new(data: &'a [T], dims: &[usize]) -> Result<Self> {
        Ok(Tensor { data: data.as_ptr(), shape: checked_shape(data.len(), dims)?, _borrow: PhantomData })
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    /// The C descriptor; it points into `self`, which must outlive its use (the shape is copied
    /// at submission, the data must stay until the request completes).
    pub(crate) fn raw(&self) -> sys::tutti_tensor_t {
        describe(self.data as *mut T, &self.shape)
    }
}

impl<'a, T: Element> TensorMut<'a, T> {
    pub fn new(data: &'a mut [T], dims: &[usize]) -> Result<Self> {
        let shape = checked_shape(data.len(), dims)?;
        Ok(TensorMut { data: data.as_mut_ptr(), shape, _borrow: PhantomData })
    }

    pub fn shape(&self) -> &[i64] {
        &self.shape
    }

    pub(crate) fn raw(&self) -> sys::tutti_tensor_t {
        describe(self.data, &self.shape)
    }
}

fn describe<T: Element>(data: *mut T, shape: &[i64]) -> sys::tutti_tensor_t {
    let mut t = sys::tutti_tensor_init();
    t.data = data as *mut std::os::raw::c_void;
    t.dtype = T::DTYPE;
    t.ndim = shape.len() as i32;
    t.shape = shape.as_ptr();
    t
}

// The views only carry the borrow; the pointers are as thread-safe as the slices they came from.
unsafe impl<'a, T: Element> Send for Tensor<'a, T> {}
unsafe impl<'a, T: Element> Send for TensorMut<'a, T> {}

impl<'a, T: Element> From<&'a [T]> for Tensor<'a, T> {
    fn from(data: &'a [T]) -> Self {
        Tensor { data: data.as_ptr(), shape: vec![data.len() as i64], _borrow: PhantomData }
    }
}

impl<'a, T: Element> From<&'a Vec<T>> for Tensor<'a, T> {
    fn from(data: &'a Vec<T>) -> Self {
        data.as_slice().into()
    }
}

impl<'a, T: Element, const N: usize> From<&'a [T; N]> for Tensor<'a, T> {
    fn from(data: &'a [T; N]) -> Self {
        data.as_slice().into()
    }
}

impl<'a, T: Element> From<&'a mut [T]> for TensorMut<'a, T> {
    fn from(data: &'a mut [T]) -> Self {
        let shape = vec![data.len() as i64];
        TensorMut { data: data.as_mut_ptr(), shape, _borrow: PhantomData }
    }
}

impl<'a, T: Element> From<&'a mut Vec<T>> for TensorMut<'a, T> {
    fn from(data: &'a mut Vec<T>) -> Self {
        data.as_mut_slice().into()
    }
}

impl<'a, T: Element, const N: usize> From<&'a mut [T; N]> for TensorMut<'a, T> {
    fn from(data: &'a mut [T; N]) -> Self {
        data.as_mut_slice().into()
    }
}

/// A result the library allocated (allgather), copied out of the request before it was freed.
#[derive(Clone, Debug, PartialEq)]
pub struct Gathered<T> {
    /// Row-major elements.
    pub data: Vec<T>,
    /// Its shape; `shape[0]` is the sum of the members' rows.
    pub shape: Vec<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_must_hold_the_slice() {
        let data = [0i32; 6];
        assert_eq!(Tensor::new(&data, &[3, 2]).unwrap().shape(), &[3, 2]);
        let wrong = Tensor::new(&data, &[4, 2]).err().unwrap();
        assert_eq!(wrong, Error::InvalidArgument("shape [4, 2] does not hold the slice's 6 elements".into()));
        let deep = Tensor::new(&data, &[1; 17]).err().unwrap();
        assert_eq!(deep.message(), "17 dimensions; tutti takes at most 16");
        let overflow = Tensor::new(&data, &[usize::MAX, 2]).err().unwrap();
        assert_eq!(overflow.status(), sys::TUTTI_ERR_INVALID_ARGUMENT);
    }

    #[test]
    fn descriptors_carry_dtype_and_shape() {
        let mut data = vec![0.0f64; 4];
        let view = TensorMut::from(&mut data);
        let raw = view.raw();
        assert_eq!(raw.struct_size, std::mem::size_of::<sys::tutti_tensor_t>());
        assert_eq!((raw.dtype, raw.ndim, raw.device_type), (sys::TUTTI_DTYPE_FLOAT64, 1, 0));
        assert_eq!(unsafe { *raw.shape }, 4);
        assert_eq!(Bool::from(true), Bool(1));
        assert!(Bool(2).get());
    }
}
