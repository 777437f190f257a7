//! A module laid out at GPU virtual addresses: code, constant banks and global data in
//! one image, relocations applied.
//!
//! Flow: [`Module`] → [`Layout`] (offsets and the size to allocate, pure) → the caller
//! allocates GPU memory of [`Layout::size`] at an address aligned to [`Layout::align`] →
//! [`Layout::place`] gives the [`Image`]: the bytes to upload there, the zeroed tail to
//! clear, and the address of each kernel, bank and variable.
//!
//! The layout: every `.text.*` section at 128-byte alignment, then 4 KiB of zeros (the
//! SM prefetches instructions past a kernel's end, and must find mapped memory there),
//! then each `.nv.constant<N>` bank at 256 bytes (the QMD takes bank addresses in 64-byte
//! units) padded to 16 bytes (it takes sizes in 16-byte units), then `.nv.global.init`,
//! then `.nv.global` last: it is zero-initialised data with no bytes in the file, so the
//! image stops before it and the caller clears it on the GPU ([`Image::zeroed`]) rather
//! than uploading zeros. Reference: docs/hardware/nvidia-compute.md (module placement).

use rig_model::addr::GpuVa;

use crate::kernel::Kernel;
use crate::module::{Kind, Module, bank_name};
use crate::reloc::{self, RelocError};

/// Zero bytes after the last code section.
pub const PREFETCH_SLACK: u64 = 0x1000;
/// Alignment of code sections.
pub const CODE_ALIGN: u64 = 128;
/// Alignment of constant banks.
pub const BANK_ALIGN: u64 = 256;

/// Where each of a module's sections goes, relative to the image's start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout<'m> {
    module: &'m Module,
    /// Offset of each loaded section, by the module's section index.
    offsets: Vec<u64>,
    /// Bytes uploaded (everything before `.nv.global`).
    data: u64,
    size: u64,
    align: u64,
}

/// A constant bank of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bank {
    /// N of `.nv.constant<N>`.
    pub index: u8,
    /// Its GPU address (256-byte aligned).
    pub addr: GpuVa,
    /// Its size rounded up to 16 bytes, as the QMD takes it.
    pub size: u64,
}

/// A module placed at a GPU address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    base: GpuVa,
    bytes: Vec<u8>,
    zeroed: (GpuVa, u64),
    addrs: Vec<u64>,
    banks: Vec<Bank>,
    kernel_banks: Vec<(String, Bank)>,
    variables: Vec<(String, GpuVa)>,
}

/// Why an image cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The module's sections do not fit a 64-bit address space.
    #[error("the image's layout overflows 64 bits")]
    Overflow,
    /// The base address is not aligned as the layout needs.
    #[error("an image at {base:#x}: it needs {align}-byte alignment")]
    Base {
        /// The address asked for.
        base: u64,
        /// The alignment needed.
        align: u64,
    },
    /// A relocation's value does not fit its field.
    #[error("relocation of {section} at {offset:#x} against {symbol}")]
    Relocation {
        /// The section relocated.
        section: String,
        /// Where.
        offset: u64,
        /// Against which symbol.
        symbol: String,
        /// What does not fit.
        #[source]
        source: RelocError,
    },
}

fn align_up(v: u64, align: u64) -> Option<u64> {
    let mask = align.checked_sub(1)?;
    v.checked_add(mask).map(|x| x & !mask)
}

impl Module {
    /// Where this module's sections go in an image.
    ///
    /// # Errors
    /// [`ImageError::Overflow`] for sections whose sizes do not add up in 64 bits.
    pub fn layout(&self) -> Result<Layout<'_>, ImageError> {
        let sections = self.sections();
        let mut offsets = vec![0u64; sections.len()];
        let mut at = 0u64;
        let mut align = BANK_ALIGN;
        let order = [Kind::Code, Kind::Bank(0), Kind::GlobalInit, Kind::Global];
        for (step, group) in order.iter().enumerate() {
            let in_group = |k: Kind| match (group, k) {
                (Kind::Bank(_), Kind::Bank(_) | Kind::KernelBank(_)) => true,
                (g, k) => *g == k,
            };
            for (i, s) in sections
                .iter()
                .enumerate()
                .filter(|(_, s)| in_group(s.kind))
            {
                let size = match s.kind {
                    Kind::Bank(_) | Kind::KernelBank(_) => {
                        align_up(s.size, 16).ok_or(ImageError::Overflow)?
                    }
                    _ => s.size,
                };
                at = align_up(at, s.align).ok_or(ImageError::Overflow)?;
                offsets[i] = at;
                at = at.checked_add(size).ok_or(ImageError::Overflow)?;
                align = align.max(s.align);
            }
            if step == 0 {
                at = at.checked_add(PREFETCH_SLACK).ok_or(ImageError::Overflow)?;
            }
        }
        let data = sections
            .iter()
            .zip(&offsets)
            .filter(|(s, _)| s.kind == Kind::Global)
            .map(|(_, &o)| o)
            .min()
            .unwrap_or(at);
        Ok(Layout {
            module: self,
            offsets,
            data,
            size: at,
            align,
        })
    }
}

impl Layout<'_> {
    /// Bytes of GPU memory the image needs.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The alignment its base address needs.
    pub fn align(&self) -> u64 {
        self.align
    }

    /// Offset of the module's loaded section `index` in the image.
    pub fn offset(&self, index: usize) -> Option<u64> {
        self.offsets.get(index).copied()
    }

    /// Lays the module out at GPU address `base` and applies its relocations.
    ///
    /// # Errors
    /// [`ImageError::Base`] for a misaligned base, [`ImageError::Overflow`] for an image
    /// that would end past 2^64, [`ImageError::Relocation`] for a value that does not fit
    /// its field (`R_CUDA_32` of an address at or above 4 GiB).
    pub fn place(&self, base: GpuVa) -> Result<Image, ImageError> {
        let va = base;
        let base = va.get();
        if !base.is_multiple_of(self.align) {
            return Err(ImageError::Base {
                base,
                align: self.align,
            });
        }
        base.checked_add(self.size).ok_or(ImageError::Overflow)?;
        let addr = |i: usize| base + self.offsets[i];
        let len = usize::try_from(self.data).map_err(|_| ImageError::Overflow)?;
        let mut bytes = vec![0u8; len];
        let sections = self.module.sections();
        for (i, s) in sections.iter().enumerate() {
            if s.kind == Kind::Global {
                continue;
            }
            let at = usize::try_from(self.offsets[i]).map_err(|_| ImageError::Overflow)?;
            let end = at.checked_add(s.data.len()).ok_or(ImageError::Overflow)?;
            bytes
                .get_mut(at..end)
                .ok_or(ImageError::Overflow)?
                .copy_from_slice(&s.data);
        }
        for r in self.module.relocations() {
            let fail = |source| ImageError::Relocation {
                section: sections[r.section].name.clone(),
                offset: r.offset,
                symbol: r.symbol.clone(),
                source,
            };
            // Addresses wrap like the hardware's adders: an addend moves within the image.
            let value = addr(r.target)
                .wrapping_add(r.value)
                .wrapping_add_signed(r.addend);
            let start =
                usize::try_from(self.offsets[r.section]).map_err(|_| ImageError::Overflow)?;
            let section = bytes.get_mut(start..).ok_or(ImageError::Overflow)?;
            reloc::apply(r.kind, section, r.offset, value).map_err(fail)?;
        }
        // Every bank at its address; a kernel's own (`.nv.constant<N>.<kernel>`) with
        // that kernel's name.
        let mut banks = Vec::new();
        let mut kernel_banks = Vec::new();
        for (i, s) in sections.iter().enumerate() {
            let (Kind::Bank(index) | Kind::KernelBank(index)) = s.kind else {
                continue;
            };
            let bank = Bank {
                index,
                addr: GpuVa(addr(i)),
                size: align_up(s.size, 16).unwrap_or(s.size),
            };
            match bank_name(&s.name) {
                Some((_, Some(kernel))) => kernel_banks.push((kernel.to_owned(), bank)),
                _ => banks.push(bank),
            }
        }
        Ok(Image {
            base: va,
            bytes,
            zeroed: (GpuVa(base + self.data), self.size - self.data),
            addrs: (0..sections.len()).map(addr).collect(),
            banks,
            kernel_banks,
            variables: self
                .module
                .variables()
                .iter()
                .map(|v| {
                    let at = addr(v.section).wrapping_add(v.offset);
                    (v.name.clone(), GpuVa(at))
                })
                .collect(),
        })
    }
}

impl Image {
    /// The GPU address it was placed at.
    pub fn base(&self) -> GpuVa {
        self.base
    }

    /// The bytes to upload at [`Image::base`].
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The GPU address and length of the zero-initialised data (`.nv.global`) after the
    /// uploaded bytes, up to the image's end, which the caller clears on the GPU; length
    /// 0 when there is none.
    pub fn zeroed(&self) -> (GpuVa, u64) {
        self.zeroed
    }

    /// The program address of `kernel` (a kernel of the placed module): its code
    /// section's address plus its entry offset.
    pub fn entry(&self, kernel: &Kernel) -> Option<GpuVa> {
        self.addrs
            .get(kernel.text)
            .and_then(|a| a.checked_add(kernel.entry_offset()))
            .map(GpuVa)
    }

    /// The module's constant banks (3, 4, …) at their addresses.
    pub fn banks(&self) -> &[Bank] {
        &self.banks
    }

    /// The banks of `kernel`'s own (`.nv.constant<N>.<kernel>`, N > 0), bound in its
    /// launches besides the module's.
    pub fn kernel_banks<'a>(&'a self, kernel: &'a str) -> impl Iterator<Item = Bank> + 'a {
        self.kernel_banks
            .iter()
            .filter(move |(k, _)| k == kernel)
            .map(|(_, b)| *b)
    }

    /// The address of the `__constant__` or `__device__` variable `name`.
    pub fn variable(&self, name: &str) -> Option<GpuVa> {
        self.variables
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
    }
}
