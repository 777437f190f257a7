//! Read-only discovery of PCI functions: addresses, sysfs, and config-space decoding
//! into the one model of a decoded function (`rig-model`).
//!
//! Flow: `SysfsRoot` (files) → `header`/`caps`/`express` (pure decoders over bytes,
//! which build the model's header, capabilities and links themselves) →
//! `device::inspect` (one function, assembled as a [`rig_model::Device`] with sysfs and
//! the link budget; `share` adds which other GPUs' paths cross its hops) → `take` reads it, `service` puts it on the wire with `rig-proto`'s
//! conversion.
//!
//! State: none. Every call reads sysfs afresh; `ids::PciIds` is loaded once by `Rig`.
//! Nothing in this module writes to sysfs or hardware.
//!
//! References: PCI Local Bus 3.0 and PCI Express Base 6.0 for registers (names from
//! Linux's include/uapi/linux/pci_regs.h); Documentation/ABI/testing/sysfs-bus-pci for
//! sysfs; lspci (pciutils) is the decoder we check ourselves against.
//! Not here: the model's types (`rig-model`, shared with `rig-client`), the wire
//! (`rig-proto`, reached only from `service`), taking devices (`take`), VFIO (`vfio`).

mod bdf;
mod caps;
pub mod device;
mod express;
pub mod gpu;
mod header;
pub mod ids;
pub mod regs;
pub mod share;
pub mod sysfs;

use std::{io, path::PathBuf};

use crate::error::{Class, Classify, Reason};

pub use bdf::{Bdf, BdfError};
pub use device::{Device, inspect};
pub use sysfs::SysfsRoot;

/// What went wrong reading a PCI function.
#[derive(Debug, thiserror::Error)]
pub enum PciError {
    #[error("No PCI function {bdf} (not in sysfs)")]
    NoDevice { bdf: Bdf },
    #[error("Failed to list PCI functions in {path}")]
    Enumerate {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Config space of {bdf} is truncated: {len} bytes, the header alone needs 64")]
    ShortConfig { bdf: Bdf, len: usize },
    #[error("Malformed {path}: line {line} is not three hex numbers")]
    Resource { path: PathBuf, line: usize },
}

impl Classify for PciError {
    fn class(&self) -> Class {
        match self {
            Self::NoDevice { bdf } => Class::new(Reason::NoDevice).on(bdf),
            Self::ShortConfig { bdf, .. } => Class::new(Reason::ShortConfig).on(bdf),
            Self::Resource { .. } => Reason::BadResourceFile.into(),
            Self::Read { source, .. } | Self::Enumerate { source, .. }
                if source.kind() == io::ErrorKind::PermissionDenied =>
            {
                Reason::SysfsPermissionDenied.into()
            }
            Self::Read { .. } | Self::Enumerate { .. } => Reason::SysfsUnreadable.into(),
        }
    }
}

impl Classify for BdfError {
    fn class(&self) -> Class {
        Reason::BadAddress.into()
    }
}
