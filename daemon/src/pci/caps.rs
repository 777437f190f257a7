//! Capability lists: the standard list from 0x34 and the extended list from 0x100,
//! decoded straight into the model's [`Capability`] and [`CapDetail`].
//!
//! Flow: `device` hands the config bytes here → the walks name each capability as the
//! specs (and lspci) do and decode the registers of those rig knows in depth → `device`
//! puts the lists in the [`rig_model::Device`]. Pure: no I/O.
//!
//! Walks are bounded: a pointer into the header, past the readable bytes, or back to an
//! offset already seen is reported in `CapList::problems` and not followed. An id the
//! decoder does not know is kept with its offset (and version), never dropped; one whose
//! registers run past the readable bytes keeps its name with " (truncated)".
//! Register layouts: PCI Local Bus 3.0 §6.7, PCI Express Base 6.0 chapter 7.
//! Not here: the PCI Express capability's registers (`express`), the model's types
//! (`rig-model`).

use rig_model::{CapDetail, Capability, RebarEntry, SrIov};

use super::{express, regs::*};

/// What the decoder made of one capability's registers, before it is named.
#[derive(Debug, Clone, PartialEq)]
enum Decoded {
    /// Known or unknown, nothing decoded beyond the header.
    Header,
    /// The registers run past the bytes that could be read.
    Truncated,
    Detail(CapDetail),
}

impl From<Option<CapDetail>> for Decoded {
    /// A decoder's `None` means a register it needs could not be read.
    fn from(d: Option<CapDetail>) -> Self {
        d.map_or(Self::Truncated, Self::Detail)
    }
}

/// The model's capability: a truncated one keeps its name with " (truncated)" and
/// carries no detail.
fn capability(offset: usize, id: u16, version: u8, name: &str, decoded: Decoded) -> Capability {
    let (name, detail) = match decoded {
        Decoded::Header => (name.to_owned(), None),
        Decoded::Truncated => (format!("{name} (truncated)"), None),
        Decoded::Detail(d) => (name.to_owned(), Some(d)),
    };
    Capability {
        offset: offset16(offset),
        id,
        version,
        name,
        detail,
    }
}

/// A walked list and what was wrong with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapList {
    pub caps: Vec<Capability>,
    pub problems: Vec<String>,
}

/// At most this many entries fit in either list; a longer walk is a loop we missed.
pub const MAX_CAPS: usize = (PCI_CFG_SPACE_EXP_SIZE - PCI_CFG_SPACE_SIZE) / 4;

/// Walks the standard capability list starting at `first` (the header's pointer).
pub fn parse_standard(cfg: &[u8], first: u8) -> CapList {
    let mut list = CapList::default();
    let mut seen = [false; PCI_CFG_SPACE_SIZE];
    let mut ptr = usize::from(first & !3);
    while ptr != 0 {
        if ptr < PCI_STD_HEADER_SIZEOF {
            list.problems.push(format!(
                "capability pointer {ptr:#04x} points into the header; chain broken"
            ));
            break;
        }
        if seen[ptr] {
            list.problems
                .push(format!("capability chain loops back to {ptr:#04x}"));
            break;
        }
        seen[ptr] = true;
        let (Some(id), Some(next)) = (r8(cfg, ptr), r8(cfg, ptr + 1)) else {
            list.problems.push(not_readable(ptr, cfg.len()));
            break;
        };
        if id == 0xff {
            list.problems
                .push(format!("capability at {ptr:#04x} reads 0xff; chain broken"));
            break;
        }
        let id16 = u16::from(id);
        list.caps.push(capability(
            ptr,
            id16,
            0,
            cap_name(id16),
            decode_standard(cfg, ptr, id),
        ));
        ptr = usize::from(next & !3);
    }
    list
}

/// Walks the extended capability list at 0x100. Empty when only 256 bytes exist.
pub fn parse_extended(cfg: &[u8]) -> CapList {
    let mut list = CapList::default();
    let mut seen = vec![false; PCI_CFG_SPACE_EXP_SIZE / 4];
    let mut ptr = PCI_CFG_SPACE_SIZE;
    loop {
        if list.caps.len() >= MAX_CAPS {
            list.problems
                .push("extended capability chain too long; stopped".to_owned());
            break;
        }
        let Some(header) = r32(cfg, ptr) else {
            if ptr != PCI_CFG_SPACE_SIZE {
                list.problems.push(not_readable(ptr, cfg.len()));
            }
            break;
        };
        // An all-zero or all-ones header ends the list (lspci's rule: no extended space).
        if header == 0 || header == u32::MAX {
            break;
        }
        seen[ptr / 4] = true;
        let id = (header & 0xffff) as u16;
        let version = ((header >> 16) & 0xf) as u8;
        list.caps.push(capability(
            ptr,
            id,
            version,
            ext_cap_name(id),
            decode_extended(cfg, ptr, id),
        ));
        let next = ((header >> 20) & 0xffc) as usize;
        if next == 0 {
            break;
        }
        if next < PCI_CFG_SPACE_SIZE {
            list.problems.push(format!(
                "extended capability pointer {next:#05x} below 0x100; chain broken"
            ));
            break;
        }
        if seen[next / 4] {
            list.problems.push(format!(
                "extended capability chain loops back to {next:#05x}"
            ));
            break;
        }
        ptr = next;
    }
    list
}

/// How many bytes of an extended capability the decoders read, header included.
pub fn ext_body_len(id: u16) -> usize {
    match id {
        PCI_EXT_CAP_ID_ERR => PCI_ERR_CAP + 4,
        PCI_EXT_CAP_ID_DSN | PCI_EXT_CAP_ID_DVSEC => 12,
        PCI_EXT_CAP_ID_PWR => PCI_PWR_CAP + 4,
        PCI_EXT_CAP_ID_VNDR | PCI_EXT_CAP_ID_ACS | PCI_EXT_CAP_ID_ARI | PCI_EXT_CAP_ID_LTR => 8,
        PCI_EXT_CAP_ID_SRIOV => PCI_SRIOV_BAR + 24,
        // Up to six BARs of 8 bytes after the header.
        PCI_EXT_CAP_ID_REBAR | PCI_EXT_CAP_ID_VF_REBAR => 4 + 6 * 8,
        _ => 4,
    }
}

fn not_readable(ptr: usize, len: usize) -> String {
    format!("capability at {ptr:#05x} lies past the {len} readable bytes of config space")
}

fn offset16(ptr: usize) -> u16 {
    // CAST: every pointer followed is below 4096.
    u16::try_from(ptr).unwrap_or(u16::MAX)
}

fn decode_standard(cfg: &[u8], at: usize, id: u8) -> Decoded {
    match id {
        PCI_CAP_ID_PM => decode_pm(cfg, at),
        PCI_CAP_ID_MSI => decode_msi(cfg, at),
        PCI_CAP_ID_MSIX => decode_msix(cfg, at),
        PCI_CAP_ID_EXP => express::parse(cfg, at).map(|e| CapDetail::Express(Box::new(e))),
        PCI_CAP_ID_VNDR => r8(cfg, at + 2).map(|length| CapDetail::VendorSpecific { length }),
        PCI_CAP_ID_SSVID => Some(CapDetail::BridgeSubsystem {
            vendor_id: r16(cfg, at + 4).unwrap_or(0),
            device_id: r16(cfg, at + 6).unwrap_or(0),
        })
        .filter(|_| cfg.len() >= at + 8),
        _ => return Decoded::Header,
    }
    .into()
}

fn decode_pm(cfg: &[u8], at: usize) -> Option<CapDetail> {
    let pmc = r16(cfg, at + PCI_PM_PMC)?;
    let ctrl = r16(cfg, at + PCI_PM_CTRL)?;
    // Aux current: PMC bits 8:6 index 0, 55, 100, 160, 220, 270, 320, 375 mA.
    const AUX_MA: [u16; 8] = [0, 55, 100, 160, 220, 270, 320, 375];
    Some(CapDetail::PowerManagement {
        version: (pmc & 7) as u8,
        d1: pmc & 0x0200 != 0,
        d2: pmc & 0x0400 != 0,
        pme_support: (pmc >> 11) as u8,
        aux_current_ma: AUX_MA[usize::from((pmc >> 6) & 7)],
        power_state: (ctrl & 3) as u8,
        no_soft_reset: ctrl & 0x0008 != 0,
        pme_enabled: ctrl & 0x0100 != 0,
        pme_status: ctrl & 0x8000 != 0,
    })
}

fn decode_msi(cfg: &[u8], at: usize) -> Option<CapDetail> {
    let flags = r16(cfg, at + PCI_MSI_FLAGS)?;
    let is_64bit = flags & PCI_MSI_FLAGS_64BIT != 0;
    let lo = r32(cfg, at + PCI_MSI_ADDRESS_LO)?;
    let (hi, data) = if is_64bit {
        (
            r32(cfg, at + PCI_MSI_ADDRESS_HI)?,
            r16(cfg, at + PCI_MSI_DATA_64)?,
        )
    } else {
        (0, r16(cfg, at + PCI_MSI_DATA_32)?)
    };
    Some(CapDetail::Msi {
        enabled: flags & PCI_MSI_FLAGS_ENABLE != 0,
        vectors_capable: 1 << ((flags & PCI_MSI_FLAGS_QMASK) >> 1),
        vectors_enabled: 1 << ((flags & PCI_MSI_FLAGS_QSIZE) >> 4),
        is_64bit,
        per_vector_masking: flags & PCI_MSI_FLAGS_MASKBIT != 0,
        address: (u64::from(hi) << 32) | u64::from(lo),
        data,
    })
}

fn decode_msix(cfg: &[u8], at: usize) -> Option<CapDetail> {
    let flags = r16(cfg, at + PCI_MSIX_FLAGS)?;
    let table = r32(cfg, at + PCI_MSIX_TABLE)?;
    let pba = r32(cfg, at + PCI_MSIX_PBA)?;
    Some(CapDetail::MsiX {
        enabled: flags & PCI_MSIX_FLAGS_ENABLE != 0,
        function_masked: flags & PCI_MSIX_FLAGS_MASKALL != 0,
        table_size: (flags & PCI_MSIX_FLAGS_QSIZE) + 1,
        table_bar: (table & PCI_MSIX_TABLE_BIR) as u8,
        table_offset: table & !PCI_MSIX_TABLE_BIR,
        pba_bar: (pba & PCI_MSIX_TABLE_BIR) as u8,
        pba_offset: pba & !PCI_MSIX_TABLE_BIR,
    })
}

fn decode_extended(cfg: &[u8], at: usize, id: u16) -> Decoded {
    match id {
        PCI_EXT_CAP_ID_ERR => decode_aer(cfg, at),
        PCI_EXT_CAP_ID_DSN => {
            let lo = r32(cfg, at + 4);
            let hi = r32(cfg, at + 8);
            lo.zip(hi)
                .map(|(lo, hi)| serial_number((u64::from(hi) << 32) | u64::from(lo)))
        }
        PCI_EXT_CAP_ID_PWR => (|| {
            let select = r8(cfg, at + PCI_PWR_DSR)?;
            let data = r32(cfg, at + PCI_PWR_DATA)?;
            let cap = r8(cfg, at + PCI_PWR_CAP)?;
            Some(CapDetail::PowerBudget {
                data_select: select,
                data,
                system_allocated: cap & 1 != 0,
            })
        })(),
        PCI_EXT_CAP_ID_VNDR => r32(cfg, at + 4).map(|h| CapDetail::Vsec {
            vsec_id: (h & 0xffff) as u16,
            vsec_rev: ((h >> 16) & 0xf) as u8,
            length: (h >> 20) as u16,
        }),
        PCI_EXT_CAP_ID_ACS => {
            r16(cfg, at + 4)
                .zip(r16(cfg, at + 6))
                .map(|(capability, control)| CapDetail::Acs {
                    capability,
                    control,
                })
        }
        PCI_EXT_CAP_ID_ARI => {
            r16(cfg, at + 4)
                .zip(r16(cfg, at + 6))
                .map(|(capability, control)| CapDetail::Ari {
                    capability,
                    control,
                    // The ARI capability register's Next Function Number, bits 15:8.
                    next_function: (capability >> 8) as u8,
                })
        }
        PCI_EXT_CAP_ID_SRIOV => decode_sriov(cfg, at),
        PCI_EXT_CAP_ID_REBAR => decode_rebar(cfg, at, false),
        PCI_EXT_CAP_ID_VF_REBAR => decode_rebar(cfg, at, true),
        PCI_EXT_CAP_ID_LTR => r16(cfg, at + PCI_LTR_MAX_SNOOP_LAT)
            .zip(r16(cfg, at + PCI_LTR_MAX_NOSNOOP_LAT))
            .map(|(s, n)| CapDetail::Ltr {
                max_snoop_ns: ltr_ns(s),
                max_no_snoop_ns: ltr_ns(n),
            }),
        PCI_EXT_CAP_ID_DVSEC => r32(cfg, at + 4)
            .zip(r16(cfg, at + 8))
            .map(|(h1, dvsec_id)| CapDetail::Dvsec {
                vendor_id: (h1 & 0xffff) as u16,
                revision: ((h1 >> 16) & 0xf) as u8,
                length: (h1 >> 20) as u16,
                dvsec_id,
            }),
        _ => return Decoded::Header,
    }
    .into()
}

/// The serial number with the text lspci prints: its bytes high to low, dash-separated.
fn serial_number(serial: u64) -> CapDetail {
    CapDetail::SerialNumber {
        serial,
        text: serial
            .to_be_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join("-"),
    }
}

fn decode_aer(cfg: &[u8], at: usize) -> Option<CapDetail> {
    let capabilities_control = r32(cfg, at + PCI_ERR_CAP)?;
    Some(CapDetail::Aer {
        uncorrectable_status: r32(cfg, at + PCI_ERR_UNCOR_STATUS)?,
        uncorrectable_mask: r32(cfg, at + PCI_ERR_UNCOR_MASK)?,
        uncorrectable_severity: r32(cfg, at + PCI_ERR_UNCOR_SEVER)?,
        correctable_status: r32(cfg, at + PCI_ERR_COR_STATUS)?,
        correctable_mask: r32(cfg, at + PCI_ERR_COR_MASK)?,
        capabilities_control,
        // PCI_ERR_CAP_FEP: bits 4:0 of the capabilities and control register.
        first_error_pointer: (capabilities_control & 0x1f) as u8,
    })
}

fn decode_sriov(cfg: &[u8], at: usize) -> Option<CapDetail> {
    let vf_bars = (0..6)
        .map(|i| r32(cfg, at + PCI_SRIOV_BAR + 4 * i))
        .collect::<Option<Vec<u32>>>()?;
    Some(CapDetail::SrIov(Box::new(SrIov {
        capability: r32(cfg, at + PCI_SRIOV_CAP)?,
        control: r16(cfg, at + PCI_SRIOV_CTRL)?,
        status: r16(cfg, at + PCI_SRIOV_STATUS)?,
        initial_vfs: r16(cfg, at + PCI_SRIOV_INITIAL_VF)?,
        total_vfs: r16(cfg, at + PCI_SRIOV_TOTAL_VF)?,
        num_vfs: r16(cfg, at + PCI_SRIOV_NUM_VF)?,
        first_vf_offset: r16(cfg, at + PCI_SRIOV_VF_OFFSET)?,
        vf_stride: r16(cfg, at + PCI_SRIOV_VF_STRIDE)?,
        vf_device_id: r16(cfg, at + PCI_SRIOV_VF_DID)?,
        supported_page_sizes: r32(cfg, at + PCI_SRIOV_SUP_PGSIZE)?,
        system_page_size: r32(cfg, at + PCI_SRIOV_SYS_PGSIZE)?,
        vf_bars,
    })))
}

/// Decodes a (VF) Resizable BAR capability: one capability/control pair per BAR, the
/// count in the first control register (PCIe Base 6.0 §7.8.6).
fn decode_rebar(cfg: &[u8], at: usize, virtual_function: bool) -> Option<CapDetail> {
    let first_ctrl = r32(cfg, at + PCI_REBAR_CTRL)?;
    let count = ((first_ctrl & PCI_REBAR_CTRL_NBAR_MASK) >> 5).clamp(1, 6);
    let mut entries = Vec::with_capacity(count as usize);
    for i in 0..count as usize {
        let cap = r32(cfg, at + PCI_REBAR_CAP + 8 * i)?;
        let ctrl = r32(cfg, at + PCI_REBAR_CTRL + 8 * i)?;
        entries.push(RebarEntry {
            bar: (ctrl & PCI_REBAR_CTRL_BAR_IDX) as u8,
            supported_sizes: rebar_sizes(cap, ctrl),
            current_size: rebar_size_bytes((ctrl & PCI_REBAR_CTRL_BAR_SIZE) >> 8),
        });
    }
    Some(CapDetail::ResizableBar {
        virtual_function,
        entries,
    })
}

/// Size encoding of the Resizable BAR capability: value n means 2^(n+20) bytes.
pub fn rebar_size_bytes(encoded: u32) -> u64 {
    1u64.checked_shl(encoded + 20).unwrap_or(0)
}

/// Supported sizes: capability bits 31:4 are 1 MiB .. 128 TiB; control bits 31:16
/// continue at 256 TiB (PCIe 6.0 §7.8.6.2-3).
pub fn rebar_sizes(cap: u32, ctrl: u32) -> Vec<u64> {
    let low = (4..32)
        .filter(|b| cap & (1 << b) != 0)
        .map(|b| rebar_size_bytes(b - 4));
    let high = (16..32)
        .filter(|b| ctrl & (1 << b) != 0)
        .map(|b| rebar_size_bytes(b + 12));
    low.chain(high).filter(|&s| s != 0).collect()
}

/// LTR latency: value bits 9:0 times 32^scale (bits 12:10) nanoseconds.
fn ltr_ns(reg: u16) -> u64 {
    let value = u64::from(reg & 0x3ff);
    let scale = u32::from((reg >> 10) & 7);
    if scale > 5 {
        return 0; // reserved scales
    }
    value * 32u64.pow(scale)
}

/// Standard capability names (pci_regs.h `PCI_CAP_ID_*`).
pub fn cap_name(id: u16) -> &'static str {
    match id {
        0x01 => "Power Management",
        0x02 => "AGP",
        0x03 => "Vital Product Data",
        0x04 => "Slot Identification",
        0x05 => "MSI",
        0x06 => "CompactPCI hot-swap",
        0x07 => "PCI-X",
        0x08 => "HyperTransport",
        0x09 => "Vendor Specific",
        0x0a => "Debug port",
        0x0b => "CompactPCI central resource control",
        0x0c => "PCI Standard Hot-Plug Controller",
        0x0d => "Subsystem Vendor ID (bridge)",
        0x0e => "AGP 8x",
        0x0f => "Secure Device",
        0x10 => "Express",
        0x11 => "MSI-X",
        0x12 => "SATA HBA",
        0x13 => "PCI Advanced Features",
        0x14 => "Enhanced Allocation",
        0x15 => "Flattening Portal Bridge",
        _ => "Unknown",
    }
}

/// Extended capability names (pci_regs.h `PCI_EXT_CAP_ID_*`).
pub fn ext_cap_name(id: u16) -> &'static str {
    match id {
        0x00 => "Null",
        0x01 => "Advanced Error Reporting",
        0x02 | 0x09 => "Virtual Channel",
        0x03 => "Device Serial Number",
        0x04 => "Power Budgeting",
        0x05 => "Root Complex Link Declaration",
        0x06 => "Root Complex Internal Link Control",
        0x07 => "Root Complex Event Collector Endpoint Association",
        0x08 => "Multi-Function VC Arbitration",
        0x0a => "Root Complex Register Block",
        0x0b => "Vendor Specific",
        0x0c => "Configuration Access Correlation",
        0x0d => "Access Control Services",
        0x0e => "Alternative Routing-ID Interpretation",
        0x0f => "Address Translation Service",
        0x10 => "Single Root I/O Virtualization",
        0x11 => "Multi-Root I/O Virtualization",
        0x12 => "Multicast",
        0x13 => "Page Request Interface",
        0x14 => "AMD Reserved",
        0x15 => "Resizable BAR",
        0x16 => "Dynamic Power Allocation",
        0x17 => "TLP Processing Hints",
        0x18 => "Latency Tolerance Reporting",
        0x19 => "Secondary PCI Express",
        0x1a => "Protocol Multiplexing",
        0x1b => "Process Address Space ID",
        0x1c => "LN Requester",
        0x1d => "Downstream Port Containment",
        0x1e => "L1 PM Substates",
        0x1f => "Precision Time Measurement",
        0x20 => "M-PCIe",
        0x21 => "FRS Queueing",
        0x22 => "Readiness Time Reporting",
        0x23 => "Designated Vendor-Specific",
        0x24 => "VF Resizable BAR",
        0x25 => "Data Link Feature",
        0x26 => "Physical Layer 16.0 GT/s",
        0x27 => "Lane Margining at the Receiver",
        0x28 => "Hierarchy ID",
        0x29 => "Native PCIe Enclosure Management",
        0x2a => "Physical Layer 32.0 GT/s",
        0x2b => "Alternate Protocol",
        0x2c => "System Firmware Intermediary",
        0x2d => "Shadow Functions",
        0x2e => "Data Object Exchange",
        0x2f => "Device 3",
        0x30 => "Integrity and Data Encryption",
        0x31 => "Physical Layer 64.0 GT/s",
        0x32 => "Flit Logging",
        0x33 => "Flit Performance Measurement",
        0x34 => "Flit Error Injection",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests;
