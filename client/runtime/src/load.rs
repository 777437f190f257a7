//! Loading a cubin into a session's memory: parse and lay out (rig-cubin), allocate,
//! place at the memory's GPU address (relocations applied), upload through the copy
//! channel, clear the zero-initialised globals on the copy engine, and wait for both.
//!
//! Flow: bytes → [`prepare`] (pure: every refusal of the cubin comes here, before any
//! memory is asked for) → [`load`] (allocation through an [`Alloc`], a staging lease,
//! `CopyChannel::copy` and `fill`, their waits) → [`Module`], whose [`Kernel`]s the
//! compute channel launches. The compute channel invalidates the instruction and
//! constant caches before its first launch after any load ([`generation`]) and sizes
//! its local memory for the module's largest stack (`ComputeChannel::load`).
//!
//! State: a [`Module`] owns its memory; each [`Kernel`] holds its module, and so does
//! every launch template a compute channel keeps, so the code stays mapped while the
//! channel may still launch it. Module ids come from a process-wide counter and are
//! never reused. Reference: docs/hardware/nvidia-compute.md ("The sm_90 cubin").

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use rig_client::session::{Session, SessionId};
use rig_cubin::{Image, ImageError, ModuleError};
use rig_model::addr::GpuVa;

use crate::{
    copy::{CopyChannel, CopyError},
    memory::{self, Alloc, Memory, MemoryError, Span},
    qmd::{ConstantBuffer, QmdError, constant_buffer},
    window::local_bytes,
};

/// Loads so far in this process: a compute channel that last saw a smaller number
/// invalidates its caches before its next launch.
static LOADS: AtomicU64 = AtomicU64::new(0);
/// Module ids.
static IDS: AtomicU64 = AtomicU64::new(1);

/// How many modules this process has loaded.
pub fn generation() -> u64 {
    // Relaxed: a counter read on the launch path; the upload it stands for was waited
    // for before it was bumped, and the invalidate goes through the pushbuffer.
    LOADS.load(Ordering::Relaxed)
}

/// Why a module did not load.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The cubin is refused (truncated, corrupt, another GPU, an unsupported feature).
    #[error("The cubin cannot be loaded")]
    Cubin(#[from] ModuleError),
    /// The image does not fit where it was put.
    #[error("The cubin's image cannot be placed")]
    Image(#[from] ImageError),
    /// A constant bank the QMD cannot bind.
    #[error("A constant bank of the cubin cannot be bound")]
    Bank(#[from] QmdError),
    /// No kernel of that name.
    #[error("No kernel named {name:?} in the module")]
    NoKernel {
        /// The name asked for.
        name: String,
    },
    /// Memory for the image.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The staging lease the image goes through.
    #[error("Failed to stage the module's image in a lease of the session")]
    Staging(#[source] rig_client::session::SessionError),
    /// The upload on the copy channel.
    #[error("Failed to upload the module")]
    Upload(#[source] Box<CopyError>),
}

impl From<CopyError> for LoadError {
    fn from(e: CopyError) -> Self {
        Self::Upload(Box::new(e))
    }
}

/// A cubin parsed and laid out, not yet in memory.
#[derive(Debug)]
pub struct Prepared {
    cubin: rig_cubin::Module,
    size: u64,
    align: u64,
}

/// Parses and lays out `bytes`: every refusal of the cubin itself happens here.
///
/// # Errors
/// [`LoadError::Cubin`] (rig-cubin's reason: truncated, corrupt, not sm_90, `-rdc`,
/// clusters, printf, unknown relocations), [`LoadError::Image`].
pub fn prepare(bytes: &[u8]) -> Result<Prepared, LoadError> {
    let cubin = rig_cubin::Module::parse(bytes)?;
    let layout = cubin.layout()?;
    let (size, align) = (layout.size().max(4).next_multiple_of(4), layout.align());
    Ok(Prepared { cubin, size, align })
}

impl Prepared {
    /// Bytes of memory the image takes (a multiple of 4: the clear of its globals
    /// writes whole words).
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The alignment its memory needs.
    pub fn align(&self) -> u64 {
        self.align
    }

    /// The image at `base` (relocations applied) and the banks the QMD binds: the
    /// module's, and each kernel's own (by kernel index).
    ///
    /// # Errors
    /// [`LoadError::Image`] for a misaligned base or a relocation that does not fit,
    /// [`LoadError::Bank`] for a bank over 64 KiB.
    pub fn place(&self, base: GpuVa) -> Result<Placed, LoadError> {
        let image = self.cubin.layout()?.place(base)?;
        let banks = image
            .banks()
            .iter()
            .map(|&b| constant_buffer(b))
            .collect::<Result<_, _>>()?;
        let kernel_banks = self
            .cubin
            .kernels()
            .iter()
            .map(|k| {
                image
                    .kernel_banks(k.name())
                    .map(constant_buffer)
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()?;
        Ok(Placed {
            image,
            banks,
            kernel_banks,
        })
    }
}

/// A module placed at an address: its image and the banks its launches bind.
#[derive(Debug)]
pub struct Placed {
    /// The bytes and addresses.
    pub image: Image,
    /// The module's banks (3, 4, …).
    pub banks: Vec<ConstantBuffer>,
    /// Each kernel's own banks (by the index of `rig_cubin::Module::kernels`).
    pub kernel_banks: Vec<Vec<ConstantBuffer>>,
}

/// A module in a session's memory.
#[derive(Debug)]
pub(crate) struct Loaded {
    pub(crate) id: u64,
    /// The session whose address space holds it: its code addresses mean nothing in
    /// another's.
    pub(crate) session: SessionId,
    pub(crate) cubin: rig_cubin::Module,
    pub(crate) image: Image,
    pub(crate) banks: Vec<ConstantBuffer>,
    pub(crate) kernel_banks: Vec<Vec<ConstantBuffer>>,
    /// Its memory: kept while any kernel handle or launch template holds the module.
    memory: Box<dyn Memory>,
}

/// A loaded module. Cloning is cheap (it is shared).
#[derive(Debug, Clone)]
pub struct Module {
    inner: Arc<Loaded>,
}

/// A kernel of a loaded module, as the compute channel launches it.
#[derive(Debug, Clone)]
pub struct Kernel {
    pub(crate) module: Arc<Loaded>,
    pub(crate) index: usize,
    /// Unique in this process: the module's id and the kernel's index.
    pub(crate) id: u64,
    pub(crate) entry: GpuVa,
}

impl Kernel {
    /// What rig-cubin read of it.
    pub fn info(&self) -> &rig_cubin::Kernel {
        // PANIC: `index` was taken from this module's own kernel list.
        &self.module.cubin.kernels()[self.index]
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.info().name()
    }

    /// Its program address.
    pub fn entry(&self) -> GpuVa {
        self.entry
    }
}

impl Module {
    /// The kernel `name`.
    ///
    /// # Errors
    /// [`LoadError::NoKernel`].
    pub fn kernel(&self, name: &str) -> Result<Kernel, LoadError> {
        let kernels = self.inner.cubin.kernels();
        let index = kernels
            .iter()
            .position(|k| k.name() == name)
            .ok_or_else(|| LoadError::NoKernel { name: name.into() })?;
        let entry = self
            .inner
            .image
            .entry(&kernels[index])
            .ok_or_else(|| LoadError::NoKernel { name: name.into() })?;
        Ok(Kernel {
            module: Arc::clone(&self.inner),
            index,
            id: self.inner.id << 16 | u64::try_from(index).unwrap_or(0xffff) & 0xffff,
            entry,
        })
    }

    /// The names of its kernels.
    pub fn kernels(&self) -> impl Iterator<Item = &str> {
        self.inner
            .cubin
            .kernels()
            .iter()
            .map(rig_cubin::Kernel::name)
    }

    /// The GPU address of the `__constant__` or `__device__` variable `name`.
    pub fn variable(&self, name: &str) -> Option<GpuVa> {
        self.inner.image.variable(name)
    }

    /// Local memory per thread its hungriest kernel needs (`window::local_bytes`).
    pub fn local_bytes(&self) -> u64 {
        self.inner
            .cubin
            .kernels()
            .iter()
            .map(local_bytes)
            .max()
            .unwrap_or(0)
    }

    /// The memory its image lives in.
    pub fn memory(&self) -> &dyn Memory {
        self.inner.memory.as_ref()
    }
}

/// Loads `bytes` into memory from `alloc`, uploading through `copies` (a staging
/// lease of the session, freed after) and waiting up to `timeout` for the copy engine.
///
/// # Errors
/// [`prepare`]'s refusals (before any memory is asked for), [`LoadError::Memory`],
/// [`LoadError::Upload`] (a fault, a timeout).
pub async fn load<A: Alloc>(
    session: &Session,
    copies: &mut CopyChannel,
    alloc: &A,
    bytes: &[u8],
    timeout: Duration,
) -> Result<Module, LoadError> {
    let prepared = prepare(bytes)?;
    let mem = alloc
        .alloc(session, prepared.size(), prepared.align())
        .await?;
    let base = memory::gpu_va(&mem)?;
    let Placed {
        image,
        banks,
        kernel_banks,
    } = prepared.place(base)?;
    let (zero_at, zero_len) = image.zeroed();
    let zero_offset = zero_at.get() - base.get();
    // The copy engine's memset writes 4-byte words from a 4-aligned address; globals
    // that start elsewhere are uploaded as zeros with the rest.
    let upload_zeros = zero_len > 0 && !zero_offset.is_multiple_of(4);
    let mut data = image.bytes().to_vec();
    if upload_zeros {
        data.resize(
            usize::try_from(zero_offset + zero_len).unwrap_or(usize::MAX),
            0,
        );
    }
    let len = data.len() as u64;
    let staging = session
        .alloc(len.max(4), 4096)
        .await
        .map_err(LoadError::Staging)?;
    staging.write(0, &data).map_err(LoadError::Staging)?;
    let mut last = None;
    if len > 0 {
        let src = Span::new(&staging, 0, len)?;
        let dst = Span::new(&mem, 0, len)?;
        last = Some(copies.copy(session, src, dst)?);
    }
    if zero_len > 0 && !upload_zeros {
        // The image's size is a multiple of 4: the last word is the image's own.
        let end = (zero_offset + zero_len).next_multiple_of(4).min(mem.len());
        let dst = Span::new(&mem, zero_offset, end - zero_offset)?;
        last = Some(copies.fill(session, dst, 0)?);
    }
    if let Some(v) = last {
        copies.wait(v, timeout)?;
    }
    drop(staging);
    // Relaxed: see `generation`.
    LOADS.fetch_add(1, Ordering::Relaxed);
    Ok(Module {
        inner: Arc::new(Loaded {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            session: session.id(),
            cubin: prepared.cubin,
            image,
            banks,
            kernel_banks,
            memory: Box::new(mem),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KERNELS: &[u8] = include_bytes!("../../cubin/tests/data/kernels.sm_90.cubin");
    const SM89: &[u8] = include_bytes!("../../cubin/tests/data/kernels.sm_89.cubin");

    #[test]
    fn a_truncated_corrupt_or_foreign_cubin_is_refused_before_any_memory() {
        for bad in [
            &KERNELS[..KERNELS.len() / 2],
            &KERNELS[..10],
            &[0u8; 64][..],
            SM89,
        ] {
            assert!(matches!(prepare(bad), Err(LoadError::Cubin(_))));
        }
        let mut corrupt = KERNELS.to_vec();
        corrupt[18] = 0x3e; // e_machine: x86-64
        assert!(matches!(
            prepare(&corrupt),
            Err(LoadError::Cubin(ModuleError::Machine { found: 0x3e }))
        ));
        let e = prepare(SM89).expect_err("sm_89");
        assert!(
            matches!(e, LoadError::Cubin(ModuleError::Arch { sm: 89 })),
            "{e:?}"
        );
    }

    #[test]
    fn a_placed_module_binds_banks_3_and_4_and_sizes_whole_words() {
        let p = prepare(KERNELS).expect("the fixture");
        assert_eq!(p.size() % 4, 0);
        let Placed { image, banks, .. } = p.place(GpuVa(0x7f00_0000_0000)).expect("placed");
        assert_eq!(banks.iter().map(|b| b.index).collect::<Vec<_>>(), [3, 4]);
        assert!(image.variable("counter").is_some());
        assert!(matches!(
            p.place(GpuVa(0x7f00_0000_0010)),
            Err(LoadError::Image(ImageError::Base { .. }))
        ));
    }

    #[test]
    fn a_kernels_own_bank_is_bound_for_that_kernel_alone() {
        // tinygrad's kernels by NVRTC: r_2_2_2_3_3_3_6_7_6 jumps through a table in its
        // own bank 2 (rig-cubin's tests/data/tinygrad.cu).
        let p = prepare(include_bytes!(
            "../../cubin/tests/data/tinygrad.sm_90.nvrtc.cubin"
        ))
        .expect("the fixture");
        let Placed {
            image,
            banks,
            kernel_banks,
        } = p.place(GpuVa(0x7f00_0000_0000)).expect("placed");
        assert!(banks.is_empty(), "{banks:?}");
        let names: Vec<_> = p
            .cubin
            .kernels()
            .iter()
            .map(|k| k.name().to_owned())
            .collect();
        for (name, own) in names.iter().zip(&kernel_banks) {
            if name == "r_2_2_2_3_3_3_6_7_6" {
                assert_eq!(own.len(), 1, "{own:?}");
                assert_eq!((own[0].index, own[0].size), (2, 0x20));
                let bank = image.kernel_banks(name).next().expect("its bank");
                assert_eq!(own[0].addr, bank.addr);
            } else {
                assert!(own.is_empty(), "{name}: {own:?}");
            }
        }
    }
}
