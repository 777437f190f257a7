//! GPU identity — vendor, chip, architecture — from a PCI function's vendor id, device id and
//! class code, with no device access.
//!
//! Flow: `pci` reads `vendor`, `device` and `class` from sysfs → [`identify`] → the device
//! description given to clients. It is a best guess from public id lists; only the chip itself
//! (NVIDIA's `NV_PMC_BOOT_0` register, AMD's IP discovery table) is authoritative, and reading
//! it needs the device's BAR.
//!
//! State: none; compile-time tables, sorted by device id and searched by bisection.
//!
//! Reference: GPU functions are base class `PCI_BASE_CLASS_DISPLAY` (0x03) or
//! `PCI_BASE_CLASS_ACCELERATOR` (0x12), and the vendor ids are the `PCI_VENDOR_ID_*` of Linux
//! `include/linux/pci_ids.h`. Where each table comes from is documented above it.
//! Not here: names for display (`pci::ids`), anything read from the device (`pci`).

/// NVIDIA Corporation, from `include/linux/pci_ids.h`.
pub const PCI_VENDOR_ID_NVIDIA: u16 = 0x10de;
/// ATI, the vendor id of every AMD GPU, from `include/linux/pci_ids.h`.
pub const PCI_VENDOR_ID_ATI: u16 = 0x1002;
/// Intel Corporation, from `include/linux/pci_ids.h`.
pub const PCI_VENDOR_ID_INTEL: u16 = 0x8086;
/// Display controller base class (VGA, XGA, 3D, other), from `include/linux/pci_ids.h`.
pub const PCI_BASE_CLASS_DISPLAY: u32 = 0x03;
/// Processing-accelerator base class, from `include/linux/pci_ids.h`.
pub const PCI_BASE_CLASS_ACCELERATOR: u32 = 0x12;

/// `chip` and `family` of a GPU whose vendor is known but whose device id is not in the tables.
pub const UNKNOWN: &str = "unknown";

/// The model's vendor of a GPU; this module says which PCI vendor ids are which.
pub use rig_model::GpuVendor;

/// The vendor owning PCI vendor id `vendor`, if it makes GPUs this module knows.
pub const fn vendor_of(vendor: u16) -> Option<GpuVendor> {
    match vendor {
        PCI_VENDOR_ID_NVIDIA => Some(GpuVendor::Nvidia),
        PCI_VENDOR_ID_ATI => Some(GpuVendor::Amd),
        PCI_VENDOR_ID_INTEL => Some(GpuVendor::Intel),
        _ => None,
    }
}

const fn chips(vendor: GpuVendor) -> &'static [ChipRange] {
    match vendor {
        GpuVendor::Nvidia => NVIDIA_CHIPS,
        GpuVendor::Amd => AMD_CHIPS,
        GpuVendor::Intel => INTEL_CHIPS,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuIdentity {
    pub vendor: GpuVendor,
    /// Die name: "GH100", "GA102", "Navi 31", "DG2"; [`UNKNOWN`] when the id is not listed.
    pub chip: &'static str,
    /// NVIDIA: architecture ("Hopper"). AMD: gfx IP and generation ("gfx1100 (RDNA3)").
    /// Intel: Xe flavour ("Xe-HPG"). [`UNKNOWN`] when the id is not listed.
    pub family: &'static str,
}

/// True for a 24-bit class code of base class display (0x03xxxx) or processing accelerator
/// (0x12xxxx). Values above 24 bits are not class codes and give false.
pub const fn is_gpu_class(class: u32) -> bool {
    let base = class >> 16;
    base == PCI_BASE_CLASS_DISPLAY || base == PCI_BASE_CLASS_ACCELERATOR
}

/// The GPU behind a PCI function, or `None` when the class is not a GPU class (an HD-audio or
/// USB function of a graphics card, say) or the vendor is not NVIDIA, AMD or Intel. A known
/// vendor's unlisted device gives [`UNKNOWN`] chip and family.
pub fn identify(vendor: u16, device: u16, class: u32) -> Option<GpuIdentity> {
    if !is_gpu_class(class) {
        return None;
    }
    let vendor = vendor_of(vendor)?;
    let (chip, family) =
        find(chips(vendor), device).map_or((UNKNOWN, UNKNOWN), |r| (r.chip, r.family));
    Some(GpuIdentity {
        vendor,
        chip,
        family,
    })
}

/// Device ids `first..=last` are all `chip`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ChipRange {
    first: u16,
    last: u16,
    chip: &'static str,
    family: &'static str,
}

const fn r(first: u16, last: u16, chip: &'static str, family: &'static str) -> ChipRange {
    ChipRange {
        first,
        last,
        chip,
        family,
    }
}

/// The range holding `device` in `table`, which is sorted and free of overlaps (tested).
fn find(table: &[ChipRange], device: u16) -> Option<&ChipRange> {
    let i = table.partition_point(|range| range.last < device);
    table.get(i).filter(|range| range.first <= device)
}

const PASCAL: &str = "Pascal";
const VOLTA: &str = "Volta";
const TURING: &str = "Turing";
const AMPERE: &str = "Ampere";
const ADA: &str = "Ada Lovelace";
const HOPPER: &str = "Hopper";
const BLACKWELL: &str = "Blackwell";

/// NVIDIA allocates device ids in blocks per die, mostly 0x80 long (NVIDIA's own
/// `gpu-admin-tools` lists its Blackwell blocks that way: `gpu/devid_chips.py`, from which the
/// GB1xx/GB2xx rows are taken). The other rows are the 0x80 blocks (two for GH100, a partial
/// block for GP100) that hold every device pci.ids 2025.07.11 names with that die. The test
/// `nvidia_table_agrees_with_pci_ids` checks them against the installed pci.ids. Maxwell and
/// older dies interleave their ids and are left out (they report [`UNKNOWN`]).
const NVIDIA_CHIPS: &[ChipRange] = &[
    r(0x15c0, 0x15ff, "GP100", PASCAL),
    r(0x1720, 0x172f, "GP100", PASCAL),
    r(0x1b00, 0x1b7f, "GP102", PASCAL),
    r(0x1b80, 0x1bff, "GP104", PASCAL),
    r(0x1c00, 0x1c7f, "GP106", PASCAL),
    r(0x1c80, 0x1cff, "GP107", PASCAL),
    r(0x1d00, 0x1d7f, "GP108", PASCAL),
    r(0x1d80, 0x1dff, "GV100", VOLTA),
    r(0x1e00, 0x1e7f, "TU102", TURING),
    r(0x1e80, 0x1eff, "TU104", TURING),
    r(0x1f00, 0x1f7f, "TU106", TURING),
    r(0x1f80, 0x1fff, "TU117", TURING),
    r(0x2080, 0x20ff, "GA100", AMPERE),
    r(0x2180, 0x21ff, "TU116", TURING),
    r(0x2200, 0x227f, "GA102", AMPERE),
    r(0x2300, 0x23ff, "GH100", HOPPER),
    r(0x2400, 0x247f, "GA103", AMPERE),
    r(0x2480, 0x24ff, "GA104", AMPERE),
    r(0x2500, 0x257f, "GA106", AMPERE),
    r(0x2580, 0x25ff, "GA107", AMPERE),
    r(0x2680, 0x26ff, "AD102", ADA),
    r(0x2700, 0x277f, "AD103", ADA),
    r(0x2780, 0x27ff, "AD104", ADA),
    r(0x2800, 0x287f, "AD106", ADA),
    r(0x2880, 0x28ff, "AD107", ADA),
    r(0x2900, 0x297f, "GB100", BLACKWELL),
    r(0x2980, 0x29ff, "GB102", BLACKWELL),
    r(0x2b80, 0x2bff, "GB202", BLACKWELL),
    r(0x2c00, 0x2c7f, "GB203", BLACKWELL),
    r(0x2d00, 0x2d7f, "GB206", BLACKWELL),
    r(0x2d80, 0x2dff, "GB207", BLACKWELL),
    r(0x2f00, 0x2f7f, "GB205", BLACKWELL),
    r(0x3180, 0x31ff, "GB110", BLACKWELL),
    r(0x3200, 0x327f, "GB112", BLACKWELL),
];

const GFX900: &str = "gfx900 (GCN5)";
const GFX904: &str = "gfx904 (GCN5)";
const GFX906: &str = "gfx906 (GCN5)";
const GFX908: &str = "gfx908 (CDNA1)";
const GFX90A: &str = "gfx90a (CDNA2)";
const GFX942: &str = "gfx942 (CDNA3)";
const GFX1010: &str = "gfx1010 (RDNA1)";
const GFX1011: &str = "gfx1011 (RDNA1)";
const GFX1012: &str = "gfx1012 (RDNA1)";
const GFX1030: &str = "gfx1030 (RDNA2)";
const GFX1031: &str = "gfx1031 (RDNA2)";
const GFX1032: &str = "gfx1032 (RDNA2)";
const GFX1034: &str = "gfx1034 (RDNA2)";
const GFX1100: &str = "gfx1100 (RDNA3)";
const GFX1101: &str = "gfx1101 (RDNA3)";
const GFX1102: &str = "gfx1102 (RDNA3)";
const GFX1200: &str = "gfx1200 (RDNA4)";
const GFX1201: &str = "gfx1201 (RDNA4)";

/// AMD ids are sparse, so rows are runs of listed ids, not blocks. Two sources:
/// - GFX9 and GFX10 discrete GPUs: amdgpu's `pciidlist` in
///   `drivers/gpu/drm/amd/amdgpu/amdgpu_drv.c`, which maps each id to an ASIC. Its names differ
///   from marketing ones: CHIP_SIENNA_CICHLID is Navi 21, NAVY_FLOUNDER Navi 22,
///   DIMGREY_CAVEFISH Navi 23, BEIGE_GOBY Navi 24.
/// - Later discrete GPUs (gfx942 MI300, GFX11, GFX12): `pciidlist` has no ids for them. amdgpu
///   binds every ATI display or accelerator function as CHIP_IP_DISCOVERY and reads the IP
///   versions from the discovery table in VRAM. Their rows are the ids that pci.ids 2025.07.11
///   names with the chip first ("Navi 31 [Radeon RX 7900 XT/7900 XTX/…]"), marked "pci.ids".
///
/// gfx targets are LLVM's (AMDGPUUsage "Processors"). APUs are left out: they are not PCIe cards
/// that rig lends, and they report [`UNKNOWN`].
const AMD_CHIPS: &[ChipRange] = &[
    r(0x66a0, 0x66a4, "Vega 20", GFX906),
    r(0x66a7, 0x66a7, "Vega 20", GFX906),
    r(0x66af, 0x66af, "Vega 20", GFX906),
    r(0x6860, 0x6864, "Vega 10", GFX900),
    r(0x6867, 0x686f, "Vega 10", GFX900),
    r(0x687f, 0x687f, "Vega 10", GFX900),
    r(0x69a0, 0x69a3, "Vega 12", GFX904),
    r(0x69af, 0x69af, "Vega 12", GFX904),
    r(0x7310, 0x7310, "Navi 10", GFX1010),
    r(0x7312, 0x7312, "Navi 10", GFX1010),
    r(0x7318, 0x731b, "Navi 10", GFX1010),
    r(0x731e, 0x731f, "Navi 10", GFX1010),
    r(0x7340, 0x7341, "Navi 14", GFX1012),
    r(0x7347, 0x7347, "Navi 14", GFX1012),
    r(0x734f, 0x734f, "Navi 14", GFX1012),
    r(0x7360, 0x7360, "Navi 12", GFX1011),
    r(0x7362, 0x7362, "Navi 12", GFX1011),
    r(0x7388, 0x7388, "Arcturus", GFX908),
    r(0x738c, 0x738c, "Arcturus", GFX908),
    r(0x738e, 0x738e, "Arcturus", GFX908),
    r(0x7390, 0x7390, "Arcturus", GFX908),
    r(0x73a0, 0x73a3, "Navi 21", GFX1030),
    r(0x73a5, 0x73a5, "Navi 21", GFX1030),
    r(0x73a8, 0x73a9, "Navi 21", GFX1030),
    r(0x73ab, 0x73af, "Navi 21", GFX1030),
    r(0x73bf, 0x73bf, "Navi 21", GFX1030),
    r(0x73c0, 0x73c1, "Navi 22", GFX1031),
    r(0x73c3, 0x73c3, "Navi 22", GFX1031),
    r(0x73ce, 0x73ce, "Navi 22", GFX1031), // pci.ids: SR-IOV virtual function
    r(0x73da, 0x73df, "Navi 22", GFX1031),
    r(0x73e0, 0x73e3, "Navi 23", GFX1032),
    r(0x73e8, 0x73ed, "Navi 23", GFX1032),
    r(0x73ef, 0x73ef, "Navi 23", GFX1032),
    r(0x73f0, 0x73f0, "Navi 33", GFX1102), // pci.ids
    r(0x73ff, 0x73ff, "Navi 23", GFX1032),
    r(0x7408, 0x7408, "Aldebaran", GFX90A),
    r(0x740c, 0x740c, "Aldebaran", GFX90A),
    r(0x740f, 0x7410, "Aldebaran", GFX90A),
    r(0x7420, 0x7424, "Navi 24", GFX1034),
    r(0x743f, 0x743f, "Navi 24", GFX1034),
    // pci.ids from here on.
    r(0x7448, 0x7448, "Navi 31", GFX1100),
    r(0x744a, 0x744a, "Navi 31", GFX1100),
    r(0x744c, 0x744c, "Navi 31", GFX1100),
    r(0x745e, 0x745e, "Navi 31", GFX1100),
    r(0x7460, 0x7461, "Navi 32", GFX1101),
    r(0x7470, 0x7470, "Navi 32", GFX1101),
    r(0x747e, 0x747e, "Navi 32", GFX1101),
    r(0x7480, 0x7481, "Navi 33", GFX1102),
    r(0x7483, 0x7483, "Navi 33", GFX1102),
    r(0x7487, 0x7487, "Navi 33", GFX1102),
    r(0x7489, 0x7489, "Navi 33", GFX1102),
    r(0x748b, 0x748b, "Navi 33", GFX1102),
    r(0x7499, 0x7499, "Navi 33", GFX1102),
    r(0x749f, 0x749f, "Navi 33", GFX1102),
    r(0x74a0, 0x74a2, "Aqua Vanjaram", GFX942),
    r(0x74a5, 0x74a5, "Aqua Vanjaram", GFX942),
    r(0x74a9, 0x74a9, "Aqua Vanjaram", GFX942),
    r(0x74b5, 0x74b5, "Aqua Vanjaram", GFX942),
    r(0x74b9, 0x74b9, "Aqua Vanjaram", GFX942),
    r(0x74bd, 0x74bd, "Aqua Vanjaram", GFX942),
    r(0x7550, 0x7551, "Navi 48", GFX1201),
    r(0x7590, 0x7590, "Navi 44", GFX1200),
];

/// Intel discrete GPUs only, from the runs of ids that pci.ids 2025.07.11 names with the die
/// first ("DG2 [Arc A770]"). ATS-M (Data Center GPU Flex) is DG2 silicon. Integrated graphics
/// report [`UNKNOWN`].
const INTEL_CHIPS: &[ChipRange] = &[
    r(0x0b69, 0x0b69, "Ponte Vecchio", "Xe-HPC"),
    r(0x0b6e, 0x0b6e, "Ponte Vecchio", "Xe-HPC"),
    r(0x0bd0, 0x0bdb, "Ponte Vecchio", "Xe-HPC"),
    r(0x4905, 0x4909, "DG1", "Xe-LP"),
    r(0x5690, 0x56c2, "DG2", "Xe-HPG"),
    r(0xe202, 0xe216, "BMG-G21", "Xe2-HPG"),
    r(0xe220, 0xe223, "BMG-G31", "Xe2-HPG"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pci::ids::{DEFAULT_PATHS, PciIds};
    use std::collections::HashSet;
    use std::path::PathBuf;

    const VGA: u32 = 0x03_00_00;
    const DISPLAY_3D: u32 = 0x03_02_00;
    const ACCELERATOR: u32 = 0x12_00_00;
    const ALL_TABLES: [(u16, &[ChipRange]); 3] = [
        (PCI_VENDOR_ID_NVIDIA, NVIDIA_CHIPS),
        (PCI_VENDOR_ID_ATI, AMD_CHIPS),
        (PCI_VENDOR_ID_INTEL, INTEL_CHIPS),
    ];

    fn chip(vendor: u16, device: u16) -> Option<&'static str> {
        identify(vendor, device, VGA).map(|gpu| gpu.chip)
    }

    #[test]
    fn is_gpu_class_accepts_display_and_accelerator_base_classes_only() {
        for (class, want) in [
            (0x00_0000, false),
            (0x02_ffff, false),
            (0x03_0000, true),
            (0x03_0200, true),
            (0x03_ffff, true),
            (0x04_0000, false),
            (0x04_0300, false), // HD audio of a graphics card
            (0x11_ffff, false),
            (0x12_0000, true),
            (0x12_ffff, true),
            (0x13_0000, false),
            (0xff_ffff, false),
            (0x0103_0000, false), // not a 24-bit class code
        ] {
            assert_eq!(is_gpu_class(class), want, "{class:#x}");
        }
    }

    #[test]
    fn identify_h200_is_gh100_hopper() {
        let want = GpuIdentity {
            vendor: GpuVendor::Nvidia,
            chip: "GH100",
            family: "Hopper",
        };
        assert_eq!(identify(0x10de, 0x2335, DISPLAY_3D), Some(want));
    }

    /// (board, vendor, device, class, chip, family), one row per board.
    #[rustfmt::skip]
    const BOARDS: &[(&str, u16, u16, u32, &str, &str)] = &[
        ("H100 SXM5", 0x10de, 0x2330, DISPLAY_3D, "GH100", "Hopper"),
        ("A100 SXM4", 0x10de, 0x20b0, DISPLAY_3D, "GA100", "Ampere"),
        ("L40", 0x10de, 0x26b5, DISPLAY_3D, "AD102", "Ada Lovelace"),
        ("RTX 5090", 0x10de, 0x2b85, VGA, "GB202", "Blackwell"),
        ("B200", 0x10de, 0x2901, DISPLAY_3D, "GB100", "Blackwell"),
        ("T4", 0x10de, 0x1eb8, DISPLAY_3D, "TU104", "Turing"),
        ("V100 PCIe", 0x10de, 0x1db4, DISPLAY_3D, "GV100", "Volta"),
        ("P100 PCIe", 0x10de, 0x15f8, DISPLAY_3D, "GP100", "Pascal"),
        ("MI300X", 0x1002, 0x74a1, ACCELERATOR, "Aqua Vanjaram", "gfx942 (CDNA3)"),
        ("MI250X", 0x1002, 0x740c, DISPLAY_3D, "Aldebaran", "gfx90a (CDNA2)"),
        ("MI100", 0x1002, 0x738c, DISPLAY_3D, "Arcturus", "gfx908 (CDNA1)"),
        ("MI50", 0x1002, 0x66a1, VGA, "Vega 20", "gfx906 (GCN5)"),
        ("RX 7900 XTX", 0x1002, 0x744c, VGA, "Navi 31", "gfx1100 (RDNA3)"),
        ("RX 6900 XT", 0x1002, 0x73bf, VGA, "Navi 21", "gfx1030 (RDNA2)"),
        ("AI PRO R9700", 0x1002, 0x7551, VGA, "Navi 48", "gfx1201 (RDNA4)"),
        ("RX 9070 XT", 0x1002, 0x7550, VGA, "Navi 48", "gfx1201 (RDNA4)"),
        ("RX 9060 XT", 0x1002, 0x7590, VGA, "Navi 44", "gfx1200 (RDNA4)"),
        ("Arc A770", 0x8086, 0x56a0, VGA, "DG2", "Xe-HPG"),
        ("GPU Max 1550", 0x8086, 0x0bd5, DISPLAY_3D, "Ponte Vecchio", "Xe-HPC"),
    ];

    #[test]
    fn identify_names_well_known_boards() {
        for &(board, vendor, device, class, chip, family) in BOARDS {
            let gpu = identify(vendor, device, class).expect(board);
            assert_eq!((gpu.chip, gpu.family), (chip, family), "{board}");
        }
    }

    #[test]
    fn identify_ignores_non_gpu_functions_of_gpu_vendors() {
        assert_eq!(identify(0x10de, 0x22a3, 0x06_8000), None); // H100 NVSwitch bridge
        assert_eq!(identify(0x10de, 0x2335, 0x04_0300), None); // wrong class for this id
        assert_eq!(identify(0x1002, 0x744c, 0x0c_0330), None); // USB class
    }

    #[test]
    fn identify_of_other_vendors_is_none() {
        assert_eq!(identify(0x1234, 0x1111, VGA), None); // QEMU std VGA
        assert_eq!(identify(0x1af4, 0x1050, VGA), None); // virtio-gpu
        assert_eq!(identify(0x1022, 0x744c, VGA), None); // AMD's CPU vendor id
    }

    #[test]
    fn identify_of_unlisted_device_of_known_vendor_is_unknown_chip() {
        for vendor in [0x10de, 0x1002, 0x8086] {
            let gpu = identify(vendor, 0x0000, VGA).expect("known vendor");
            assert_eq!((gpu.chip, gpu.family), (UNKNOWN, UNKNOWN));
        }
        assert_eq!(chip(0x10de, 0x13c0), Some(UNKNOWN)); // GM204 (Maxwell): not covered
    }

    #[test]
    fn hand_picked_boundaries_fall_on_the_right_side() {
        for (vendor, device, want) in [
            (0x10de, 0x22ff, UNKNOWN),
            (0x10de, 0x2300, "GH100"),
            (0x10de, 0x23ff, "GH100"),
            (0x10de, 0x2400, "GA103"),
            (0x10de, 0x1dff, "GV100"),
            (0x10de, 0x1e00, "TU102"),
            (0x10de, 0x28ff, "AD107"),
            (0x10de, 0x2900, "GB100"),
            (0x10de, 0x2a00, UNKNOWN),
            (0x10de, 0x327f, "GB112"),
            (0x10de, 0x3280, UNKNOWN),
            (0x1002, 0x73ef, "Navi 23"),
            (0x1002, 0x73f0, "Navi 33"),
            (0x1002, 0x73f1, UNKNOWN),
            (0x1002, 0x7551, "Navi 48"),
            (0x1002, 0x7552, UNKNOWN),
            (0x8086, 0x56c2, "DG2"),
            (0x8086, 0x56c3, UNKNOWN),
        ] {
            assert_eq!(
                chip(vendor, device),
                Some(want),
                "{vendor:04x}:{device:04x}"
            );
        }
    }

    #[test]
    fn from_pci_vendor_knows_the_three_gpu_vendors_only() {
        assert_eq!(vendor_of(0x10de), Some(GpuVendor::Nvidia));
        assert_eq!(vendor_of(0x1002), Some(GpuVendor::Amd));
        assert_eq!(vendor_of(0x8086), Some(GpuVendor::Intel));
        assert_eq!(vendor_of(0x1022), None);
    }

    /// first, last and last+1 of every row of every table, through `identify`.
    #[test]
    fn every_range_boundary_maps_to_its_own_row_and_no_further() {
        for (vendor, table) in ALL_TABLES {
            for (i, row) in table.iter().enumerate() {
                assert_eq!(chip(vendor, row.first), Some(row.chip), "{row:x?}");
                assert_eq!(chip(vendor, row.last), Some(row.chip), "{row:x?}");
                let Some(after) = row.last.checked_add(1) else {
                    continue;
                };
                let next = table.get(i + 1).filter(|next| next.first == after);
                let want = next.map_or(UNKNOWN, |next| next.chip);
                assert_eq!(chip(vendor, after), Some(want), "after {row:x?}");
            }
        }
    }

    #[test]
    fn tables_are_sorted_without_overlaps_empty_or_mergeable_rows() {
        for (vendor, table) in ALL_TABLES {
            for row in table {
                assert!(row.first <= row.last, "{vendor:04x}: {row:x?}");
            }
            for pair in table.windows(2) {
                if let [a, b] = pair {
                    assert!(a.last < b.first, "{vendor:04x}: {a:x?} overlaps {b:x?}");
                    let adjacent = a.last.checked_add(1) == Some(b.first);
                    assert!(!adjacent || a.chip != b.chip, "merge {a:x?} and {b:x?}");
                }
            }
        }
    }

    #[test]
    fn bisection_matches_a_linear_scan_for_every_device_id() {
        for (_, table) in ALL_TABLES {
            for device in 0..=u16::MAX {
                let linear = table.iter().find(|r| (r.first..=r.last).contains(&device));
                assert_eq!(find(table, device), linear, "{device:#06x}");
            }
        }
    }

    /// `RIG_TEST_PCI_IDS`, else the first installed database; `None` skips.
    fn installed_ids() -> Option<PciIds> {
        let path = std::env::var_os("RIG_TEST_PCI_IDS")
            .map(PathBuf::from)
            .or_else(|| {
                DEFAULT_PATHS
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| p.is_file())
            });
        let Some(path) = path else {
            eprintln!("skipped: no pci.ids installed");
            return None;
        };
        Some(PciIds::load(&path).expect("installed pci.ids parses"))
    }

    /// Words that mark a graphics card's other functions (audio, USB-C, switches), which
    /// pci.ids also names after the die but which are not GPUs.
    const COMPANIONS: [&str; 7] = ["Audio", "USB", "UCSI", "NVSwitch", "Port", "Switch", "HDMI"];

    /// NVIDIA names its dies two capitals and three digits ("GH100"), then a variant suffix of
    /// capitals ("GL", "GLM", "M"): "GH100 [H200 SXM 141GB]" → "GH100".
    fn nvidia_die(name: &str) -> Option<&str> {
        let end = name
            .find(|c: char| !c.is_ascii_alphanumeric())
            .unwrap_or(name.len());
        let token = name.get(..end)?;
        let (die, suffix) = (token.get(..5)?, token.get(5..)?);
        let [a, b, c, d, e] = die.as_bytes() else {
            return None;
        };
        let shape = [a, b].iter().all(|x| x.is_ascii_uppercase())
            && [c, d, e].iter().all(|x| x.is_ascii_digit())
            && suffix.bytes().all(|x| x.is_ascii_uppercase());
        shape.then_some(die)
    }

    /// AMD names start with the chip ("Navi 31 [...]"), sometimes without the space
    /// ("Navi32 GL-XL"); the chip must end there ("Navi 3" is not "Navi 31").
    fn amd_chip<'a>(name: &str, chips: &HashSet<&'a str>) -> Option<&'a str> {
        chips.iter().copied().find(|chip| {
            [chip.to_string(), chip.replace(' ', "")].iter().any(|c| {
                name.strip_prefix(c.as_str())
                    .is_some_and(|rest| !rest.starts_with(|x: char| x.is_ascii_digit()))
            })
        })
    }

    /// For every device of `vendor` whose pci.ids name starts with a chip, compare our chip
    /// with the name's, when our table knows that chip or covers that id; companion functions
    /// aside. Returns (agreeing, disagreeing ids with names).
    fn agreement<'a>(
        ids: &'a PciIds,
        vendor: u16,
        table: &[ChipRange],
        chip_in_name: impl Fn(&str) -> Option<&str>,
    ) -> (usize, Vec<(u16, &'a str)>) {
        let mut agree = 0;
        let mut disagree = Vec::new();
        for (device, name) in ids.devices(vendor) {
            let Some(named) = chip_in_name(name) else {
                continue;
            };
            let ours = find(table, device).map(|r| r.chip);
            let known = ours.is_some() || table.iter().any(|r| r.chip == named);
            if !known || COMPANIONS.iter().any(|w| name.contains(w)) {
                continue;
            }
            if ours == Some(named) {
                agree += 1;
            } else {
                disagree.push((device, name));
            }
        }
        (agree, disagree)
    }

    /// Devices where pci.ids and our table legitimately differ; none so far.
    const NVIDIA_EXCEPTIONS: &[u16] = &[];

    #[test]
    fn nvidia_table_agrees_with_pci_ids() {
        let Some(ids) = installed_ids() else { return };
        let (agree, disagree) = agreement(&ids, PCI_VENDOR_ID_NVIDIA, NVIDIA_CHIPS, nvidia_die);
        let total = agree + disagree.len();
        eprintln!(
            "NVIDIA, pci.ids {:?}: {agree}/{total} agree; differ: {disagree:x?}",
            ids.version()
        );
        assert!(
            total >= 300,
            "only {total} NVIDIA devices named with a known die"
        );
        let unexpected: Vec<_> = disagree
            .iter()
            .filter(|(d, _)| !NVIDIA_EXCEPTIONS.contains(d))
            .collect();
        assert!(unexpected.is_empty(), "{unexpected:x?}");
        assert!(agree * 100 >= total * 99, "{agree}/{total}");
    }

    #[test]
    fn amd_table_agrees_with_pci_ids() {
        let Some(ids) = installed_ids() else { return };
        let chips: HashSet<&str> = AMD_CHIPS.iter().map(|r| r.chip).collect();
        let (agree, disagree) =
            agreement(&ids, PCI_VENDOR_ID_ATI, AMD_CHIPS, |n| amd_chip(n, &chips));
        let total = agree + disagree.len();
        eprintln!(
            "AMD, pci.ids {:?}: {agree}/{total} agree; differ: {disagree:x?}",
            ids.version()
        );
        assert!(
            total >= 50,
            "only {total} AMD devices named with a known chip"
        );
        assert!(disagree.is_empty(), "{disagree:x?}");
    }
}
