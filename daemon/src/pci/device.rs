//! One PCI function, fully described: config space decoded, sysfs facts, names, and
//! the link budget up to its root port, assembled into the one model of a decoded
//! function, [`rig_model::Device`].
//!
//! Flow: `sysfs` (files) → `header`/`caps`/`express` (pure decoders) → here (merged with
//! sysfs and pci.ids, normalised: absent is `None`, never an empty string or a -1) →
//! `service`, which puts the model on the wire with `rig-proto`'s conversion.
//! Not here: the decoders' register layouts (`header`, `caps`, `express`), which build
//! the model's header, capabilities and links themselves.

pub use rig_model::{Bar, Device};
use rig_model::{
    BarKind, CapDetail, ConfigAccess, Express, Gpu, Link, LinkBudget, LinkHop, Names, RebarEntry,
    Rom, Sysfs,
};

use super::{
    Bdf, PciError,
    caps::{self, CapList},
    express, gpu,
    header::{self, Header},
    ids::PciIds,
    regs::*,
    sysfs::{Resource, SysfsRoot},
};

const IORESOURCE_IO: u64 = 0x100;
const IORESOURCE_PREFETCH: u64 = 0x2000;
const IORESOURCE_MEM_64: u64 = 0x0010_0000;

/// Attributes sysfs gives beside config space, as read (before they join the model).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct SysfsFacts {
    driver: Option<String>,
    driver_override: Option<String>,
    iommu_group: Option<String>,
    iommu_group_members: Vec<Bdf>,
    reset_methods: Vec<String>,
    numa_node: Option<i32>,
    local_cpulist: Option<String>,
    current_link_speed: Option<String>,
    current_link_width: Option<u32>,
    max_link_speed: Option<String>,
    max_link_width: Option<u32>,
    enabled: Option<bool>,
    power_state: Option<String>,
    resize_files: Vec<u8>,
    upstream: Vec<Bdf>,
    boot_vga: bool,
    /// The kernel's IRQ for the function (`irq`), not the config register's.
    irq: Option<u32>,
    /// An SR-IOV virtual function's physical function (the `physfn` link).
    physfn: Option<String>,
    /// Attributes every function on a current kernel has, absent here.
    missing: Vec<&'static str>,
}

/// One function on the path and the link it reports.
#[derive(Debug, Clone, PartialEq)]
struct Hop {
    bdf: Bdf,
    port_type: Option<String>,
    status: Option<Link>,
    capable: Option<Link>,
}

impl Hop {
    /// GB/s one way on the link this hop reports, after encoding; `None` for a speed
    /// without a bandwidth (a reserved speed code).
    fn gbytes_per_s(&self) -> Option<f64> {
        let g = self.status.as_ref()?.gbytes_per_s;
        (g > 0.0).then_some(g)
    }
}

/// Why config space was not fully readable, if it was not.
fn config_limited(readable: usize, size: usize) -> Option<String> {
    (readable < size).then(|| {
        format!(
            "only {readable} of {size} bytes of config space were readable: the rest needs CAP_SYS_ADMIN (run as root, or ask rigd)"
        )
    })
}

/// `Some` only for a non-empty value: the model's absent is `None`, never "".
fn present(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
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
    let facts = read_facts(root, bdf)?;
    let bars = merge_bars(&config, &header, &resources, &ext_caps, &facts.resize_files);
    let own_express = caps.caps.iter().find_map(|c| match &c.detail {
        Some(CapDetail::Express(e)) => Some(e.as_ref()),
        _ => None,
    });
    let link = link_budget(root, bdf, own_express, &facts);
    let h = &header;
    Ok(Device {
        bdf: bdf.to_string(),
        vendor_id: h.vendor_id,
        device_id: h.device_id,
        subsystem_vendor_id: h.subsystem_vendor_id,
        subsystem_device_id: h.subsystem_id,
        revision: h.revision,
        class_code: h.class_code,
        names: names(ids, h),
        gpu: gpu::identify(h.vendor_id, h.device_id, h.class_code).map(|g| Gpu {
            vendor: g.vendor,
            chip: g.chip.to_owned(),
            family: g.family.to_owned(),
        }),
        config_access: ConfigAccess {
            readable: u32::try_from(config_readable).unwrap_or(u32::MAX),
            size: u32::try_from(config_size).unwrap_or(u32::MAX),
            limited: config_limited(config_readable, config_size),
        },
        header: h.registers.clone(),
        bridge: h.bridge.clone(),
        bars,
        rom: rom(h, resources.get(6)),
        capabilities: caps.caps,
        extended_capabilities: ext_caps.caps,
        chain_problems: caps.problems.into_iter().chain(ext_caps.problems).collect(),
        sysfs: sysfs(facts),
        link,
        config,
    })
}

fn sysfs(f: SysfsFacts) -> Sysfs {
    Sysfs {
        driver: present(f.driver),
        driver_override: present(f.driver_override),
        iommu_group: present(f.iommu_group),
        iommu_group_members: f.iommu_group_members.iter().map(Bdf::to_string).collect(),
        reset_methods: f.reset_methods,
        // sysfs says -1 for "no NUMA node": absent, not a node.
        numa_node: f.numa_node.filter(|&n| n >= 0),
        local_cpulist: present(f.local_cpulist),
        current_link_speed: present(f.current_link_speed),
        current_link_width: f.current_link_width.filter(|&w| w != 0),
        max_link_speed: present(f.max_link_speed),
        max_link_width: f.max_link_width.filter(|&w| w != 0),
        enabled: f.enabled.unwrap_or(false),
        power_state: present(f.power_state),
        resize_files: f.resize_files,
        upstream: f.upstream.iter().map(Bdf::to_string).collect(),
        boot_vga: f.boot_vga,
        // IRQ 0 is "none assigned" (lspci shows no IRQ line for it).
        irq: f.irq.filter(|&i| i != 0),
        missing: f.missing.iter().map(|m| (*m).to_owned()).collect(),
        physfn: f.physfn,
    }
}

fn names(ids: &PciIds, h: &Header) -> Names {
    let [_, base, sub, prog] = h.class_code.to_be_bytes();
    let class = ids
        .prog_if(base, sub, prog)
        .or_else(|| ids.subclass(base, sub))
        .or_else(|| ids.class(base));
    let own = |s: Option<&str>| present(s.map(str::to_owned));
    Names {
        subsystem_vendor: own(ids.vendor(h.subsystem_vendor_id)),
        base_class: own(ids.class(base)),
        subclass: own(ids.subclass(base, sub)),
        prog_if: own(ids.prog_if(base, sub, prog)),
        vendor: own(ids.vendor(h.vendor_id)),
        device: own(ids.device(h.vendor_id, h.device_id)),
        subsystem: own(ids
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
            })),
        class: own(class),
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
        physfn: root.link_name(bdf, "physfn"),
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
    let rebar: Vec<&RebarEntry> = ext_caps
        .caps
        .iter()
        .filter_map(|c| match &c.detail {
            Some(CapDetail::ResizableBar {
                virtual_function: false,
                entries,
            }) => Some(entries.iter()),
            _ => None,
        })
        .flatten()
        .collect();
    header::parse_bar_registers(cfg, h.registers.header_type)
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
                decode_enabled: h.registers.command & decode_bit != 0,
                is_virtual: reg.address == 0 && res.start != 0,
                resizable_sizes: rb.map(|e| e.supported_sizes.clone()).unwrap_or_default(),
                resizable_current: rb.map(|e| e.current_size),
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
fn link_budget(
    root: &SysfsRoot,
    bdf: Bdf,
    own: Option<&Express>,
    facts: &SysfsFacts,
) -> LinkBudget {
    let mut hops = vec![hop_from(bdf, own, facts)];
    for &up in &facts.upstream {
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
                        Some(CapDetail::Express(e)) => Some(*e),
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
    budget(&hops, bottleneck)
}

/// The model's view of the hops. The bottleneck's fields are set whenever any hop
/// reports a link, as rig has always shown them: index 0 and 0 GB/s when every link
/// that is reported runs at a speed without a bandwidth (a reserved speed code).
fn budget(hops: &[Hop], bottleneck: Option<usize>) -> LinkBudget {
    let any = hops.iter().any(|h| h.status.is_some());
    let own = hops.first().and_then(Hop::gbytes_per_s);
    let slowest = bottleneck.and_then(|b| Some((b, hops.get(b)?, hops.get(b)?.gbytes_per_s()?)));
    let limited_by = slowest
        .filter(|&(b, _, g)| b > 0 && own.is_some_and(|own| g < own))
        .map(|(_, h, g)| {
            let l = h
                .status
                .as_ref()
                .map(|l| format!("{} x{}", l.speed, l.width));
            format!(
                "{} ({}) at {} = {g:.2} GB/s",
                h.bdf,
                h.port_type.as_deref().unwrap_or("bridge"),
                l.unwrap_or_default()
            )
        });
    LinkBudget {
        hops: hops
            .iter()
            .map(|h| LinkHop {
                bdf: h.bdf.to_string(),
                link: h.status.clone(),
                capable: h.capable.clone(),
            })
            .collect(),
        bottleneck_hop: any.then(|| bottleneck.and_then(|i| u32::try_from(i).ok()).unwrap_or(0)),
        bottleneck_gbytes_per_s: any.then(|| slowest.map_or(0.0, |(_, _, g)| g)),
        limited_by,
        // Filled by `share`, which sees the other GPUs.
        shared: Vec::new(),
        contended_gbytes_per_s: None,
    }
}

fn hop_from(bdf: Bdf, e: Option<&Express>, facts: &SysfsFacts) -> Hop {
    let from_sysfs = |speed: &Option<String>, width: Option<u32>| {
        Some(express::link(
            express::parse_sysfs_speed(speed.as_deref()?)?,
            u8::try_from(width?).ok()?,
        ))
    };
    // A function without a link (an integrated endpoint) reports none in its capability.
    match e.filter(|e| e.link_status.is_some()) {
        Some(e) => Hop {
            bdf,
            port_type: Some(e.port_type.clone()),
            status: e.link_status.clone(),
            capable: e.link_capable.clone(),
        },
        None => Hop {
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
        assert!(!bars[1].resizable_sizes.is_empty(), "{bars:?}");
        let missing = "0000:09:00.0".parse().expect("bdf");
        assert!(matches!(
            read_bars(&root, missing),
            Err(PciError::NoDevice { .. })
        ));
    }

    #[test]
    fn a_virtual_function_names_its_physical_function_and_a_pf_names_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeSysfs::new(dir.path()).expect("fake sysfs");
        let pf = FakeDevice::new("0000:02:00.0", 0x1b36, 0x0010, 0x010802).with_driver("nvme");
        fake.add(&pf).expect("add the PF");
        let vf = FakeDevice::new("0000:02:00.1", 0x1b36, 0x0010, 0x010802)
            .virtfn_of("0000:02:00.0", 0)
            .in_group(13);
        fake.add(&vf).expect("add the VF");
        let root = SysfsRoot::new(fake.root());
        let got = inspect(&root, &PciIds::empty(), vf.bdf).expect("inspect the VF");
        assert_eq!(got.sysfs.physfn.as_deref(), Some("0000:02:00.0"));
        let got = inspect(&root, &PciIds::empty(), pf.bdf).expect("inspect the PF");
        assert_eq!(got.sysfs.physfn, None);
    }
}
