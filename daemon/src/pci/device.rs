//! One PCI function, fully described: config space decoded, sysfs facts, names, and
//! the link budget up to its root port.

use super::{
    Bdf, PciError,
    caps::{self, CapList, Detail},
    express::{self, Express, Link},
    gpu::{self, GpuIdentity},
    header::{self, BarKind, Header},
    ids::PciIds,
    regs::*,
    sysfs::{Resource, SysfsRoot},
};

const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_PREFETCH: u64 = 0x2000;
const IORESOURCE_MEM_64: u64 = 0x0010_0000;

/// Everything rig knows about one function.
#[derive(Debug, Clone)]
pub struct Device {
    pub bdf: Bdf,
    pub header: Header,
    /// The config bytes that were read: all of them for [`inspect`], none for
    /// [`inspect_summary`] (which reads only what the decoders need).
    pub config: Vec<u8>,
    /// How many config bytes this process may read (64 unprivileged).
    pub config_readable: usize,
    /// The size of the function's config space (256 or 4096).
    pub config_size: usize,
    pub names: Names,
    pub gpu: Option<GpuIdentity>,
    pub bars: Vec<Bar>,
    pub rom: Option<Rom>,
    pub caps: CapList,
    pub ext_caps: CapList,
    pub sysfs: SysfsFacts,
    pub link: LinkBudget,
}

/// Names from pci.ids; `None` where the database has none.
#[derive(Debug, Clone, Default)]
pub struct Names {
    pub vendor: Option<String>,
    pub device: Option<String>,
    pub subsystem_vendor: Option<String>,
    pub subsystem: Option<String>,
    /// The most specific of prog-if, subclass and base class.
    pub class: Option<String>,
    pub base_class: Option<String>,
    pub subclass: Option<String>,
    pub prog_if: Option<String>,
}

/// A BAR: the register's view merged with the kernel's assignment from `resource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub index: u8,
    pub kind: BarKind,
    pub is_64bit: bool,
    pub prefetchable: bool,
    pub address: u64,
    pub size: u64,
    pub assigned: bool,
    pub decode_enabled: bool,
    /// The kernel has a region for it but the register reads zero.
    pub is_virtual: bool,
    /// Sizes this BAR may take, from a Resizable BAR capability; empty if none.
    pub resizable: Vec<u64>,
    pub resizable_current: Option<u64>,
    pub resize_file: bool,
}

/// The expansion ROM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rom {
    pub address: u64,
    pub size: u64,
    pub enabled: bool,
    pub assigned: bool,
}

/// Attributes sysfs gives beside config space.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SysfsFacts {
    pub driver: Option<String>,
    pub driver_override: Option<String>,
    pub iommu_group: Option<String>,
    pub iommu_group_members: Vec<Bdf>,
    pub reset_methods: Vec<String>,
    pub numa_node: Option<i32>,
    pub local_cpulist: Option<String>,
    pub current_link_speed: Option<String>,
    pub current_link_width: Option<u32>,
    pub max_link_speed: Option<String>,
    pub max_link_width: Option<u32>,
    pub enabled: Option<bool>,
    pub power_state: Option<String>,
    pub resize_files: Vec<u8>,
    pub upstream: Vec<Bdf>,
    pub boot_vga: bool,
    /// The kernel's IRQ for the function (`irq`), not the config register's.
    pub irq: Option<u32>,
    /// Attributes every function on a current kernel has, absent here.
    pub missing: Vec<&'static str>,
}

/// The links from a function up to its root port, and the narrowest of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkBudget {
    pub hops: Vec<LinkHop>,
    /// Index into `hops` of the slowest link, if any hop has one.
    pub bottleneck: Option<usize>,
}

/// One function on the path and the link it reports.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkHop {
    pub bdf: Bdf,
    pub port_type: Option<&'static str>,
    pub status: Option<Link>,
    pub capable: Option<Link>,
}

impl LinkHop {
    /// GB/s one way on the link this hop reports, after encoding.
    pub fn gbytes_per_s(&self) -> Option<f64> {
        let l = self.status?;
        let g = express::gbytes_per_s(l.speed_code, l.width);
        (g > 0.0).then_some(g)
    }
}

impl LinkBudget {
    /// The bottleneck's bandwidth when it is upstream of the device and slower than the
    /// device's own link: the case the seed's R9700 shows (32 GT/s to its switch,
    /// PCIe 3.0 x16 above it, so host copies stop at 15.75 GB/s).
    pub fn limited_upstream(&self) -> Option<(&LinkHop, f64)> {
        let b = self.bottleneck?;
        let own = self.hops.first()?.gbytes_per_s()?;
        let hop = self.hops.get(b)?;
        let g = hop.gbytes_per_s()?;
        (b > 0 && g < own).then_some((hop, g))
    }

    /// The slowest hop's bandwidth.
    pub fn bottleneck_gbytes_per_s(&self) -> Option<f64> {
        self.hops.get(self.bottleneck?)?.gbytes_per_s()
    }
}

impl Device {
    /// The PCI Express capability, if the function has one.
    pub fn express(&self) -> Option<&Express> {
        self.caps.caps.iter().find_map(|c| match &c.detail {
            Detail::Express(e) => Some(e.as_ref()),
            _ => None,
        })
    }

    /// Whether this is a GPU or accelerator (class 0x03xx or 0x12xx).
    pub fn is_gpu(&self) -> bool {
        gpu::is_gpu_class(self.header.class_code)
    }

    /// Why config space was not fully readable, if it was not.
    pub fn config_limited(&self) -> Option<String> {
        (self.config_readable < self.config_size).then(|| {
            format!(
                "only {} of {} bytes of config space were readable: the rest needs CAP_SYS_ADMIN (run as root, or ask rigd)",
                self.config_readable,
                self.config_size
            )
        })
    }
}

/// Reads and decodes one function.
///
/// # Errors
/// [`PciError::NoDevice`] when it does not exist; [`PciError::ShortConfig`] when its
/// `config` has fewer than the 64 bytes every reader gets; I/O errors with their path.
pub fn inspect(root: &SysfsRoot, ids: &PciIds, bdf: Bdf) -> Result<Device, PciError> {
    if !root.exists(bdf) {
        return Err(PciError::NoDevice { bdf });
    }
    let (config, config_size) = root.read_config(bdf)?;
    let readable = config.len();
    decode(root, ids, bdf, config, readable, config_size)
}

/// As [`inspect`], reading only the config registers the decoders use and keeping no
/// config bytes: what a listing needs, at a tenth of the config accesses.
///
/// # Errors
/// As [`inspect`].
pub fn inspect_summary(root: &SysfsRoot, ids: &PciIds, bdf: Bdf) -> Result<Device, PciError> {
    if !root.exists(bdf) {
        return Err(PciError::NoDevice { bdf });
    }
    let (sparse, readable, size) = root.read_config_sparse(bdf)?;
    let mut dev = decode(root, ids, bdf, sparse, readable, size)?;
    dev.config = Vec::new();
    Ok(dev)
}

/// A function's BARs alone: the header and ReBAR registers of its config, `resource`
/// and the resize files, without the other attributes, the names or the upstream walk
/// [`inspect_summary`] adds (what a held device's view shows; half its cost in the
/// disposable machine).
///
/// # Errors
/// As [`inspect`].
pub fn read_bars(root: &SysfsRoot, bdf: Bdf) -> Result<Vec<Bar>, PciError> {
    if !root.exists(bdf) {
        return Err(PciError::NoDevice { bdf });
    }
    let (config, _, _) = root.read_config_sparse(bdf)?;
    let header = header::parse_header(&config).ok_or(PciError::ShortConfig {
        bdf,
        len: config.len(),
    })?;
    let ext_caps = caps::parse_extended(&config);
    let resources = root.read_resources(bdf)?;
    Ok(merge_bars(
        &config,
        &header,
        &resources,
        &ext_caps,
        &root.resize_files(bdf),
    ))
}

fn decode(
    root: &SysfsRoot,
    ids: &PciIds,
    bdf: Bdf,
    config: Vec<u8>,
    config_readable: usize,
    config_size: usize,
) -> Result<Device, PciError> {
    let header = header::parse_header(&config).ok_or(PciError::ShortConfig {
        bdf,
        len: config.len(),
    })?;
    let caps = match header.capabilities_pointer {
        Some(p) => caps::parse_standard(&config, p),
        None => CapList::default(),
    };
    let ext_caps = caps::parse_extended(&config);
    let resources = root.read_resources(bdf)?;
    let sysfs = read_facts(root, bdf)?;
    let bars = merge_bars(&config, &header, &resources, &ext_caps, &sysfs.resize_files);
    let rom = rom(&header, resources.get(6));
    let names = names(ids, &header);
    let gpu = gpu::identify(header.vendor_id, header.device_id, header.class_code);
    let mut dev = Device {
        bdf,
        header,
        config,
        config_readable,
        config_size,
        names,
        gpu,
        bars,
        rom,
        caps,
        ext_caps,
        sysfs,
        link: LinkBudget::default(),
    };
    dev.link = link_budget(root, &dev);
    Ok(dev)
}

fn names(ids: &PciIds, h: &Header) -> Names {
    let [_, base, sub, prog] = h.class_code.to_be_bytes();
    let class = ids
        .prog_if(base, sub, prog)
        .or_else(|| ids.subclass(base, sub))
        .or_else(|| ids.class(base));
    Names {
        subsystem_vendor: ids.vendor(h.subsystem_vendor_id).map(str::to_owned),
        base_class: ids.class(base).map(str::to_owned),
        subclass: ids.subclass(base, sub).map(str::to_owned),
        prog_if: ids.prog_if(base, sub, prog).map(str::to_owned),
        vendor: ids.vendor(h.vendor_id).map(str::to_owned),
        device: ids.device(h.vendor_id, h.device_id).map(str::to_owned),
        subsystem: ids
            .subsystem(
                h.vendor_id,
                h.device_id,
                h.subsystem_vendor_id,
                h.subsystem_id,
            )
            // lspci names a subsystem that repeats the device's own ids after the device.
            .or_else(|| {
                ((h.subsystem_vendor_id, h.subsystem_id) == (h.vendor_id, h.device_id))
                    .then(|| ids.device(h.vendor_id, h.device_id))
                    .flatten()
            })
            .map(str::to_owned),
        class: class.map(str::to_owned),
    }
}

fn read_facts(root: &SysfsRoot, bdf: Bdf) -> Result<SysfsFacts, PciError> {
    let mut missing = Vec::new();
    let mut attr = |name: &'static str| -> Result<Option<String>, PciError> {
        let v = root.read_attr(bdf, name)?;
        if v.is_none() {
            missing.push(name);
        }
        Ok(v)
    };
    let driver_override = attr("driver_override")?.filter(|s| s != "(null)" && !s.is_empty());
    let numa_node = attr("numa_node")?.and_then(|s| s.parse().ok());
    let local_cpulist = attr("local_cpulist")?;
    let enabled = attr("enable")?.map(|s| s != "0");
    let power_state = attr("power_state")?;
    // Link attributes exist only for PCIe functions; their absence is not worth a line.
    let current_link_speed = root.read_attr(bdf, "current_link_speed")?;
    let current_link_width = root
        .read_attr(bdf, "current_link_width")?
        .and_then(|s| s.parse().ok());
    let max_link_speed = root.read_attr(bdf, "max_link_speed")?;
    let max_link_width = root
        .read_attr(bdf, "max_link_width")?
        .and_then(|s| s.parse().ok());
    let reset_methods = root
        .read_attr(bdf, "reset_method")?
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default();
    let boot_vga = root.read_attr(bdf, "boot_vga")?.is_some_and(|s| s == "1");
    let irq = root.read_attr(bdf, "irq")?.and_then(|s| s.parse().ok());
    Ok(SysfsFacts {
        driver: root.link_name(bdf, "driver"),
        driver_override,
        iommu_group: root.link_name(bdf, "iommu_group"),
        iommu_group_members: root.iommu_group_members(bdf),
        reset_methods,
        numa_node,
        local_cpulist,
        current_link_speed,
        current_link_width,
        max_link_speed,
        max_link_width,
        enabled,
        power_state,
        resize_files: root.resize_files(bdf),
        upstream: root.upstream(bdf),
        boot_vga,
        irq,
        missing,
    })
}

/// Merges BAR registers with the kernel's regions, the way lspci shows them: a BAR
/// whose register and region are both empty is not there.
fn merge_bars(
    cfg: &[u8],
    h: &Header,
    resources: &[Resource],
    ext_caps: &CapList,
    resize_files: &[u8],
) -> Vec<Bar> {
    let rebar: Vec<&caps::RebarEntry> = ext_caps
        .caps
        .iter()
        .filter_map(|c| match &c.detail {
            Detail::ResizableBar {
                virtual_function: false,
                entries,
            } => Some(entries.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    header::parse_bar_registers(cfg, h.header_type)
        .into_iter()
        .filter_map(|reg| {
            let i = usize::from(reg.index);
            let raw = r32(cfg, PCI_BASE_ADDRESS_0 + 4 * i).unwrap_or(0);
            let res = resources.get(i).copied().unwrap_or_default();
            if raw == 0 && res.start == 0 && res.size() == 0 {
                return None;
            }
            // A register that reads zero for a region the kernel assigned (hidden or
            // virtual BARs): take the kind from the kernel's flags, as lspci does
            // (include/linux/ioport.h IORESOURCE_IO/MEM/PREFETCH/MEM_64).
            let reg = if raw == 0 && res.start != 0 {
                header::BarRegister {
                    kind: if res.flags & IORESOURCE_IO != 0 {
                        BarKind::Io
                    } else {
                        BarKind::Memory
                    },
                    is_64bit: res.flags & IORESOURCE_MEM_64 != 0,
                    prefetchable: res.flags & IORESOURCE_PREFETCH != 0,
                    ..reg
                }
            } else {
                reg
            };
            let decode_bit = match reg.kind {
                BarKind::Memory => PCI_COMMAND_MEMORY,
                BarKind::Io => PCI_COMMAND_IO,
            };
            let rb = rebar.iter().find(|e| e.bar == reg.index);
            Some(Bar {
                index: reg.index,
                kind: reg.kind,
                is_64bit: reg.is_64bit,
                prefetchable: reg.prefetchable,
                address: if res.start != 0 {
                    res.start
                } else {
                    reg.address
                },
                size: res.size(),
                assigned: res.start != 0,
                decode_enabled: h.command & decode_bit != 0,
                is_virtual: reg.address == 0 && res.start != 0,
                resizable: rb.map(|e| e.supported.clone()).unwrap_or_default(),
                resizable_current: rb.map(|e| e.current),
                resize_file: resize_files.contains(&reg.index),
            })
        })
        .collect()
}

fn rom(h: &Header, res: Option<&Resource>) -> Option<Rom> {
    let res = res.copied().unwrap_or_default();
    if h.rom_register == 0 && res.size() == 0 {
        return None;
    }
    Some(Rom {
        address: if res.start != 0 {
            res.start
        } else {
            u64::from(h.rom_register & !0x7ff)
        },
        size: res.size(),
        enabled: h.rom_register & PCI_ROM_ADDRESS_ENABLE != 0,
        assigned: res.start != 0,
    })
}

/// Reads the link each function on the path reports: from its PCIe capability when
/// config space is readable, else from sysfs `current_link_*`.
fn link_budget(root: &SysfsRoot, dev: &Device) -> LinkBudget {
    let mut hops = vec![hop_from(dev.bdf, dev.express(), &dev.sysfs)];
    for &up in &dev.sysfs.upstream {
        // The PCIe capability lies in the first 256 bytes: read no more.
        let mut cfg = vec![0u8; PCI_CFG_SPACE_SIZE];
        let Ok(n) = root.read_config_at(up, 0, &mut cfg) else {
            continue;
        };
        cfg.truncate(n);
        let express = header::parse_header(&cfg)
            .and_then(|h| h.capabilities_pointer)
            .and_then(|p| {
                caps::parse_standard(&cfg, p)
                    .caps
                    .into_iter()
                    .find_map(|c| match c.detail {
                        Detail::Express(e) => Some(*e),
                        _ => None,
                    })
            });
        let facts = SysfsFacts {
            current_link_speed: root.read_attr(up, "current_link_speed").ok().flatten(),
            current_link_width: root
                .read_attr(up, "current_link_width")
                .ok()
                .flatten()
                .and_then(|s| s.parse().ok()),
            max_link_speed: root.read_attr(up, "max_link_speed").ok().flatten(),
            max_link_width: root
                .read_attr(up, "max_link_width")
                .ok()
                .flatten()
                .and_then(|s| s.parse().ok()),
            ..SysfsFacts::default()
        };
        hops.push(hop_from(up, express.as_ref(), &facts));
    }
    let bottleneck = hops
        .iter()
        .enumerate()
        .filter_map(|(i, h)| Some((i, h.gbytes_per_s()?)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i);
    LinkBudget { hops, bottleneck }
}

fn hop_from(bdf: Bdf, e: Option<&Express>, facts: &SysfsFacts) -> LinkHop {
    let from_sysfs = |speed: &Option<String>, width: Option<u32>| {
        Some(Link {
            speed_code: express::parse_sysfs_speed(speed.as_deref()?)?,
            width: u8::try_from(width?).ok()?,
        })
    };
    match e.filter(|e| e.has_link()) {
        Some(e) => LinkHop {
            bdf,
            port_type: Some(e.port_type_name()),
            status: Some(e.link_status()),
            capable: Some(e.link_capable()),
        },
        None => LinkHop {
            bdf,
            port_type: None,
            status: from_sysfs(&facts.current_link_speed, facts.current_link_width),
            capable: from_sysfs(&facts.max_link_speed, facts.max_link_width),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeDevice, FakeSysfs};

    #[test]
    fn read_bars_gives_the_bars_inspect_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeSysfs::new(dir.path()).expect("fake sysfs");
        let gpu = FakeDevice::new("0000:03:00.0", 0x10de, 0x2335, 0x030200)
            .with_bar64(0, 0xa000_0000, 16 << 20, false)
            .with_bar64(2, 0x1_0000_0000, 256 << 20, true)
            .with_bytes(0x100, &0x0001_0015u32.to_le_bytes())
            .with_bytes(
                0x104,
                &((8..=18).map(|n| 1u32 << (n + 4)).sum::<u32>()).to_le_bytes(),
            )
            .with_bytes(0x108, &(2u32 | (1 << 5) | (8 << 8)).to_le_bytes());
        fake.add(&gpu).expect("add");
        let root = SysfsRoot::new(fake.root());

        let bars = read_bars(&root, gpu.bdf).expect("bars");

        let full = inspect(&root, &PciIds::empty(), gpu.bdf).expect("inspect");
        assert_eq!(bars, full.bars);
        assert_eq!(bars.len(), 2);
        assert!(!bars[1].resizable.is_empty(), "{bars:?}");
        let missing = "0000:09:00.0".parse().expect("bdf");
        assert!(matches!(
            read_bars(&root, missing),
            Err(PciError::NoDevice { .. })
        ));
    }
}
