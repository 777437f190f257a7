//! Python values as kernel arguments and launch shapes: what `Runtime.launch`,
//! `rig.Graph.add` and `rig.Graph.set_arg` take, converted to rig-runtime's `Arg`s
//! against the sizes the cubin gives each parameter ([`arg`], [`typed_args`]), and grid
//! and block extents ([`dim3`]). `_launch_args` exposes the conversion to rig's own
//! tests.
//!
//! Not here: what a launch checks beyond the Python values (rig-runtime's `params`).

use pyo3::{
    exceptions::{PyTypeError, PyValueError},
    prelude::*,
    types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt},
};
use rig_runtime::Arg;

use crate::{buffer::HostBuffer, gpumem::GpuBuffer, module::Kernel};

/// An int argument as a parameter of `size` bytes: unsigned, or negative and signed.
fn int_arg<'a>(o: &Bound<'_, PyAny>, size: u32, bad: impl Fn(&str) -> PyErr) -> PyResult<Arg<'a>> {
    let v: i128 = o.extract()?;
    match size {
        1 => u8::try_from(v)
            .map(Arg::U8)
            .or_else(|_| i8::try_from(v).map(|x| Arg::U8(x.cast_unsigned())))
            .map_err(|_| bad(&v.to_string())),
        2 => u16::try_from(v)
            .map(Arg::U16)
            .or_else(|_| i16::try_from(v).map(|x| Arg::U16(x.cast_unsigned())))
            .map_err(|_| bad(&v.to_string())),
        4 if v < 0 => i32::try_from(v)
            .map(Arg::I32)
            .map_err(|_| bad(&v.to_string())),
        4 => u32::try_from(v)
            .map(Arg::U32)
            .map_err(|_| bad(&v.to_string())),
        8 if v < 0 => i64::try_from(v)
            .map(Arg::I64)
            .map_err(|_| bad(&v.to_string())),
        8 => u64::try_from(v)
            .map(Arg::U64)
            .map_err(|_| bad(&v.to_string())),
        _ => Err(bad("an int")),
    }
}

/// Argument `i` of a launch, for a parameter of `size` bytes: a buffer passes its GPU
/// address; an int fits the size (negative ones signed); a float is a `float` (4) or a
/// `double` (8); bytes pass as they are (a struct by value); a numpy scalar passes its
/// bytes when its dtype's width is the parameter's. (A cubin gives each parameter's
/// size, not its type: a Python int for a `float` parameter cannot be told apart from
/// one for an `int`; pass `np.float32(x)` or a float.)
pub(crate) fn arg<'a>(
    o: &'a Bound<'_, PyAny>,
    size: u32,
    i: usize,
    bytes: &'a mut Vec<u8>,
) -> PyResult<Arg<'a>> {
    let bad = |what: &str| {
        PyValueError::new_err(format!(
            "Argument {i}: {what} does not fit a parameter of {size} bytes"
        ))
    };
    if let Ok(h) = o.cast::<HostBuffer>() {
        let va = h
            .borrow()
            .get()?
            .gpu_va()
            .ok_or_else(|| bad("a host buffer with no GPU address"))?;
        return Ok(Arg::Ptr(va));
    }
    if let Ok(g) = o.cast::<GpuBuffer>() {
        return Ok(Arg::Ptr(g.borrow().get()?.va()));
    }
    // Plain ints first, the common case (addresses, sizes): asking one for a `dtype`
    // below raises and drops an AttributeError, a Python exception per argument.
    if o.is_exact_instance_of::<PyInt>() || o.is_exact_instance_of::<PyBool>() {
        return int_arg(o, size, bad);
    }
    // A numpy scalar (np.float32(a), np.int32(n)) or 0-d array: its dtype fixes its
    // width, which must be the parameter's; its bytes pass as they are. Before the
    // int and float checks: np.float64 is a Python float.
    if let (Ok(dtype), Ok(0)) = (
        o.getattr("dtype"),
        o.getattr("ndim").and_then(|n| n.extract::<u32>()),
    ) {
        let itemsize: u32 = dtype.getattr("itemsize")?.extract()?;
        let name = dtype.getattr("name")?.str()?.to_string();
        if itemsize != size {
            return Err(PyValueError::new_err(format!(
                "Argument {i}: a {name} ({itemsize} bytes) does not fit a parameter of {size} bytes"
            )));
        }
        *bytes = crate::buffer::contiguous_bytes(o)?;
        return Ok(Arg::Bytes(bytes));
    }
    if o.is_instance_of::<PyBool>() || o.is_instance_of::<PyInt>() {
        return int_arg(o, size, bad);
    }
    if o.is_instance_of::<PyFloat>() {
        let v: f64 = o.extract()?;
        return match size {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "a float parameter is 4 bytes"
            )]
            4 => Ok(Arg::F32(v as f32)),
            8 => Ok(Arg::F64(v)),
            _ => Err(bad("a float")),
        };
    }
    if o.is_instance_of::<PyBytes>() || o.is_instance_of::<PyByteArray>() {
        *bytes = o.extract()?;
        return Ok(Arg::Bytes(bytes));
    }
    Err(PyTypeError::new_err(format!(
        "Argument {i}: a rig buffer, int, float, bytes or numpy scalar, not {}",
        o.get_type()
            .name()
            .map_or_else(|_| "?".to_owned(), |n| n.to_string())
    )))
}

/// `args`, one per parameter of `kernel`, as its arguments (`arg`); `store` holds
/// what bytes and numpy scalars pass (one per argument).
pub(crate) fn typed_args<'a>(
    kernel: &Kernel,
    args: &'a [Bound<'_, PyAny>],
    store: &'a mut [Vec<u8>],
) -> PyResult<Vec<Arg<'a>>> {
    let sizes = kernel.param_sizes();
    if args.len() != sizes.len() {
        return Err(PyValueError::new_err(format!(
            "{} takes {} arguments, {} given",
            kernel.inner.name(),
            sizes.len(),
            args.len()
        )));
    }
    args.iter()
        .zip(sizes)
        .zip(store.iter_mut())
        .enumerate()
        .map(|(i, ((o, size), bytes))| arg(o, *size, i, bytes))
        .collect()
}

/// A grid or block extent: an int, or a tuple of one to three.
pub(crate) fn dim3(o: &Bound<'_, PyAny>) -> PyResult<(u32, u32, u32)> {
    if let Ok(x) = o.extract::<u32>() {
        return Ok((x, 1, 1));
    }
    let v: Vec<u32> = o.extract().map_err(|_| {
        PyTypeError::new_err("A grid or block is an int or a tuple of one to three ints")
    })?;
    match v.as_slice() {
        [x] => Ok((*x, 1, 1)),
        [x, y] => Ok((*x, *y, 1)),
        [x, y, z] => Ok((*x, *y, *z)),
        _ => Err(PyValueError::new_err(
            "A grid or block has one to three extents",
        )),
    }
}

/// `_launch_args(sizes, args)`: each argument's bytes as a launch with parameters of
/// `sizes` bytes would pass them, or the error it would raise. rig's own tests read the
/// conversions through it (a launch needs a GPU); not an interface for programs.
#[pyfunction]
pub fn _launch_args<'py>(
    py: Python<'py>,
    sizes: Vec<u32>,
    args: Vec<Bound<'py, PyAny>>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    if sizes.len() != args.len() {
        return Err(PyValueError::new_err(format!(
            "{} arguments for {} parameters",
            args.len(),
            sizes.len()
        )));
    }
    let mut out = Vec::with_capacity(args.len());
    for (i, (o, &size)) in args.iter().zip(&sizes).enumerate() {
        let mut scratch = Vec::new();
        let a = arg(o, size, i, &mut scratch)?;
        if a.size() != usize::try_from(size).unwrap_or(usize::MAX) {
            return Err(PyValueError::new_err(format!(
                "Argument {i}: {} bytes for a parameter of {size}",
                a.size()
            )));
        }
        out.push(PyBytes::new(py, &a.to_bytes()));
    }
    Ok(out)
}
