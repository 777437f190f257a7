//! Address spaces as types, so an address of one kind cannot be passed where another
//! is meant: a cubin relocation or a QMD field takes a [`GpuVa`], a VFIO map an
//! [`Iova`], a device without an IOMMU a [`PhysAddr`], rigd's own mappings a
//! [`HostVa`] (the pattern of rust-vmm's `GuestAddress`).
//!
//! Each is a plain `u64` inside (`.0`, or [`GpuVa::get`]); arithmetic that can overflow
//! is checked ([`GpuVa::checked_add`]). On the wire (rig-proto) and in JSON they are
//! plain integers. [`DeviceAddr`] is one of the first three, as a lease's device
//! address is: which kind depends on the session's pool ([`Addressing`]).
//! Not here: which ranges are valid (rigd's `dma` and `nvrm` own the
//! layouts; [`layout`] holds the client GPU address-space constants both sides share).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::dma::Addressing;

macro_rules! address {
    ($(#[$doc:meta] $t:ident),* $(,)?) => {$(
        #[$doc]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $t(pub u64);

        impl $t {
            /// The number a device or the CPU is programmed with.
            pub const fn get(self) -> u64 {
                self.0
            }

            /// `self + bytes`, or `None` past the end of the address space.
            pub const fn checked_add(self, bytes: u64) -> Option<Self> {
                match self.0.checked_add(bytes) {
                    Some(a) => Some(Self(a)),
                    None => None,
                }
            }

            /// Whether `self` is a multiple of `align` (a power of two).
            pub const fn is_aligned(self, align: u64) -> bool {
                align.is_power_of_two() && self.0 & (align - 1) == 0
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    )*};
}

address!(
    /// A virtual address in one client's GPU address space (an RM-served GPU).
    GpuVa,
    /// An I/O virtual address: what a device behind an IOMMU uses.
    Iova,
    /// A virtual address in a process's own address space.
    HostVa,
    /// A physical (bus) address: what a device without an IOMMU uses.
    PhysAddr,
);

/// The address a device uses for memory, of whichever kind its session's pool gives
/// ([`Addressing`]): an IOVA behind an IOMMU (vfio mode), a physical address without
/// one (sysfs mode), a GPU VA on an RM-served GPU. A lease's first byte, a buffer's.
///
/// On the wire it is the plain number (`DmaLeased.device_address`), its kind the
/// session's `addressing`; `rig-proto` joins the two ([`DeviceAddr::new`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceAddr {
    Iova(Iova),
    Phys(PhysAddr),
    /// A GPU virtual address in the leasing client's own address space.
    GpuVa(GpuVa),
}

impl DeviceAddr {
    /// `raw` as an address of the kind `addressing` names; `None` in host mode (no
    /// device, no address).
    pub const fn new(addressing: Addressing, raw: u64) -> Option<Self> {
        match addressing {
            Addressing::None => None,
            Addressing::Physical => Some(Self::Phys(PhysAddr(raw))),
            Addressing::Iova => Some(Self::Iova(Iova(raw))),
            Addressing::GpuVa => Some(Self::GpuVa(GpuVa(raw))),
        }
    }

    /// The number a device is programmed with.
    pub const fn get(self) -> u64 {
        match self {
            Self::Iova(a) => a.0,
            Self::Phys(a) => a.0,
            Self::GpuVa(a) => a.0,
        }
    }

    /// Which kind it is.
    pub const fn addressing(self) -> Addressing {
        match self {
            Self::Iova(_) => Addressing::Iova,
            Self::Phys(_) => Addressing::Physical,
            Self::GpuVa(_) => Addressing::GpuVa,
        }
    }

    /// `self + bytes`, of the same kind, or `None` past the end of its space.
    pub const fn checked_add(self, bytes: u64) -> Option<Self> {
        match self.get().checked_add(bytes) {
            Some(a) => Self::new(self.addressing(), a),
            None => None,
        }
    }

    /// The GPU VA, if it is one.
    pub const fn gpu_va(self) -> Option<GpuVa> {
        match self {
            Self::GpuVa(a) => Some(a),
            Self::Iova(_) | Self::Phys(_) => None,
        }
    }

    /// The IOVA, if it is one.
    pub const fn iova(self) -> Option<Iova> {
        match self {
            Self::Iova(a) => Some(a),
            Self::Phys(_) | Self::GpuVa(_) => None,
        }
    }

    /// The physical address, if it is one.
    pub const fn phys(self) -> Option<PhysAddr> {
        match self {
            Self::Phys(a) => Some(a),
            Self::Iova(_) | Self::GpuVa(_) => None,
        }
    }
}

impl fmt::Display for DeviceAddr {
    /// "IOVA 0x1000", "physical 0x1000", "GPU VA 0x1000".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Iova(a) => write!(f, "IOVA {a}"),
            Self::Phys(a) => write!(f, "physical {a}"),
            Self::GpuVa(a) => write!(f, "GPU VA {a}"),
        }
    }
}

/// The layout of a client's GPU address space on an RM-served GPU, which rigd builds
/// and the client's runtime relies on (docs/compute.md, "The GPU address space"): from
/// low to high, the compute windows (never mapped), rigd's own range, host-memory
/// leases, GPU memory, all below 2^40.
pub mod layout {
    use super::GpuVa;

    /// The compute shared-memory window: 4 GiB, 4 GiB-aligned, in VA rigd never maps
    /// (below [`OWN_BASE`]). Generic loads and stores inside it reach a CTA's shared
    /// memory, so no buffer may lie there (docs/hardware/nvidia-compute.md).
    pub const SHARED_WINDOW: GpuVa = GpuVa(0x8_0000_0000);
    /// Its width.
    pub const SHARED_WINDOW_BYTES: u64 = 1 << 32;
    /// The compute local-memory window: 16 MiB just below the shared one.
    pub const LOCAL_WINDOW: GpuVa = GpuVa(0x7_ff00_0000);
    /// Its width.
    pub const LOCAL_WINDOW_BYTES: u64 = 16 << 20;
    /// Where rigd's own allocations for a client (rings, USERD, notifiers, channel
    /// windows) start; they end at [`LEASE_BASE`] (192 GiB of VA).
    pub const OWN_BASE: GpuVa = GpuVa(1 << 36);
    /// Where host-memory leases start; they end at [`GPU_MEMORY_BASE`] (256 GiB of VA,
    /// against a DMA pool of a few GiB).
    pub const LEASE_BASE: GpuVa = GpuVa(1 << 38);
    /// Where GPU memory lent to the session starts; it ends at [`VA_END`] (512 GiB of
    /// VA, against the H200's 141 GB).
    pub const GPU_MEMORY_BASE: GpuVa = GpuVa(1 << 39);
    /// The end of the space: GPFIFO entries and QMD pointers name 40-bit addresses.
    pub const VA_END: GpuVa = GpuVa(1 << 40);
    /// GPU memory is lent in pages of 2 MiB, at 2 MiB-aligned VAs: the GPU maps them
    /// with its 2 MiB page size (docs/hardware/nvidia-compute.md, "GPU memory through
    /// the RM").
    pub const GPU_PAGE: u64 = 2 << 20;

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn the_windows_lie_below_everything_rigd_maps_and_do_not_overlap() {
            let shared_end = SHARED_WINDOW.get() + SHARED_WINDOW_BYTES;
            let local_end = LOCAL_WINDOW.get() + LOCAL_WINDOW_BYTES;
            assert!(shared_end <= OWN_BASE.get());
            assert!(local_end <= SHARED_WINDOW.get());
            assert!(SHARED_WINDOW.is_aligned(1 << 32));
            assert!(LOCAL_WINDOW.is_aligned(16 << 20));
            assert!(OWN_BASE < LEASE_BASE && LEASE_BASE < GPU_MEMORY_BASE);
            assert!(GPU_MEMORY_BASE < VA_END);
            assert!(GPU_MEMORY_BASE.is_aligned(GPU_PAGE) && VA_END.is_aligned(GPU_PAGE));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_add_checked_and_print_in_hex() {
        assert_eq!(GpuVa(0x1000).checked_add(0x10), Some(GpuVa(0x1010)));
        assert_eq!(GpuVa(u64::MAX).checked_add(1), None);
        assert_eq!(Iova(0xff).to_string(), "0xff");
        assert!(GpuVa(0x200).is_aligned(0x100));
        assert!(!GpuVa(0x280).is_aligned(0x100));
        assert!(!GpuVa(0x280).is_aligned(3));
    }

    #[test]
    fn a_device_address_keeps_its_kind_through_arithmetic() {
        let a = DeviceAddr::new(Addressing::Iova, 0x1000).expect("an IOVA");
        assert_eq!(a, DeviceAddr::Iova(Iova(0x1000)));
        assert_eq!(a.checked_add(0x10), Some(DeviceAddr::Iova(Iova(0x1010))));
        assert_eq!(a.gpu_va(), None);
        assert_eq!(a.iova(), Some(Iova(0x1000)));
        assert_eq!(DeviceAddr::new(Addressing::None, 0x1000), None);
        let va = DeviceAddr::new(Addressing::GpuVa, u64::MAX).expect("a GPU VA");
        assert_eq!(va.checked_add(1), None);
        assert_eq!(va.gpu_va(), Some(GpuVa(u64::MAX)));
        for k in [Addressing::Physical, Addressing::Iova, Addressing::GpuVa] {
            let d = DeviceAddr::new(k, 7).expect("an address");
            assert_eq!((d.addressing(), d.get()), (k, 7));
        }
        assert_eq!(
            DeviceAddr::Phys(PhysAddr(0x20)).to_string(),
            "physical 0x20"
        );
    }
}
