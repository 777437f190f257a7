//! A whole-device lease on a session: [`DeviceLease::open`] asks rigd for the
//! session's device entire and returns its descriptors — the VFIO device fd (vfio
//! mode), or one `resourceN` file per memory BAR (sysfs mode) — with the regions in
//! them. The device's DMA memory is the session's own ([`Session::alloc`]): its device
//! addresses are what the device is programmed with.
//!
//! The lease lives as long as the session's side connection, or until
//! [`DeviceLease::give_back`]. When it ends, rigd turns bus mastering off, tears the
//! interrupts down, resets the device and holds it again; BAR mappings made here borrow
//! the lease, so none outlives it in this process. rigd cannot revoke a VFIO fd: a
//! copy kept past the lease (a dup, a fork) keeps the device, which is why this type
//! offers no way to take the descriptors out.
//!
//! Wire: proto/proto/rig/v1/lease.proto; docs/lease.md. Not here: the request's
//! transport and the memory (`crate::session`), the mappings (`rig_sys::mman`).

use std::{
    fs::File,
    num::NonZeroUsize,
    os::{
        fd::{AsFd, BorrowedFd, OwnedFd},
        unix::fs::FileExt,
    },
};

use rig_proto::{convert::WireEnum, v1 as pb};
use rig_sys::mman::DeviceMapping;

use crate::session::{Reply, Request, Session, SessionError};

/// What a whole-device lease's calls can fail with.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The session's request failed: the side socket, or rigd's generic refusal.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A typed refusal of the lease request; `message` is one line for a person.
    #[error("{message}")]
    Refused {
        kind: LeaseErrorKind,
        message: String,
    },
}

/// Why rigd refused a whole-device lease request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseErrorKind {
    /// No `[lease]` rule names this caller with the device.
    NotAllowed,
    /// rig does not hold the device.
    NotHeld,
    /// Leased to someone else; the message names the holder.
    Leased,
    /// It lends queues, or other sessions hold memory on its pool.
    InUse,
    /// A give-back of a device this session does not lease.
    NotLeased,
    /// Not an address, or not the session's device.
    BadRequest,
    /// A step on the device failed.
    Device,
}

impl LeaseErrorKind {
    fn from_wire(code: i32) -> Self {
        use pb::DeviceLeaseErrorCode as C;
        match C::try_from(code) {
            Ok(C::NotAllowed) => Self::NotAllowed,
            Ok(C::NotHeld) => Self::NotHeld,
            Ok(C::Leased) => Self::Leased,
            Ok(C::InUse) => Self::InUse,
            Ok(C::NotLeased) => Self::NotLeased,
            Ok(C::BadRequest) => Self::BadRequest,
            _ => Self::Device,
        }
    }
}

/// How the device was lent: the mode rig holds it in (the shared vocabulary's). Vfio:
/// one descriptor, the VFIO device fd, every region at its offset, VFIO ioctls
/// (interrupts, reset) on it. Sysfs: one `resourceN` file per memory BAR, each region
/// at offset 0; no config access (rigd turned bus mastering on for the lease).
pub use rig_model::take::Mode as LeaseMode;

/// One region of the device, in one of the lease's descriptors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// VFIO's region index: BAR0–5 are 0–5, the ROM 6, config space 7.
    pub index: u32,
    pub size: u64,
    /// Where the region starts in its descriptor.
    pub offset: u64,
    /// `VFIO_REGION_INFO_FLAG_*`: READ 1, WRITE 2, MMAP 4.
    pub flags: u32,
    fd: usize,
}

impl Region {
    /// VFIO's config-space region index.
    pub const CONFIG: u32 = 7;

    /// Whether the region may be mapped.
    pub fn mappable(&self) -> bool {
        self.flags & 4 != 0
    }
}

/// The device of a session, lent whole.
#[derive(Debug)]
pub struct DeviceLease {
    device: String,
    mode: LeaseMode,
    regions: Vec<Region>,
    files: Vec<File>,
}

/// A BAR mapped through the lease (volatile word accesses only: it is MMIO).
#[derive(Debug)]
pub struct Bar<'a> {
    map: DeviceMapping,
    _lease: std::marker::PhantomData<&'a DeviceLease>,
}

impl Bar<'_> {
    /// Reads the u32 register at `offset`.
    ///
    /// # Errors
    /// `InvalidInput` outside the BAR or misaligned.
    pub fn read_u32(&self, offset: usize) -> std::io::Result<u32> {
        self.map.read_u32(offset)
    }

    /// Writes the u32 register at `offset`.
    ///
    /// # Errors
    /// As [`Bar::read_u32`].
    pub fn write_u32(&self, offset: usize, value: u32) -> std::io::Result<()> {
        self.map.write_u32(offset, value)
    }

    /// Reads the u64 register at `offset`.
    ///
    /// # Errors
    /// As [`Bar::read_u32`].
    pub fn read_u64(&self, offset: usize) -> std::io::Result<u64> {
        self.map.read_u64(offset)
    }

    /// Writes the u64 register at `offset`.
    ///
    /// # Errors
    /// As [`Bar::read_u32`].
    pub fn write_u64(&self, offset: usize, value: u64) -> std::io::Result<()> {
        self.map.write_u64(offset, value)
    }

    /// The BAR's length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Always false: a BAR is never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// What a give-back did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenBack {
    /// The reset's method ("vfio", "flr", "bus", …); `None` when none ran.
    pub reset: Option<String>,
    /// Steps that failed without stopping the reclaim, one line each.
    pub warnings: Vec<String>,
}

impl DeviceLease {
    /// The device's PCI address.
    pub fn device(&self) -> &str {
        &self.device
    }

    pub fn mode(&self) -> LeaseMode {
        self.mode
    }

    /// Every region rigd lent, BARs first by index.
    pub fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Region `index`, when it was lent.
    pub fn region(&self, index: u32) -> Option<&Region> {
        self.regions.iter().find(|r| r.index == index)
    }

    /// The descriptor a region is in, for the holder's own calls on it (VFIO ioctls on
    /// the device fd: interrupts, reset).
    pub fn fd(&self, region: &Region) -> Option<BorrowedFd<'_>> {
        self.files.get(region.fd).map(AsFd::as_fd)
    }

    /// Maps BAR `index` whole.
    ///
    /// # Errors
    /// `NotFound` for a BAR not lent, `Unsupported` for one that cannot be mapped,
    /// mmap(2)'s errno.
    pub fn map_bar(&self, index: u32) -> std::io::Result<Bar<'_>> {
        let r = self
            .region(index)
            .filter(|r| r.index < 6)
            .ok_or(std::io::ErrorKind::NotFound)?;
        if !r.mappable() {
            return Err(std::io::ErrorKind::Unsupported.into());
        }
        let len = usize::try_from(r.size)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or(std::io::ErrorKind::InvalidData)?;
        let fd = self.fd(r).ok_or(std::io::ErrorKind::NotFound)?;
        Ok(Bar {
            map: DeviceMapping::map_at(fd, r.offset, len)?,
            _lease: std::marker::PhantomData,
        })
    }

    fn config(&self) -> std::io::Result<(&File, &Region)> {
        let r = self
            .region(Region::CONFIG)
            .ok_or(std::io::ErrorKind::Unsupported)?;
        let f = self.files.get(r.fd).ok_or(std::io::ErrorKind::NotFound)?;
        Ok((f, r))
    }

    /// Reads config space at `offset` (vfio mode: through the device fd).
    ///
    /// # Errors
    /// `Unsupported` in sysfs mode; `InvalidInput` past the region; pread(2)'s errno.
    pub fn read_config(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let (f, r) = self.config()?;
        if offset.saturating_add(buf.len() as u64) > r.size {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        f.read_exact_at(buf, r.offset + offset)
    }

    /// Writes config space at `offset` (vfio mode; vfio-pci filters what it must).
    ///
    /// # Errors
    /// As [`DeviceLease::read_config`].
    pub fn write_config(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let (f, r) = self.config()?;
        if offset.saturating_add(data.len() as u64) > r.size {
            return Err(std::io::ErrorKind::InvalidInput.into());
        }
        f.write_all_at(data, r.offset + offset)
    }

    /// Sets or clears the command register's memory-space and bus-master bits
    /// (PCI_COMMAND_MEMORY | PCI_COMMAND_MASTER, pci_regs.h), vfio mode.
    ///
    /// # Errors
    /// As [`DeviceLease::write_config`].
    pub fn set_bus_master(&self, on: bool) -> std::io::Result<()> {
        let mut cmd = [0u8; 2];
        self.read_config(4, &mut cmd)?;
        let mut v = u16::from_le_bytes(cmd);
        if on {
            v |= 0x6;
        } else {
            v &= !0x4;
        }
        self.write_config(4, &v.to_le_bytes())
    }
}

fn refused(r: pb::DeviceLeaseRefused) -> LeaseError {
    LeaseError::Refused {
        kind: LeaseErrorKind::from_wire(r.code),
        message: r.message,
    }
}

impl DeviceLease {
    /// Leases `session`'s device `bdf` whole.
    ///
    /// # Errors
    /// [`LeaseError::Refused`] with its kind (not allowed, not held, leased to
    /// someone else, in use…); side-socket errors.
    pub async fn open(session: &Session, bdf: &str) -> Result<Self, LeaseError> {
        let (reply, fds) = session
            .call(Request::LeaseDevice(pb::DeviceLease {
                device: bdf.to_owned(),
            }))
            .await?;
        let d = match reply {
            Reply::DeviceLeased(d) => d,
            Reply::DeviceLeaseRefused(r) => return Err(refused(r)),
            _ => {
                return Err(protocol("a device lease must be answered `device_leased`"));
            }
        };
        let Some(mode) = LeaseMode::from_wire(d.mode) else {
            return Err(protocol("a device lease's mode"));
        };
        if fds.len() != d.fds as usize || fds.is_empty() {
            return Err(protocol("a device lease carries the descriptors it counts"));
        }
        let regions = d
            .regions
            .iter()
            .map(|r| {
                let fd = r.fd as usize;
                (fd < fds.len())
                    .then_some(Region {
                        index: r.index,
                        size: r.size,
                        offset: r.offset,
                        flags: r.flags,
                        fd,
                    })
                    .ok_or(SessionError::Protocol("a region in a descriptor not sent"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            device: d.device,
            mode,
            regions,
            files: fds.into_iter().map(|f: OwnedFd| File::from(f)).collect(),
        })
    }

    /// Gives the device back now: closes this process's descriptors (every [`Bar`]
    /// is gone already: they borrow the lease), then rigd takes it back; `session` is
    /// the one it was leased in.
    ///
    /// # Errors
    /// [`LeaseError::Refused`] (`NotLeased`, `Device`); side-socket errors.
    pub async fn give_back(self, session: &Session) -> Result<GivenBack, LeaseError> {
        let device = self.device.clone();
        drop(self);
        let (reply, _) = session
            .call(Request::GiveBackDevice(pb::DeviceGiveBack { device }))
            .await?;
        match reply {
            Reply::DeviceGivenBack(g) => Ok(GivenBack {
                reset: (!g.reset.is_empty()).then_some(g.reset),
                warnings: g.warnings,
            }),
            Reply::DeviceLeaseRefused(r) => Err(refused(r)),
            _ => Err(protocol(
                "a device give-back must be answered `device_given_back`",
            )),
        }
    }
}

fn protocol(what: &'static str) -> LeaseError {
    SessionError::Protocol(what).into()
}
