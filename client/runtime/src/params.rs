//! A launch's arguments, typed, checked against the kernel's parameter layout and laid
//! into constant bank 0's parameter bytes.
//!
//! Flow: the caller passes `&[Arg]`, one per parameter in the kernel's order →
//! [`lay`] checks the count and each size against EIATTR_KPARAM_INFO (rig-cubin's
//! [`rig_cubin::Param`]) and writes the little-endian bytes at each parameter's offset
//! into a buffer the launch reuses (no allocation) → the compute channel copies the
//! words into the launch's bank 0.
//!
//! What is checked: the number of arguments and each one's size. What cannot be: the
//! type behind a size (a `u64`, a pointer and a `double` are all 8 bytes, and how
//! KPARAM_INFO marks pointers is unverified: docs/hardware/nvidia-compute.md), and where
//! a pointer points (a GPU address outside the session's memory faults the kernel:
//! docs/compute.md, "What is checked"). A struct passed by value is [`Arg::Bytes`].

use rig_cubin::Param;
use rig_model::addr::GpuVa;

use crate::cbank0::Cbank0Error;

/// One kernel argument.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arg<'a> {
    /// `unsigned char`, `char`, `bool`.
    U8(u8),
    /// `unsigned short`, `short`, `__half`'s bits.
    U16(u16),
    /// `unsigned`.
    U32(u32),
    /// `int`.
    I32(i32),
    /// `unsigned long long`, `size_t`.
    U64(u64),
    /// `long long`.
    I64(i64),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
    /// A pointer into the session's GPU address space.
    Ptr(GpuVa),
    /// Anything else (a struct by value), as its bytes.
    Bytes(&'a [u8]),
}

impl Arg<'_> {
    /// Its size in bytes.
    pub fn size(&self) -> usize {
        match self {
            Self::U8(_) => 1,
            Self::U16(_) => 2,
            Self::U32(_) | Self::I32(_) | Self::F32(_) => 4,
            Self::U64(_) | Self::I64(_) | Self::F64(_) | Self::Ptr(_) => 8,
            Self::Bytes(b) => b.len(),
        }
    }

    /// Its little-endian bytes, as the kernel's parameter holds them.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0; self.size()];
        self.put(&mut out);
        out
    }

    /// Writes its little-endian bytes to the start of `out` (exactly its size).
    pub(crate) fn put(&self, out: &mut [u8]) {
        match self {
            Self::U8(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::U16(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::U32(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::I32(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::U64(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::I64(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::F32(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::F64(v) => out.copy_from_slice(&v.to_le_bytes()),
            Self::Ptr(v) => out.copy_from_slice(&v.get().to_le_bytes()),
            Self::Bytes(b) => out.copy_from_slice(b),
        }
    }
}

macro_rules! from {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl From<$t> for Arg<'_> {
            fn from(v: $t) -> Self {
                Self::$v(v)
            }
        }
    )*};
}

from!(u8 => U8, u16 => U16, u32 => U32, i32 => I32, u64 => U64, i64 => I64, f32 => F32,
    f64 => F64, GpuVa => Ptr);

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(v: &'a [u8]) -> Self {
        Self::Bytes(v)
    }
}

/// Lays `args` out as the kernel's parameters `params` into `out`, the parameter bytes
/// of bank 0 from the parameter base (zeroed first, so padding reads 0).
///
/// # Errors
/// [`Cbank0Error::Count`] unless there is one argument per parameter;
/// [`Cbank0Error::Size`] for an argument of another size than its parameter. `out` is
/// unchanged on an error.
pub fn lay(params: &[Param], args: &[Arg<'_>], out: &mut [u8]) -> Result<(), Cbank0Error> {
    if args.len() != params.len() {
        return Err(Cbank0Error::Count {
            given: args.len(),
            expected: params.len(),
        });
    }
    for (p, a) in params.iter().zip(args) {
        if usize::try_from(p.size).ok() != Some(a.size()) {
            return Err(Cbank0Error::Size {
                ordinal: p.ordinal,
                given: a.size(),
                expected: p.size,
            });
        }
    }
    // Not for no bytes: glibc's AVX-512 memset stores zero bytes with a masked store
    // at the slice's address, and for an empty slice that is a dangling one, which
    // cost a microcode assist of about 0.1 µs per launch of a kernel without
    // parameters (docs/BENCHMARKS.md, "Launching a kernel: host time").
    if !out.is_empty() {
        out.fill(0);
    }
    for (p, a) in params.iter().zip(args) {
        let at = usize::from(p.offset);
        // PANIC: rig-cubin checked that every parameter lies inside the kernel's
        // parameter bytes, which `out` holds whole (the compute channel sizes it so).
        a.put(&mut out[at..at + a.size()]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::kernels;

    #[test]
    fn arguments_land_at_their_parameters_offsets() {
        let m = kernels();
        let k = m.kernel("mixed_params").expect("mixed_params");
        let mut out = vec![0xffu8; k.param_bytes() as usize];
        let mixed: Vec<u8> = (1..=32).collect();
        let args = [
            Arg::U8(0xe1),
            Arg::Bytes(&mixed),
            Arg::F64(2.5),
            Arg::U16(0x1234),
            Arg::Ptr(GpuVa(0x0909_0909_0909_0909)),
        ];
        lay(k.params(), &args, &mut out).expect("sizes match");
        assert_eq!(out[0], 0xe1);
        assert_eq!(&out[1..8], &[0; 7], "padding zeroed");
        assert_eq!(&out[8..40], mixed.as_slice());
        assert_eq!(&out[40..48], &2.5f64.to_le_bytes());
        assert_eq!(&out[48..50], &[0x34, 0x12]);
        assert_eq!(&out[56..64], &[9; 8]);
    }

    #[test]
    fn a_wrong_count_or_size_is_refused_and_writes_nothing() {
        let m = kernels();
        let k = m.kernel("saxpy").expect("saxpy");
        let mut out = vec![0xaau8; k.param_bytes() as usize];
        let x = Arg::Ptr(GpuVa(0x1000));
        assert_eq!(
            lay(k.params(), &[Arg::F32(1.0), x, x], &mut out),
            Err(Cbank0Error::Count {
                given: 3,
                expected: 4
            })
        );
        assert_eq!(
            lay(k.params(), &[Arg::F64(1.0), x, x, Arg::U64(4)], &mut out),
            Err(Cbank0Error::Size {
                ordinal: 0,
                given: 8,
                expected: 4
            })
        );
        assert_eq!(
            lay(k.params(), &[Arg::F32(1.0), x, x, Arg::U32(4)], &mut out),
            Err(Cbank0Error::Size {
                ordinal: 3,
                given: 4,
                expected: 8
            })
        );
        assert!(out.iter().all(|&b| b == 0xaa));
        assert_eq!(Arg::from(3u32), Arg::U32(3));
        assert_eq!(Arg::from(GpuVa(8)), Arg::Ptr(GpuVa(8)));
        assert_eq!(Arg::from(&[1u8, 2][..]).size(), 2);
    }
}
