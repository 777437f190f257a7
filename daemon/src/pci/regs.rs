//! Config-space register offsets and bits, spelled as in Linux's
//! `include/uapi/linux/pci_regs.h` (which follows the PCI Local Bus and PCI Express Base
//! specifications). Only what the decoders use.

// Type 0 and type 1 common header.
pub const PCI_VENDOR_ID: usize = 0x00;
pub const PCI_DEVICE_ID: usize = 0x02;
pub const PCI_COMMAND: usize = 0x04;
pub const PCI_COMMAND_IO: u16 = 0x1;
pub const PCI_COMMAND_MEMORY: u16 = 0x2;
pub const PCI_STATUS: usize = 0x06;
pub const PCI_STATUS_CAP_LIST: u16 = 0x10;
pub const PCI_CLASS_REVISION: usize = 0x08;
pub const PCI_CACHE_LINE_SIZE: usize = 0x0c;
pub const PCI_LATENCY_TIMER: usize = 0x0d;
pub const PCI_HEADER_TYPE: usize = 0x0e;
pub const PCI_HEADER_TYPE_MASK: u8 = 0x7f;
pub const PCI_HEADER_TYPE_MFD: u8 = 0x80;
pub const PCI_HEADER_TYPE_NORMAL: u8 = 0;
pub const PCI_HEADER_TYPE_BRIDGE: u8 = 1;
pub const PCI_HEADER_TYPE_CARDBUS: u8 = 2;
pub const PCI_BIST: usize = 0x0f;
pub const PCI_BASE_ADDRESS_0: usize = 0x10;
pub const PCI_BASE_ADDRESS_SPACE_IO: u32 = 0x01;
pub const PCI_BASE_ADDRESS_MEM_TYPE_MASK: u32 = 0x06;
pub const PCI_BASE_ADDRESS_MEM_TYPE_64: u32 = 0x04;
pub const PCI_BASE_ADDRESS_MEM_PREFETCH: u32 = 0x08;
pub const PCI_BASE_ADDRESS_MEM_MASK: u32 = !0x0f;
pub const PCI_BASE_ADDRESS_IO_MASK: u32 = !0x03;
pub const PCI_SUBSYSTEM_VENDOR_ID: usize = 0x2c;
pub const PCI_SUBSYSTEM_ID: usize = 0x2e;
pub const PCI_ROM_ADDRESS: usize = 0x30;
pub const PCI_ROM_ADDRESS_ENABLE: u32 = 0x01;
pub const PCI_CAPABILITY_LIST: usize = 0x34;
pub const PCI_INTERRUPT_LINE: usize = 0x3c;
pub const PCI_INTERRUPT_PIN: usize = 0x3d;
/// Bytes any user may read from sysfs `config`; the rest needs CAP_SYS_ADMIN
/// (`pci_read_config` in drivers/pci/pci-sysfs.c).
pub const PCI_STD_HEADER_SIZEOF: usize = 64;
pub const PCI_CFG_SPACE_SIZE: usize = 256;
pub const PCI_CFG_SPACE_EXP_SIZE: usize = 4096;

// Type 1 (bridge) header.
pub const PCI_PRIMARY_BUS: usize = 0x18;
pub const PCI_SECONDARY_BUS: usize = 0x19;
pub const PCI_SUBORDINATE_BUS: usize = 0x1a;
pub const PCI_IO_BASE: usize = 0x1c;
pub const PCI_IO_LIMIT: usize = 0x1d;
pub const PCI_IO_RANGE_TYPE_32: u8 = 0x01;
pub const PCI_SEC_STATUS: usize = 0x1e;
pub const PCI_MEMORY_BASE: usize = 0x20;
pub const PCI_MEMORY_LIMIT: usize = 0x22;
pub const PCI_PREF_MEMORY_BASE: usize = 0x24;
pub const PCI_PREF_MEMORY_LIMIT: usize = 0x26;
pub const PCI_PREF_RANGE_TYPE_64: u16 = 0x01;
pub const PCI_PREF_BASE_UPPER32: usize = 0x28;
pub const PCI_PREF_LIMIT_UPPER32: usize = 0x2c;
pub const PCI_IO_BASE_UPPER16: usize = 0x30;
pub const PCI_IO_LIMIT_UPPER16: usize = 0x32;
pub const PCI_ROM_ADDRESS1: usize = 0x38;
pub const PCI_BRIDGE_CONTROL: usize = 0x3e;

// Standard capability ids.
pub const PCI_CAP_ID_PM: u8 = 0x01;
pub const PCI_CAP_ID_MSI: u8 = 0x05;
pub const PCI_CAP_ID_VNDR: u8 = 0x09;
pub const PCI_CAP_ID_SSVID: u8 = 0x0d;
pub const PCI_CAP_ID_EXP: u8 = 0x10;
pub const PCI_CAP_ID_MSIX: u8 = 0x11;

// Power management.
pub const PCI_PM_PMC: usize = 2;
pub const PCI_PM_CTRL: usize = 4;

// MSI.
pub const PCI_MSI_FLAGS: usize = 2;
pub const PCI_MSI_FLAGS_ENABLE: u16 = 0x0001;
pub const PCI_MSI_FLAGS_QMASK: u16 = 0x000e;
pub const PCI_MSI_FLAGS_QSIZE: u16 = 0x0070;
pub const PCI_MSI_FLAGS_64BIT: u16 = 0x0080;
pub const PCI_MSI_FLAGS_MASKBIT: u16 = 0x0100;
pub const PCI_MSI_ADDRESS_LO: usize = 4;
pub const PCI_MSI_ADDRESS_HI: usize = 8;
pub const PCI_MSI_DATA_32: usize = 8;
pub const PCI_MSI_DATA_64: usize = 12;

// MSI-X.
pub const PCI_MSIX_FLAGS: usize = 2;
pub const PCI_MSIX_FLAGS_QSIZE: u16 = 0x07ff;
pub const PCI_MSIX_FLAGS_MASKALL: u16 = 0x4000;
pub const PCI_MSIX_FLAGS_ENABLE: u16 = 0x8000;
pub const PCI_MSIX_TABLE: usize = 4;
pub const PCI_MSIX_PBA: usize = 8;
pub const PCI_MSIX_TABLE_BIR: u32 = 0x7;

// PCI Express capability.
pub const PCI_EXP_FLAGS: usize = 0x02;
pub const PCI_EXP_DEVCAP: usize = 0x04;
pub const PCI_EXP_DEVCAP_FLR: u32 = 0x1000_0000;
pub const PCI_EXP_DEVCTL: usize = 0x08;
pub const PCI_EXP_DEVSTA: usize = 0x0a;
pub const PCI_EXP_LNKCAP: usize = 0x0c;
pub const PCI_EXP_LNKCTL: usize = 0x10;
pub const PCI_EXP_LNKSTA: usize = 0x12;
pub const PCI_EXP_SLTCAP: usize = 0x14;
pub const PCI_EXP_SLTCTL: usize = 0x18;
pub const PCI_EXP_SLTSTA: usize = 0x1a;
pub const PCI_EXP_DEVCAP2: usize = 0x24;
pub const PCI_EXP_DEVCTL2: usize = 0x28;
pub const PCI_EXP_LNKCAP2: usize = 0x2c;
pub const PCI_EXP_LNKCTL2: usize = 0x30;
pub const PCI_EXP_LNKSTA2: usize = 0x32;
pub const PCI_EXP_FLAGS_SLOT: u16 = 0x0100;

// Extended capabilities.
pub const PCI_EXT_CAP_ID_ERR: u16 = 0x01;
pub const PCI_EXT_CAP_ID_DSN: u16 = 0x03;
pub const PCI_EXT_CAP_ID_PWR: u16 = 0x04;
pub const PCI_EXT_CAP_ID_VNDR: u16 = 0x0b;
pub const PCI_EXT_CAP_ID_ACS: u16 = 0x0d;
pub const PCI_EXT_CAP_ID_ARI: u16 = 0x0e;
pub const PCI_EXT_CAP_ID_SRIOV: u16 = 0x10;
pub const PCI_EXT_CAP_ID_REBAR: u16 = 0x15;
pub const PCI_EXT_CAP_ID_LTR: u16 = 0x18;
pub const PCI_EXT_CAP_ID_DVSEC: u16 = 0x23;
pub const PCI_EXT_CAP_ID_VF_REBAR: u16 = 0x24;

pub const PCI_ERR_UNCOR_STATUS: usize = 0x04;
pub const PCI_ERR_UNCOR_MASK: usize = 0x08;
pub const PCI_ERR_UNCOR_SEVER: usize = 0x0c;
pub const PCI_ERR_COR_STATUS: usize = 0x10;
pub const PCI_ERR_COR_MASK: usize = 0x14;
pub const PCI_ERR_CAP: usize = 0x18;

pub const PCI_REBAR_CAP: usize = 4;
pub const PCI_REBAR_CTRL: usize = 8;
pub const PCI_REBAR_CTRL_BAR_IDX: u32 = 0x0000_0007;
pub const PCI_REBAR_CTRL_NBAR_MASK: u32 = 0x0000_00e0;
pub const PCI_REBAR_CTRL_BAR_SIZE: u32 = 0x0000_3f00;

pub const PCI_SRIOV_CAP: usize = 0x04;
pub const PCI_SRIOV_CTRL: usize = 0x08;
pub const PCI_SRIOV_STATUS: usize = 0x0a;
pub const PCI_SRIOV_INITIAL_VF: usize = 0x0c;
pub const PCI_SRIOV_TOTAL_VF: usize = 0x0e;
pub const PCI_SRIOV_NUM_VF: usize = 0x10;
pub const PCI_SRIOV_VF_OFFSET: usize = 0x14;
pub const PCI_SRIOV_VF_STRIDE: usize = 0x16;
pub const PCI_SRIOV_VF_DID: usize = 0x1a;
pub const PCI_SRIOV_SUP_PGSIZE: usize = 0x1c;
pub const PCI_SRIOV_SYS_PGSIZE: usize = 0x20;
pub const PCI_SRIOV_BAR: usize = 0x24;

pub const PCI_LTR_MAX_SNOOP_LAT: usize = 0x4;
pub const PCI_LTR_MAX_NOSNOOP_LAT: usize = 0x6;

pub const PCI_PWR_DSR: usize = 0x04;
pub const PCI_PWR_DATA: usize = 0x08;
pub const PCI_PWR_CAP: usize = 0x0c;

/// Little-endian reads from a config-space image; `None` past the readable end.
pub fn r8(cfg: &[u8], off: usize) -> Option<u8> {
    cfg.get(off).copied()
}

/// See [`r8`].
pub fn r16(cfg: &[u8], off: usize) -> Option<u16> {
    let b = cfg.get(off..off.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

/// See [`r8`].
pub fn r32(cfg: &[u8], off: usize) -> Option<u32> {
    let b = cfg.get(off..off.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
