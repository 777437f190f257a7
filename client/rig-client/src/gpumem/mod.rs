//! GPU memory on an RM-served GPU: whole 2 MiB pages rigd lends the session, mapped in
//! its own GPU address space only, and the buffers carved out of them here with no
//! round trip.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rig_client::session::SessionError> {
//! use rig_client::{gpumem::GpuMemory, session::Session};
//! let session = Session::open(rig_client::DEFAULT_SOCKET, "0000:03:00.0").await?;
//! let x = GpuMemory::alloc(&session, 1 << 30).await?;      // one lease of 512 pages
//! let small = GpuMemory::alloc(&session, 4096).await?;     // a page leased, carved
//! println!("x at {} ({} bytes)", x.va(), x.len());
//! drop(small);                                             // its page stays for the next
//! let again = GpuMemory::alloc(&session, 4096).await?;     // no round trip
//! GpuMemory::free(&session, x).await?;                     // its 512 pages go back to rigd
//! # drop(again); Ok(()) }
//! ```
//!
//! Flow: a peer of `channel`, `queue` and `lease` above `session`: it takes a `&Session`
//! and speaks `GpuMemAlloc`/`GpuMemFree` (proto/rig/v1/gpumem.proto) through
//! `Session::call`. Buffers are carved from leased pages by the session's own carving
//! code (`session::arena`, first fit, 64-byte granules); a lease is requested only
//! when no page has room, and emptied leases up to [`GpuMemory::set_keep_bytes`]
//! (32 MiB unless set) stay with the session, so small allocations and frees in a
//! running program cost no round trip. rigd takes everything back when the session
//! ends, so a buffer dropped with its session needs nothing.
//!
//! State: the session's pages ([`Session::local`], one value per session) behind a
//! plain mutex, never held across a request.
//!
//! What rigd guarantees (docs/compute.md): the memory is mapped in this session's
//! address space and no other's; it holds zeros or what this session wrote; quotas per
//! uid and per GPU bound what a session may hold. A CPU view of GPU memory
//! ([`GpuMemory::lease_cpu_view`], BAR1) is lent to root and the members of `[channels]
//! gpu_rings_group` only; everyone else moves data with the copy engine.
//!
//! Not here: copies and launches (the channels' and the runtime's), host memory
//! (`session`), the address-space layout (`Session::gpu`).

#[cfg(test)]
mod tests;

use std::{
    num::NonZeroUsize,
    os::fd::AsFd,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use rig_model::addr::GpuVa;
use rig_proto::v1 as pb;
use rig_sys::mman::{self, DeviceMapping};

use crate::session::{Reply, Request, Session, SessionError, SessionErrorKind, arena::Arena};

/// What the session keeps of emptied leases unless told otherwise.
pub const DEFAULT_KEEP_BYTES: u64 = 32 << 20;

/// A lease of GPU memory: its handle, valid in the session that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct GpuMemId(pub u64);

/// A lease of GPU memory as this session sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GpuLeaseInfo {
    pub id: GpuMemId,
    /// Its first byte in the session's GPU address space (2 MiB-aligned).
    pub va: GpuVa,
    /// Whole pages.
    pub bytes: u64,
    /// Mapped for the CPU through BAR1 too.
    pub cpu_view: bool,
}

#[derive(Debug)]
struct LocalLease {
    info: GpuLeaseInfo,
    /// `Some` for leases buffers are carved from; `None` for raw leases.
    arena: Option<Arena>,
}

#[derive(Debug)]
struct Ledger {
    leases: Vec<LocalLease>,
    keep_bytes: u64,
}

/// The session's GPU memory, kept beside it ([`Session::local`]).
#[derive(Debug)]
struct Pages(Mutex<Ledger>);

impl Default for Pages {
    fn default() -> Self {
        Self(Mutex::new(Ledger {
            leases: Vec::new(),
            keep_bytes: DEFAULT_KEEP_BYTES,
        }))
    }
}

impl Pages {
    fn lock(&self) -> MutexGuard<'_, Ledger> {
        // Plain bookkeeping: a panic under the lock leaves it usable.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives a buffer's space back; true when its lease is now empty.
    fn put_back(&self, lease: GpuMemId, offset: u64, len: u64) -> bool {
        let mut l = self.lock();
        let Some(lease) = l.leases.iter_mut().find(|x| x.info.id == lease) else {
            return false;
        };
        lease.arena.as_mut().is_some_and(|a| {
            a.free(offset, len);
            a.is_empty()
        })
    }

    /// A buffer carved from leases already held (only `only`, when given).
    fn carve(self: &Arc<Self>, len: u64, align: u64, only: Option<GpuMemId>) -> Option<GpuBuffer> {
        let mut l = self.lock();
        l.leases.iter_mut().find_map(|x| {
            if only.is_some_and(|id| id != x.info.id) {
                return None;
            }
            let offset = x.arena.as_mut()?.alloc(len, align)?;
            Some(GpuBuffer {
                pages: Arc::clone(self),
                lease: x.info.id,
                offset,
                len,
                va: GpuVa(x.info.va.get() + offset),
                returned: false,
            })
        })
    }

    /// Empty carved leases beyond what is kept: the smallest are kept first, up to
    /// `keep_bytes` in all.
    fn spare(&self) -> Vec<GpuMemId> {
        let l = self.lock();
        let mut empty: Vec<&LocalLease> = l
            .leases
            .iter()
            .filter(|x| x.arena.as_ref().is_some_and(Arena::is_empty))
            .collect();
        empty.sort_by_key(|x| x.info.bytes);
        let mut kept = 0u64;
        empty
            .into_iter()
            .filter(|x| {
                let keep = kept + x.info.bytes <= l.keep_bytes;
                kept += if keep { x.info.bytes } else { 0 };
                !keep
            })
            .map(|x| x.info.id)
            .collect()
    }

    fn take(&self, id: GpuMemId) -> Option<LocalLease> {
        let mut l = self.lock();
        let i = l.leases.iter().position(|x| x.info.id == id)?;
        Some(l.leases.swap_remove(i))
    }
}

/// A buffer in GPU memory lent to the session: `len` bytes at `va` in its GPU address
/// space. Dropping it returns its space to the session (no round trip); the memory
/// itself goes back to rigd with [`GpuMemory::free`] or [`GpuMemory::trim`], or when
/// the session ends.
#[derive(Debug)]
pub struct GpuBuffer {
    pages: Arc<Pages>,
    lease: GpuMemId,
    offset: u64,
    len: u64,
    va: GpuVa,
    returned: bool,
}

impl GpuBuffer {
    /// Its first byte in the session's GPU address space.
    pub fn va(&self) -> GpuVa {
        self.va
    }

    /// Bytes asked for.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: buffers are never empty.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The lease it lives in, and its offset there.
    pub fn lease(&self) -> (GpuMemId, u64) {
        (self.lease, self.offset)
    }

    /// Keeps the buffer's space out of the session's use after it drops (until the
    /// session ends): for memory the GPU may still write, such as the target of work
    /// that faulted or is still in flight.
    pub fn keep_out(&mut self) {
        self.returned = true;
    }

    /// Frees it now: [`GpuMemory::free`].
    ///
    /// # Errors
    /// As [`GpuMemory::release`].
    pub async fn free(self, session: &Session) -> Result<(), SessionError> {
        GpuMemory::free(session, self).await
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if !self.returned {
            self.pages.put_back(self.lease, self.offset, self.len);
        }
    }
}

/// A CPU view of a lease of GPU memory, through BAR1 (write-combined): stores may land
/// late and out of order, so a writer calls [`CpuView::fence`] before it tells the GPU;
/// loads cross PCIe one by one. Unmapped when dropped; the lease stays.
#[derive(Debug)]
pub struct CpuView {
    map: DeviceMapping,
}

impl CpuView {
    /// Bytes mapped: the whole lease.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Always false.
    pub fn is_empty(&self) -> bool {
        false
    }

    fn at(offset: u64) -> Result<usize, SessionError> {
        usize::try_from(offset).map_err(|_| SessionError::OutOfRange { offset, len: 0 })
    }

    /// One volatile store of the aligned `u32` at `offset`.
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`], also for an offset not 4-byte aligned.
    pub fn write_u32(&self, offset: u64, value: u32) -> Result<(), SessionError> {
        self.map
            .write_u32(Self::at(offset)?, value)
            .map_err(|_| SessionError::OutOfRange { offset, len: 4 })
    }

    /// One volatile load of the aligned `u32` at `offset`.
    ///
    /// # Errors
    /// As [`CpuView::write_u32`].
    pub fn read_u32(&self, offset: u64) -> Result<u32, SessionError> {
        self.map
            .read_u32(Self::at(offset)?)
            .map_err(|_| SessionError::OutOfRange { offset, len: 4 })
    }

    /// One volatile store of the aligned `u64` at `offset`.
    ///
    /// # Errors
    /// [`SessionError::OutOfRange`], also for an offset not 8-byte aligned.
    pub fn write_u64(&self, offset: u64, value: u64) -> Result<(), SessionError> {
        self.map
            .write_u64(Self::at(offset)?, value)
            .map_err(|_| SessionError::OutOfRange { offset, len: 8 })
    }

    /// One volatile load of the aligned `u64` at `offset`.
    ///
    /// # Errors
    /// As [`CpuView::write_u64`].
    pub fn read_u64(&self, offset: u64) -> Result<u64, SessionError> {
        self.map
            .read_u64(Self::at(offset)?)
            .map_err(|_| SessionError::OutOfRange { offset, len: 8 })
    }

    /// Orders the stores before it before those after it, write-combined ones included
    /// (`sfence`): call it before telling the GPU to read what was written.
    pub fn fence(&self) {
        mman::store_fence();
    }
}

/// The calls on a session's GPU memory (a namespace: the state is the session's).
#[derive(Debug, Clone, Copy)]
pub struct GpuMemory;

impl GpuMemory {
    /// The alignment [`GpuMemory::alloc`] gives (cudaMalloc's).
    pub const DEFAULT_ALIGN: u64 = 256;

    fn pages(session: &Session) -> Arc<Pages> {
        session.local::<Pages>()
    }

    /// The page size, or the refusal of a session that is not on a served GPU.
    fn page(session: &Session) -> Result<u64, SessionError> {
        session.gpu().map(|g| g.page_bytes).ok_or_else(|| {
            SessionError::refused(
                SessionErrorKind::NotServed,
                format!(
                    "{} is not a GPU rigd serves through its driver: it lends no GPU memory",
                    session.device()
                ),
            )
        })
    }

    fn check(session: &Session, len: u64, align: u64) -> Result<u64, SessionError> {
        let page = Self::page(session)?;
        if len == 0 {
            return Err(SessionError::refused(
                SessionErrorKind::ZeroSize,
                "A GPU buffer of zero bytes was asked for",
            ));
        }
        if !align.is_power_of_two() || align > page {
            return Err(SessionError::refused(
                SessionErrorKind::Misaligned,
                format!("Alignment {align} is not a power of two up to {page}"),
            ));
        }
        Ok(page)
    }

    /// `len` bytes of GPU memory at a multiple of [`GpuMemory::DEFAULT_ALIGN`].
    ///
    /// # Errors
    /// As [`GpuMemory::alloc_aligned`].
    pub async fn alloc(session: &Session, len: u64) -> Result<GpuBuffer, SessionError> {
        Self::alloc_aligned(session, len, Self::DEFAULT_ALIGN).await
    }

    /// `len` bytes of GPU memory at a multiple of `align` (a power of two up to 2 MiB):
    /// carved from pages the session holds when one has room, else from a fresh lease
    /// of whole pages.
    ///
    /// # Errors
    /// [`SessionError::Refused`]: `NotServed` off a served GPU, `ZeroSize`,
    /// `Misaligned`, and rigd's `Oversized`, `Quota`, `Exhausted`, `Rm`;
    /// [`SessionError::Side`], [`SessionError::Ended`], [`SessionError::Protocol`].
    pub async fn alloc_aligned(
        session: &Session,
        len: u64,
        align: u64,
    ) -> Result<GpuBuffer, SessionError> {
        if let Some(b) = Self::try_alloc(session, len, align)? {
            return Ok(b);
        }
        let page = Self::page(session)?;
        Self::release_spare(session).await?;
        let bytes = len.checked_next_multiple_of(page).ok_or_else(|| {
            SessionError::refused(
                SessionErrorKind::Oversized,
                format!("{len} bytes of GPU memory"),
            )
        })?;
        let info = Self::lease_inner(session, bytes, false, true).await?.0;
        Self::pages(session)
            .carve(len, align, Some(info.id))
            .ok_or(SessionError::Protocol(
                "a fresh GPU memory lease has no room for its buffer",
            ))
    }

    /// A buffer from pages the session already holds: no round trip. `None` when none
    /// has room.
    ///
    /// # Errors
    /// [`SessionError::Refused`] (`NotServed`, `ZeroSize`, `Misaligned`).
    pub fn try_alloc(
        session: &Session,
        len: u64,
        align: u64,
    ) -> Result<Option<GpuBuffer>, SessionError> {
        Self::check(session, len, align)?;
        Ok(Self::pages(session).carve(len, align, None))
    }

    /// Frees a buffer now; when its lease becomes empty and is more than the session
    /// keeps, gives the lease back to rigd.
    ///
    /// # Errors
    /// As [`GpuMemory::release`].
    pub async fn free(session: &Session, mut buf: GpuBuffer) -> Result<(), SessionError> {
        buf.returned = true;
        if buf.pages.put_back(buf.lease, buf.offset, buf.len) {
            Self::release_spare(session).await?;
        }
        Ok(())
    }

    /// How many bytes of emptied leases the session keeps for later allocations
    /// (default [`DEFAULT_KEEP_BYTES`]; the smallest leases first); the rest go back to
    /// rigd at the next `free`, fresh lease or `trim`. Kept pages count against the
    /// uid's quota like any other.
    pub fn set_keep_bytes(session: &Session, bytes: u64) {
        Self::pages(session).lock().keep_bytes = bytes;
    }

    /// Gives back every emptied lease beyond what is kept; returns how many.
    ///
    /// # Errors
    /// As [`GpuMemory::release`].
    pub async fn trim(session: &Session) -> Result<usize, SessionError> {
        Self::release_spare(session).await
    }

    async fn release_spare(session: &Session) -> Result<usize, SessionError> {
        let spare = Self::pages(session).spare();
        for id in &spare {
            Self::release(session, *id).await?;
        }
        Ok(spare.len())
    }

    /// Leases `bytes` (whole pages, which rigd checks) as one lease that buffers are
    /// not carved from. Kept until [`GpuMemory::release`] or the session's end.
    ///
    /// # Errors
    /// As [`GpuMemory::alloc_aligned`].
    pub async fn lease(session: &Session, bytes: u64) -> Result<GpuLeaseInfo, SessionError> {
        Ok(Self::lease_inner(session, bytes, false, false).await?.0)
    }

    /// As [`GpuMemory::lease`], with a CPU view through BAR1. rigd lends these only to
    /// root and the members of `[channels] gpu_rings_group`, and keeps the memory for
    /// the uid until it exits (the mapping could outlive a free: docs/compute.md, "CPU
    /// views").
    ///
    /// # Errors
    /// As [`GpuMemory::lease`], and `CpuViewRefused`; [`SessionError::Map`].
    pub async fn lease_cpu_view(
        session: &Session,
        bytes: u64,
    ) -> Result<(GpuLeaseInfo, CpuView), SessionError> {
        let (info, view) = Self::lease_inner(session, bytes, true, false).await?;
        let view = view.ok_or(SessionError::Protocol(
            "a CPU view's reply must carry its file",
        ))?;
        Ok((info, view))
    }

    async fn lease_inner(
        session: &Session,
        bytes: u64,
        cpu_view: bool,
        carve: bool,
    ) -> Result<(GpuLeaseInfo, Option<CpuView>), SessionError> {
        let page = Self::page(session)?;
        let (reply, fds) = session
            .call(Request::GpuMemAlloc(pb::GpuMemAlloc { bytes, cpu_view }))
            .await?;
        let Reply::GpuMemAllocated(m) = reply else {
            return Err(SessionError::Protocol(
                "an allocation must be answered `gpu_mem_allocated`",
            ));
        };
        let info = GpuLeaseInfo {
            id: GpuMemId(m.id),
            va: GpuVa(m.gpu_va),
            bytes: m.bytes,
            cpu_view: m.cpu_view,
        };
        let inside = session.gpu().is_some_and(|g| {
            g.gpu_memory.contains(&info.va) && info.va.get() + info.bytes <= g.gpu_memory.end.get()
        });
        if !info.va.is_aligned(page) || info.bytes != bytes || m.cpu_view != cpu_view || !inside {
            return Err(SessionError::Protocol(
                "rigd's allocation is not the pages asked for in the session's range",
            ));
        }
        let view = match (cpu_view, fds.as_slice()) {
            (false, []) => None,
            (true, [fd]) => {
                let len = usize::try_from(bytes)
                    .ok()
                    .and_then(NonZeroUsize::new)
                    .ok_or(SessionError::Protocol("a CPU view's length"))?;
                Some(CpuView {
                    map: DeviceMapping::map(fd.as_fd(), len).map_err(SessionError::Map)?,
                })
            }
            _ => {
                return Err(SessionError::Protocol(
                    "an allocation's reply carries one file with a CPU view, none without",
                ));
            }
        };
        Self::pages(session).lock().leases.push(LocalLease {
            info,
            arena: carve.then(|| Arena::new(bytes)),
        });
        Ok((info, view))
    }

    /// Gives a lease back to rigd, which unmaps it from the session's address space
    /// and frees it. Buffers still in it keep their address, which the GPU then faults
    /// on (this session's channel only). A handle that is not this session's is sent
    /// anyway and refused by rigd ([`SessionErrorKind::UnknownGpuMemory`]).
    ///
    /// # Errors
    /// [`SessionError::Refused`], [`SessionError::Side`], [`SessionError::Ended`].
    pub async fn release(session: &Session, id: GpuMemId) -> Result<(), SessionError> {
        drop(Self::pages(session).take(id));
        match session
            .call(Request::GpuMemFree(pb::GpuMemFree { id: id.0 }))
            .await?
        {
            (Reply::GpuMemFreed(_), _) => Ok(()),
            _ => Err(SessionError::Protocol(
                "a free must be answered `gpu_mem_freed`",
            )),
        }
    }

    /// The leases of GPU memory this session holds.
    pub fn leases(session: &Session) -> Vec<GpuLeaseInfo> {
        Self::pages(session)
            .lock()
            .leases
            .iter()
            .map(|x| x.info)
            .collect()
    }
}
