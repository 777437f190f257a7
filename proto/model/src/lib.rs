//! rig's shared vocabulary: the types rigd, the wire and every client spell one way.
//! The crate root is the decoded PCI function, the one model of what rig knows about
//! a PCI function; each module beside it is one area's words (`addr`: address spaces;
//! `dma`: sessions, leases, pools; `take`: holding a device; `nv`: NVIDIA channels;
//! `nvme`: queue entries; `topo`: the peer topology).
//!
//! Flow: rigd decodes and counts straight into these types → `rig-proto` carries them
//! on the wire (its `convert` module: `From` for the wire type and `TryFrom` back, exact
//! inverses, each pair written once and round-trip tested) → `rig-client` re-exports
//! them, and `rigctl --json` prints them with serde. They are the documented JSON
//! schema (docs/rigctl-json.md): fields are added, never renamed or removed.
//!
//! State: none; plain data. Absent values are `None`/empty, never sentinels. Field names
//! are snake_case; sizes are plain integers (bytes), addresses and handles newtypes
//! that serialise as plain integers; PCI ids are numbers (format them as hex yourself).
//! Display spellings that lspci prints (`Link::speed`, `Express::port_type`,
//! `Capability::name`) are decided by rigd when it decodes.
//!
//! Reference: register meanings follow PCI Express Base 6.0 and Linux
//! include/uapi/linux/pci_regs.h, which rigd's `pci` cites where it decodes them.
//! Not here: decoding and doing (rigd), wire types (`rig-proto`), printing (`rigctl`),
//! what only one side has (rigd's held device and its locks, rig-client's mappings).

#![forbid(unsafe_code)]

pub mod addr;
pub mod dma;
pub mod nv;
pub mod nvme;
pub mod take;
pub mod topo;

use serde::{Deserialize, Serialize};

/// Every function the daemon sees, GPUs first, plus lines for those it could not read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Listing {
    pub devices: Vec<Device>,
    pub problems: Vec<String>,
}

/// One PCI function, decoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Device {
    pub bdf: String,
    pub vendor_id: u16,
    pub device_id: u16,
    pub subsystem_vendor_id: u16,
    pub subsystem_device_id: u16,
    pub revision: u8,
    /// 24 bits: base class, subclass, programming interface.
    pub class_code: u32,
    pub names: Names,
    pub gpu: Option<Gpu>,
    pub config_access: ConfigAccess,
    pub header: Header,
    pub bridge: Option<Bridge>,
    pub bars: Vec<Bar>,
    pub rom: Option<Rom>,
    pub capabilities: Vec<Capability>,
    pub extended_capabilities: Vec<Capability>,
    pub chain_problems: Vec<String>,
    pub sysfs: Sysfs,
    pub link: LinkBudget,
    /// The config bytes the daemon could read (shown by `rigctl show -x`).
    #[serde(skip)]
    pub config: Vec<u8>,
}

/// Names from pci.ids.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Names {
    pub vendor: Option<String>,
    pub device: Option<String>,
    pub subsystem: Option<String>,
    /// The most specific of `prog_if`, `subclass` and `base_class`.
    pub class: Option<String>,
    pub subsystem_vendor: Option<String>,
    pub base_class: Option<String>,
    pub subclass: Option<String>,
    pub prog_if: Option<String>,
}

/// What a GPU or accelerator is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gpu {
    /// Serialised as "nvidia", "amd" or "intel".
    pub vendor: GpuVendor,
    pub chip: String,
    pub family: String,
}

/// Who makes a GPU: the vendors whose GPUs rig knows by id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuVendor {
    Nvidia,
    Amd,
    Intel,
}

impl GpuVendor {
    /// The spelling the JSON schema uses: "nvidia", "amd", "intel".
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Nvidia => "nvidia",
            Self::Amd => "amd",
            Self::Intel => "intel",
        }
    }
}

impl std::fmt::Display for GpuVendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much of config space could be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigAccess {
    pub readable: u32,
    pub size: u32,
    /// Why `readable < size`.
    pub limited: Option<String>,
}

/// The common header's registers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub header_type: u8,
    pub multifunction: bool,
    pub command: u16,
    pub status: u16,
    pub cache_line_size: u8,
    pub latency_timer: u8,
    pub interrupt_line: u8,
    pub interrupt_pin: u8,
    pub bist: u8,
}

/// A bridge's buses and windows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bridge {
    pub primary_bus: u8,
    pub secondary_bus: u8,
    pub subordinate_bus: u8,
    pub io: Window,
    pub memory: Window,
    pub prefetchable: Window,
    pub secondary_status: u16,
    pub bridge_control: u16,
}

/// A forwarding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub base: u64,
    pub limit: u64,
    pub enabled: bool,
    pub is_64bit: bool,
}

/// Memory or I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BarKind {
    Memory,
    Io,
}

/// A BAR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bar {
    pub index: u8,
    pub kind: BarKind,
    pub is_64bit: bool,
    pub prefetchable: bool,
    pub address: u64,
    /// Bytes; 0 when the kernel gave it none.
    pub size: u64,
    pub assigned: bool,
    pub decode_enabled: bool,
    pub is_virtual: bool,
    /// Sizes a Resizable BAR capability offers, ascending; empty when not resizable.
    pub resizable_sizes: Vec<u64>,
    pub resizable_current: Option<u64>,
    /// sysfs has `resource<index>_resize`.
    pub resize_file: bool,
}

/// The expansion ROM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rom {
    pub address: u64,
    pub size: u64,
    pub enabled: bool,
    pub assigned: bool,
}

/// A capability, standard or extended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capability {
    pub offset: u16,
    pub id: u16,
    /// Extended capabilities only; 0 for standard ones.
    pub version: u8,
    /// "Unknown" for ids the daemon does not know.
    pub name: String,
    pub detail: Option<CapDetail>,
}

/// Decoded registers of the capabilities the daemon knows in depth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum CapDetail {
    PowerManagement {
        version: u8,
        d1: bool,
        d2: bool,
        pme_support: u8,
        aux_current_ma: u16,
        power_state: u8,
        no_soft_reset: bool,
        pme_enabled: bool,
        pme_status: bool,
    },
    Msi {
        enabled: bool,
        vectors_capable: u32,
        vectors_enabled: u32,
        is_64bit: bool,
        per_vector_masking: bool,
        address: u64,
        data: u16,
    },
    MsiX {
        enabled: bool,
        function_masked: bool,
        table_size: u16,
        table_bar: u8,
        table_offset: u32,
        pba_bar: u8,
        pba_offset: u32,
    },
    Express(Box<Express>),
    VendorSpecific {
        length: u8,
    },
    BridgeSubsystem {
        vendor_id: u16,
        device_id: u16,
    },
    Aer {
        uncorrectable_status: u32,
        uncorrectable_mask: u32,
        uncorrectable_severity: u32,
        correctable_status: u32,
        correctable_mask: u32,
        capabilities_control: u32,
        first_error_pointer: u8,
    },
    SerialNumber {
        serial: u64,
        text: String,
    },
    PowerBudget {
        data_select: u8,
        data: u32,
        system_allocated: bool,
    },
    Vsec {
        vsec_id: u16,
        vsec_rev: u8,
        length: u16,
    },
    Acs {
        capability: u16,
        control: u16,
    },
    Ari {
        capability: u16,
        control: u16,
        next_function: u8,
    },
    SrIov(Box<SrIov>),
    ResizableBar {
        virtual_function: bool,
        entries: Vec<RebarEntry>,
    },
    Ltr {
        max_snoop_ns: u64,
        max_no_snoop_ns: u64,
    },
    Dvsec {
        vendor_id: u16,
        revision: u8,
        length: u16,
        dvsec_id: u16,
    },
}

/// The PCI Express capability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Express {
    pub version: u8,
    pub port_type: String,
    pub slot_implemented: bool,
    pub interrupt_message: u8,
    pub devcap: u32,
    pub devctl: u16,
    pub devsta: u16,
    pub lnkcap: u32,
    pub lnkctl: u16,
    pub lnksta: u16,
    pub sltcap: u32,
    pub sltctl: u16,
    pub sltsta: u16,
    /// Present for version 2 capabilities.
    pub v2: Option<ExpressV2>,
    pub max_payload_supported: u32,
    pub max_payload: u32,
    pub max_read_request: u32,
    pub flr_capable: bool,
    pub link_capable: Option<Link>,
    pub link_status: Option<Link>,
    pub supported_speeds: Vec<String>,
    pub aspm_support: u8,
    pub aspm_control: u8,
}

/// Version 2 registers of the PCI Express capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpressV2 {
    pub devcap2: u32,
    pub devctl2: u16,
    pub lnkcap2: u32,
    pub lnkctl2: u16,
    pub lnksta2: u16,
}

/// A link's speed and width.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// lspci's spelling: "2.5GT/s", "32GT/s".
    pub speed: String,
    pub speed_gts: f64,
    pub width: u8,
    /// One direction, after line encoding, 10^9 bytes per second.
    pub gbytes_per_s: f64,
}

/// SR-IOV registers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SrIov {
    pub capability: u32,
    pub control: u16,
    pub status: u16,
    pub initial_vfs: u16,
    pub total_vfs: u16,
    pub num_vfs: u16,
    pub first_vf_offset: u16,
    pub vf_stride: u16,
    pub vf_device_id: u16,
    pub supported_page_sizes: u32,
    pub system_page_size: u32,
    pub vf_bars: Vec<u32>,
}

/// One BAR of a Resizable BAR capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RebarEntry {
    pub bar: u8,
    pub supported_sizes: Vec<u64>,
    pub current_size: u64,
}

/// sysfs attributes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sysfs {
    pub driver: Option<String>,
    pub driver_override: Option<String>,
    pub iommu_group: Option<String>,
    pub iommu_group_members: Vec<String>,
    pub reset_methods: Vec<String>,
    pub numa_node: Option<i32>,
    pub local_cpulist: Option<String>,
    pub current_link_speed: Option<String>,
    pub current_link_width: Option<u32>,
    pub max_link_speed: Option<String>,
    pub max_link_width: Option<u32>,
    pub enabled: bool,
    pub power_state: Option<String>,
    pub resize_files: Vec<u8>,
    /// Bridges from the parent up to the root port.
    pub upstream: Vec<String>,
    pub boot_vga: bool,
    /// The kernel's IRQ (sysfs `irq`), which lspci shows; not the config register's.
    pub irq: Option<u32>,
    pub missing: Vec<String>,
    /// For an SR-IOV virtual function: its physical function's BDF (sysfs `physfn`).
    #[serde(default)]
    pub physfn: Option<String>,
}

/// The links up to the root port.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkBudget {
    /// The device's own link first, the root port last.
    pub hops: Vec<LinkHop>,
    pub bottleneck_hop: Option<u32>,
    pub bottleneck_gbytes_per_s: Option<f64>,
    /// Set when a hop upstream is slower than the device's own link.
    pub limited_by: Option<String>,
    /// The hops above the device that other GPUs' paths to their root port cross too
    /// (a PCIe switch's uplink, a root port): nearest first. Empty when the device is a
    /// GPU alone on its path, or is no GPU.
    #[serde(default)]
    pub shared: Vec<SharedHop>,
    /// What the device can expect when every GPU on its shared hops copies at once: the
    /// least, over its hops, of each hop's bandwidth divided among the GPUs below it.
    /// Set when some hop is shared and has a link.
    #[serde(default)]
    pub contended_gbytes_per_s: Option<f64>,
}

/// A hop of a link budget shared with other GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedHop {
    /// Index into `LinkBudget::hops`.
    pub hop: u32,
    /// The bridge or port the hop is.
    pub bdf: String,
    /// The other GPUs below it, by address.
    pub with: Vec<String>,
    /// The hop's bandwidth divided among all GPUs below it (this one included); unset
    /// when the hop reports no link.
    pub gbytes_per_s_each: Option<f64>,
}

/// One function on the path and its link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkHop {
    pub bdf: String,
    pub link: Option<Link>,
    pub capable: Option<Link>,
}

/// Whether a 24-bit class code is a GPU's or accelerator's (base class 0x03 or 0x12).
pub fn is_gpu_class(class_code: u32) -> bool {
    matches!(class_code >> 16, 0x03 | 0x12)
}

impl Device {
    /// Whether this is a GPU or accelerator (class 0x03xx or 0x12xx).
    pub fn is_gpu(&self) -> bool {
        is_gpu_class(self.class_code)
    }

    /// The PCI Express capability, if any.
    pub fn express(&self) -> Option<&Express> {
        self.capabilities.iter().find_map(|c| match &c.detail {
            Some(CapDetail::Express(e)) => Some(e.as_ref()),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_vendor_serialises_as_the_documented_lowercase_name() {
        let g = Gpu {
            vendor: GpuVendor::Amd,
            chip: "Navi 31".into(),
            family: "gfx1100 (RDNA3)".into(),
        };
        let json = serde_json::to_string(&g).expect("serialise");
        assert_eq!(
            json,
            r#"{"vendor":"amd","chip":"Navi 31","family":"gfx1100 (RDNA3)"}"#
        );
        let back: Gpu = serde_json::from_str(&json).expect("deserialise");
        assert_eq!(back, g);
        assert_eq!(GpuVendor::Nvidia.to_string(), "nvidia");
    }
}
