//! The memory the runtime works on, as a small trait: where the GPU reaches it in the
//! session's address space, where its bytes live, and whether the session's own ledger
//! holds it. Copies check both ends against the ledger before anything is submitted;
//! module images and the local memory buffer are allocated through [`Alloc`].
//!
//! Flow: a caller hands [`Span`]s of [`Memory`] to `copy` (checked here, then copied
//! on the copy engine or by the copy kernel), and an [`Alloc`] to `load` and `compute`
//! (module images, the SLM buffer). Implemented for the session's host leases
//! ([`rig_client::session::Buffer`], [`HostAlloc`]) and for the GPU memory rigd lends
//! the session ([`rig_client::gpumem::GpuBuffer`], [`GpuAlloc`]).
//!
//! Whether memory is the session's is one question, asked of rig-client's
//! [`find_region`] (the lease that holds an address) by every `held_by` here; a
//! [`Region`] found by address is itself memory, so a caller that names memory by
//! its GPU address (the Python bindings, tinygrad) copies through the same checks.
//!
//! Not here: what a kernel's parameters point at. A GPU address passed as a parameter
//! cannot be checked (the kernel computes its addresses); one outside the session's
//! memory faults that kernel's channel group only, with the RM's MMU fault as the
//! wait's typed error (docs/compute.md, "What is checked").

use std::{fmt, future::Future};

use rig_client::{
    gpumem::{GpuBuffer, GpuMemory},
    session::{Buffer, Session, SessionError},
    space::{Holder, Region, find_region},
};
use rig_model::addr::GpuVa;

/// Where memory's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Host memory the GPU reaches across PCIe (a lease of the session).
    Host,
    /// The GPU's own memory.
    Gpu,
}

/// Memory of one session's GPU address space.
pub trait Memory: fmt::Debug + Send + Sync {
    /// Where the GPU reaches its first byte: `None` for memory with no GPU address (a
    /// host buffer of a session on no served GPU), on which nothing can be submitted.
    fn va(&self) -> Option<GpuVa>;
    /// Its length in bytes.
    fn len(&self) -> u64;
    /// Where its bytes are.
    fn place(&self) -> Place;
    /// Whether `session`'s ledger holds this memory, all of it: memory of another
    /// session (whose VAs mean nothing here) or already given back is not.
    fn held_by(&self, session: &Session) -> bool;
    /// Never empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Memory for Buffer {
    fn va(&self) -> Option<GpuVa> {
        self.gpu_va()
    }

    fn len(&self) -> u64 {
        Buffer::len(self)
    }

    fn place(&self) -> Place {
        Place::Host
    }

    fn held_by(&self, session: &Session) -> bool {
        let Some(va) = self.gpu_va() else {
            return false;
        };
        // The lease's handle, its GPU address and its mapping in this process all
        // match: a handle alone is only unique within its session, and two sessions
        // give the same GPU addresses.
        find_region(session, va).is_some_and(|r| {
            r.holder == Holder::Host(self.lease().0)
                && r.contains(va, Buffer::len(self))
                && r.host_address_of(va) == Some(self.as_ptr() as usize)
        })
    }
}

impl Memory for GpuBuffer {
    fn va(&self) -> Option<GpuVa> {
        Some(GpuBuffer::va(self))
    }

    fn len(&self) -> u64 {
        GpuBuffer::len(self)
    }

    fn place(&self) -> Place {
        Place::Gpu
    }

    fn held_by(&self, session: &Session) -> bool {
        // The lease's id and its VA both match, and the buffer lies inside it: ids are
        // rigd's per GPU, and two sessions give the same VAs.
        let va = GpuBuffer::va(self);
        find_region(session, va).is_some_and(|r| {
            r.holder == Holder::Gpu(self.lease().0) && r.contains(va, GpuBuffer::len(self))
        })
    }
}

/// A lease found by address ([`find_region`]): memory named by its GPU address.
impl Memory for Region {
    fn va(&self) -> Option<GpuVa> {
        Some(self.va)
    }

    fn len(&self) -> u64 {
        self.bytes
    }

    fn place(&self) -> Place {
        match self.holder {
            Holder::Host(_) => Place::Host,
            Holder::Gpu(_) => Place::Gpu,
        }
    }

    fn held_by(&self, session: &Session) -> bool {
        // Still there, the same lease at the same place (not given back and another
        // leased at its address since).
        find_region(session, self.va).as_ref() == Some(self)
    }
}

impl<M: Memory + ?Sized> Memory for Box<M> {
    fn va(&self) -> Option<GpuVa> {
        (**self).va()
    }

    fn len(&self) -> u64 {
        (**self).len()
    }

    fn place(&self) -> Place {
        (**self).place()
    }

    fn held_by(&self, session: &Session) -> bool {
        (**self).held_by(session)
    }
}

/// Why memory could not be had or used.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The allocator refused.
    #[error("Failed to allocate {bytes} bytes ({place:?})")]
    Alloc {
        /// Bytes asked for.
        bytes: u64,
        /// Where.
        place: Place,
        /// The allocator's reason.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Memory with no GPU address (a host buffer of a session on no served GPU).
    #[error("{len} bytes of memory with no GPU address (the session is on no served GPU)")]
    NoGpuVa {
        /// Its length.
        len: u64,
    },
    /// No lease of the session holds this address.
    #[error("No memory of this session holds {va}: nothing was submitted")]
    Unmapped {
        /// The address asked for.
        va: GpuVa,
    },
    /// A range outside its memory.
    #[error("Bytes {offset}..+{len} lie outside memory of {size} bytes at {va}")]
    OutOfRange {
        /// The memory's GPU address.
        va: GpuVa,
        /// Where the range starts in it.
        offset: u64,
        /// Its length.
        len: u64,
        /// The memory's length.
        size: u64,
    },
    /// Memory the session's ledger does not hold.
    #[error("{len} bytes at {va} are not this session's memory: nothing was submitted")]
    NotOwned {
        /// Its GPU address.
        va: GpuVa,
        /// Its length.
        len: u64,
    },
}

/// A range of [`Memory`]: the unit copies take.
#[derive(Debug, Clone, Copy)]
pub struct Span<'a> {
    mem: &'a dyn Memory,
    /// `mem`'s GPU address.
    base: GpuVa,
    offset: u64,
    len: u64,
}

impl<'a> Span<'a> {
    /// All of `mem`.
    ///
    /// # Errors
    /// [`MemoryError::NoGpuVa`] for memory the GPU cannot reach.
    pub fn all(mem: &'a dyn Memory) -> Result<Self, MemoryError> {
        Self::new(mem, 0, mem.len())
    }

    /// `len` bytes of `mem` from `offset`.
    ///
    /// # Errors
    /// [`MemoryError::NoGpuVa`] for memory the GPU cannot reach,
    /// [`MemoryError::OutOfRange`] for a range past its end.
    pub fn new(mem: &'a dyn Memory, offset: u64, len: u64) -> Result<Self, MemoryError> {
        let base = gpu_va(mem)?;
        if offset.checked_add(len).is_none_or(|end| end > mem.len()) {
            return Err(MemoryError::OutOfRange {
                va: base,
                offset,
                len,
                size: mem.len(),
            });
        }
        Ok(Self {
            mem,
            base,
            offset,
            len,
        })
    }

    /// Where the GPU reaches its first byte.
    pub fn va(&self) -> GpuVa {
        // In range: `new` checked offset + len against the memory's length, and a
        // lease's addresses do not wrap.
        GpuVa(self.base.get() + self.offset)
    }

    /// Its length.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where its bytes are.
    pub fn place(&self) -> Place {
        self.mem.place()
    }

    /// Checks that `session`'s ledger holds the memory.
    ///
    /// # Errors
    /// [`MemoryError::NotOwned`].
    pub fn check(&self, session: &Session) -> Result<(), MemoryError> {
        if !self.mem.held_by(session) {
            return Err(MemoryError::NotOwned {
                va: self.va(),
                len: self.len,
            });
        }
        Ok(())
    }
}

/// `mem`'s GPU address, or why it has none.
///
/// # Errors
/// [`MemoryError::NoGpuVa`].
pub fn gpu_va(mem: &dyn Memory) -> Result<GpuVa, MemoryError> {
    mem.va().ok_or(MemoryError::NoGpuVa { len: mem.len() })
}

/// The lease of `session` that holds `len` bytes from `va`, as memory: what a caller
/// that names memory by its GPU address copies from or to.
///
/// # Errors
/// [`MemoryError::Unmapped`] when no lease holds `va`, [`MemoryError::OutOfRange`]
/// when the range runs past the lease that does.
pub fn region_at(session: &Session, va: GpuVa, len: u64) -> Result<Region, MemoryError> {
    let r = find_region(session, va).ok_or(MemoryError::Unmapped { va })?;
    if !r.contains(va, len) {
        return Err(MemoryError::OutOfRange {
            va: r.va,
            offset: va.get() - r.va.get(),
            len,
            size: r.bytes,
        });
    }
    Ok(r)
}

/// Where the runtime gets memory: module images and the local memory buffer.
pub trait Alloc {
    /// What it hands out.
    type Memory: Memory + 'static;

    /// Where its memory is.
    fn place(&self) -> Place;

    /// `bytes` of memory in `session`'s address space at a multiple of `align` (a
    /// power of two up to 2 MiB).
    fn alloc(
        &self,
        session: &Session,
        bytes: u64,
        align: u64,
    ) -> impl Future<Output = Result<Self::Memory, MemoryError>>;
}

/// The session's host leases ([`Session::alloc`]): memory the GPU reads across PCIe.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostAlloc;

impl Alloc for HostAlloc {
    type Memory = Buffer;

    fn place(&self) -> Place {
        Place::Host
    }

    async fn alloc(
        &self,
        session: &Session,
        bytes: u64,
        align: u64,
    ) -> Result<Buffer, MemoryError> {
        session
            .alloc(bytes, align)
            .await
            .map_err(|e: SessionError| MemoryError::Alloc {
                bytes,
                place: Place::Host,
                source: Box::new(e),
            })
    }
}

/// The GPU memory rigd lends the session ([`GpuMemory::alloc_aligned`]): where module
/// images and local memory run fastest.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuAlloc;

impl Alloc for GpuAlloc {
    type Memory = GpuBuffer;

    fn place(&self) -> Place {
        Place::Gpu
    }

    async fn alloc(
        &self,
        session: &Session,
        bytes: u64,
        align: u64,
    ) -> Result<GpuBuffer, MemoryError> {
        GpuMemory::alloc_aligned(session, bytes, align)
            .await
            .map_err(|e: SessionError| MemoryError::Alloc {
                bytes,
                place: Place::Gpu,
                source: Box::new(e),
            })
    }
}
