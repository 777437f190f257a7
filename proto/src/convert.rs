//! The shared vocabulary (`rig-model`) ↔ its wire form, both ways, each pair in one
//! place so the two are exact inverses: `model → wire → model` gives back what went in
//! (the property tests: `convert/tests.rs` for the decoded PCI function, over generated
//! models with every capability variant; one beside each area's pair for the others).
//!
//! Flow: rigd's `pci` decodes into `rig_model::Device` → `service` sends
//! `pb::Device::from(&device)` → `rig-client` takes it back with
//! `rig_model::Device::try_from(pb)`; the other areas go the same way, in both
//! directions where both sides send them (`take`: the take-over requests and held
//! devices; `dma`: pools, sessions and device addresses; `nv`: channel engines, rings
//! and faults; `topo`: the peer topology). The wire direction cannot fail; the way back
//! refuses what this version cannot read as a typed [`ConvertError`] (a required
//! message missing, a number too wide for its register, an enum value unknown or
//! unset), never a panic and never a silent default, unless the pair's comment says
//! what the wire's zero means. A model enum carried in an `int32` field is also a
//! [`WireEnum`], which reads the number.
//!
//! Not here: messages that carry only one side's types (rigd's outcomes and reports,
//! rig-client's listings of channels and queues), converted beside their RPCs.

use rig_model as m;

use crate::v1 as pb;

/// Why a wire message does not make a model value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    #[error("rigd sent no {field}")]
    Missing { field: &'static str },
    #[error("rigd sent {field} = {value}, wider than its {bits} bits")]
    OutOfRange {
        field: &'static str,
        value: u64,
        bits: u32,
    },
    #[error("rigd sent {field} = {value}, a value this client does not know")]
    UnknownEnum { field: &'static str, value: i32 },
    #[error("rigd sent {field}, which this session's addressing has none of")]
    Unexpected { field: &'static str },
}

type Result<T> = std::result::Result<T, ConvertError>;

/// A model enum carried in an `int32` field of the wire, as the generated enum
/// [`WireEnum::Wire`]: its `From`/`TryFrom` pair, read from and written to the number.
pub trait WireEnum: Copy + Sized {
    /// The generated enum.
    type Wire: TryFrom<i32> + From<Self> + Into<i32>;

    /// The generated enum for `self` (`.into()` gives the field's number).
    fn wire(self) -> Self::Wire {
        self.into()
    }

    /// The field's number read back: `None` for a number this version does not know,
    /// and for one the model has no value for (an UNSPECIFIED that means nothing).
    fn from_wire(v: i32) -> Option<Self>;

    /// As [`WireEnum::from_wire`], or the refusal naming `field`.
    ///
    /// # Errors
    /// [`ConvertError::UnknownEnum`].
    fn from_field(field: &'static str, value: i32) -> Result<Self> {
        Self::from_wire(value).ok_or(ConvertError::UnknownEnum { field, value })
    }
}

/// Implements [`WireEnum`] for model types whose `From`/`TryFrom` pair with the wire
/// enum is written out beside it.
macro_rules! wire_enum {
    ($($m:ty => $pb:ty),+ $(,)?) => {$(
        impl $crate::convert::WireEnum for $m {
            type Wire = $pb;

            fn from_wire(v: i32) -> Option<Self> {
                <$pb>::try_from(v).ok().and_then(|w| Self::try_from(w).ok())
            }
        }
    )+};
}

fn n8(field: &'static str, v: u32) -> Result<u8> {
    u8::try_from(v).map_err(|_| ConvertError::OutOfRange {
        field,
        value: v.into(),
        bits: 8,
    })
}

fn n16(field: &'static str, v: u32) -> Result<u16> {
    u16::try_from(v).map_err(|_| ConvertError::OutOfRange {
        field,
        value: v.into(),
        bits: 16,
    })
}

fn need<T>(field: &'static str, v: Option<T>) -> Result<T> {
    v.ok_or(ConvertError::Missing { field })
}

// ---- GPU vendor and BAR kind: the closed sets of the device model ----

impl From<m::GpuVendor> for pb::GpuVendor {
    fn from(v: m::GpuVendor) -> Self {
        match v {
            m::GpuVendor::Nvidia => Self::Nvidia,
            m::GpuVendor::Amd => Self::Amd,
            m::GpuVendor::Intel => Self::Intel,
        }
    }
}

fn gpu_vendor(v: i32) -> Result<m::GpuVendor> {
    let bad = ConvertError::UnknownEnum {
        field: "Gpu.vendor",
        value: v,
    };
    match pb::GpuVendor::try_from(v) {
        Ok(pb::GpuVendor::Nvidia) => Ok(m::GpuVendor::Nvidia),
        Ok(pb::GpuVendor::Amd) => Ok(m::GpuVendor::Amd),
        Ok(pb::GpuVendor::Intel) => Ok(m::GpuVendor::Intel),
        Ok(pb::GpuVendor::Unspecified) | Err(_) => Err(bad),
    }
}

impl From<m::BarKind> for pb::bar::Kind {
    fn from(k: m::BarKind) -> Self {
        match k {
            m::BarKind::Memory => Self::Memory,
            m::BarKind::Io => Self::Io,
        }
    }
}

fn bar_kind(v: i32) -> Result<m::BarKind> {
    match pb::bar::Kind::try_from(v) {
        Ok(pb::bar::Kind::Memory) => Ok(m::BarKind::Memory),
        Ok(pb::bar::Kind::Io) => Ok(m::BarKind::Io),
        Ok(pb::bar::Kind::Unspecified) | Err(_) => Err(ConvertError::UnknownEnum {
            field: "Bar.kind",
            value: v,
        }),
    }
}

// ---- Device ----

impl From<&m::Device> for pb::Device {
    fn from(d: &m::Device) -> Self {
        let n = &d.names;
        let h = &d.header;
        pb::Device {
            bdf: d.bdf.clone(),
            identity: Some(pb::Identity {
                vendor_id: d.vendor_id.into(),
                device_id: d.device_id.into(),
                subsystem_vendor_id: d.subsystem_vendor_id.into(),
                subsystem_device_id: d.subsystem_device_id.into(),
                revision: d.revision.into(),
                class_code: d.class_code,
                vendor_name: n.vendor.clone(),
                device_name: n.device.clone(),
                subsystem_name: n.subsystem.clone(),
                class_name: n.class.clone(),
                gpu: d.gpu.as_ref().map(|g| pb::Gpu {
                    vendor: pb::GpuVendor::from(g.vendor).into(),
                    chip: g.chip.clone(),
                    family: g.family.clone(),
                }),
                subsystem_vendor_name: n.subsystem_vendor.clone(),
                base_class_name: n.base_class.clone(),
                subclass_name: n.subclass.clone(),
                prog_if_name: n.prog_if.clone(),
            }),
            config_access: Some(pb::ConfigAccess {
                readable: d.config_access.readable,
                size: d.config_access.size,
                limited_reason: d.config_access.limited.clone(),
            }),
            header: Some(pb::Header {
                header_type: h.header_type.into(),
                multifunction: h.multifunction,
                command: h.command.into(),
                status: h.status.into(),
                cache_line_size: h.cache_line_size.into(),
                latency_timer: h.latency_timer.into(),
                interrupt_line: h.interrupt_line.into(),
                interrupt_pin: h.interrupt_pin.into(),
                bist: h.bist.into(),
            }),
            bars: d.bars.iter().map(pb::Bar::from).collect(),
            rom: d.rom.as_ref().map(|r| pb::Rom {
                address: r.address,
                size: r.size,
                enabled: r.enabled,
                assigned: r.assigned,
            }),
            capabilities: d.capabilities.iter().map(capability).collect(),
            extended_capabilities: d.extended_capabilities.iter().map(capability).collect(),
            chain_problems: d.chain_problems.clone(),
            sysfs: Some(sysfs(&d.sysfs)),
            link: Some(link_budget(&d.link)),
            config: d.config.clone(),
            bridge: d.bridge.as_ref().map(|b| pb::BridgeWindows {
                primary_bus: b.primary_bus.into(),
                secondary_bus: b.secondary_bus.into(),
                subordinate_bus: b.subordinate_bus.into(),
                io: Some(window(&b.io)),
                memory: Some(window(&b.memory)),
                prefetchable: Some(window(&b.prefetchable)),
                secondary_status: b.secondary_status.into(),
                bridge_control: b.bridge_control.into(),
            }),
        }
    }
}

impl TryFrom<pb::Device> for m::Device {
    type Error = ConvertError;

    fn try_from(d: pb::Device) -> Result<Self> {
        let id = need("Device.identity", d.identity)?;
        let h = need("Device.header", d.header)?;
        let ca = need("Device.config_access", d.config_access)?;
        Ok(m::Device {
            bdf: d.bdf,
            vendor_id: n16("Identity.vendor_id", id.vendor_id)?,
            device_id: n16("Identity.device_id", id.device_id)?,
            subsystem_vendor_id: n16("Identity.subsystem_vendor_id", id.subsystem_vendor_id)?,
            subsystem_device_id: n16("Identity.subsystem_device_id", id.subsystem_device_id)?,
            revision: n8("Identity.revision", id.revision)?,
            class_code: id.class_code,
            names: m::Names {
                vendor: id.vendor_name,
                device: id.device_name,
                subsystem: id.subsystem_name,
                class: id.class_name,
                subsystem_vendor: id.subsystem_vendor_name,
                base_class: id.base_class_name,
                subclass: id.subclass_name,
                prog_if: id.prog_if_name,
            },
            gpu: id
                .gpu
                .map(|g| {
                    Ok::<_, ConvertError>(m::Gpu {
                        vendor: gpu_vendor(g.vendor)?,
                        chip: g.chip,
                        family: g.family,
                    })
                })
                .transpose()?,
            config_access: m::ConfigAccess {
                readable: ca.readable,
                size: ca.size,
                limited: ca.limited_reason,
            },
            header: m::Header {
                header_type: n8("Header.header_type", h.header_type)?,
                multifunction: h.multifunction,
                command: n16("Header.command", h.command)?,
                status: n16("Header.status", h.status)?,
                cache_line_size: n8("Header.cache_line_size", h.cache_line_size)?,
                latency_timer: n8("Header.latency_timer", h.latency_timer)?,
                interrupt_line: n8("Header.interrupt_line", h.interrupt_line)?,
                interrupt_pin: n8("Header.interrupt_pin", h.interrupt_pin)?,
                bist: n8("Header.bist", h.bist)?,
            },
            bridge: d
                .bridge
                .map(|b| {
                    Ok::<_, ConvertError>(m::Bridge {
                        primary_bus: n8("BridgeWindows.primary_bus", b.primary_bus)?,
                        secondary_bus: n8("BridgeWindows.secondary_bus", b.secondary_bus)?,
                        subordinate_bus: n8("BridgeWindows.subordinate_bus", b.subordinate_bus)?,
                        io: window_back("BridgeWindows.io", b.io)?,
                        memory: window_back("BridgeWindows.memory", b.memory)?,
                        prefetchable: window_back("BridgeWindows.prefetchable", b.prefetchable)?,
                        secondary_status: n16(
                            "BridgeWindows.secondary_status",
                            b.secondary_status,
                        )?,
                        bridge_control: n16("BridgeWindows.bridge_control", b.bridge_control)?,
                    })
                })
                .transpose()?,
            bars: d
                .bars
                .into_iter()
                .map(m::Bar::try_from)
                .collect::<Result<_>>()?,
            rom: d.rom.map(|r| m::Rom {
                address: r.address,
                size: r.size,
                enabled: r.enabled,
                assigned: r.assigned,
            }),
            capabilities: d
                .capabilities
                .into_iter()
                .map(capability_back)
                .collect::<Result<_>>()?,
            extended_capabilities: d
                .extended_capabilities
                .into_iter()
                .map(capability_back)
                .collect::<Result<_>>()?,
            chain_problems: d.chain_problems,
            sysfs: sysfs_back(need("Device.sysfs", d.sysfs)?)?,
            link: link_budget_back(need("Device.link", d.link)?)?,
            config: d.config,
        })
    }
}

fn window(w: &m::Window) -> pb::Window {
    pb::Window {
        base: w.base,
        limit: w.limit,
        enabled: w.enabled,
        is_64bit: w.is_64bit,
    }
}

fn window_back(field: &'static str, w: Option<pb::Window>) -> Result<m::Window> {
    let w = need(field, w)?;
    Ok(m::Window {
        base: w.base,
        limit: w.limit,
        enabled: w.enabled,
        is_64bit: w.is_64bit,
    })
}

// ---- BARs (also what a held device shows) ----

impl From<&m::Bar> for pb::Bar {
    fn from(b: &m::Bar) -> Self {
        pb::Bar {
            index: b.index.into(),
            kind: pb::bar::Kind::from(b.kind).into(),
            is_64bit: b.is_64bit,
            prefetchable: b.prefetchable,
            address: b.address,
            size: b.size,
            assigned: b.assigned,
            decode_enabled: b.decode_enabled,
            r#virtual: b.is_virtual,
            resizable_sizes: b.resizable_sizes.clone(),
            resizable_current: b.resizable_current,
            resize_file: b.resize_file,
        }
    }
}

impl TryFrom<pb::Bar> for m::Bar {
    type Error = ConvertError;

    fn try_from(b: pb::Bar) -> Result<Self> {
        Ok(m::Bar {
            index: n8("Bar.index", b.index)?,
            kind: bar_kind(b.kind)?,
            is_64bit: b.is_64bit,
            prefetchable: b.prefetchable,
            address: b.address,
            size: b.size,
            assigned: b.assigned,
            decode_enabled: b.decode_enabled,
            is_virtual: b.r#virtual,
            resizable_sizes: b.resizable_sizes,
            resizable_current: b.resizable_current,
            resize_file: b.resize_file,
        })
    }
}

// ---- Links, sysfs and the link budget ----

fn link(l: &m::Link) -> pb::Link {
    pb::Link {
        speed: l.speed.clone(),
        speed_gts: l.speed_gts,
        width: l.width.into(),
        gbytes_per_s: l.gbytes_per_s,
    }
}

fn link_back(l: pb::Link) -> Result<m::Link> {
    Ok(m::Link {
        speed: l.speed,
        speed_gts: l.speed_gts,
        width: n8("Link.width", l.width)?,
        gbytes_per_s: l.gbytes_per_s,
    })
}

fn sysfs(s: &m::Sysfs) -> pb::Sysfs {
    pb::Sysfs {
        driver: s.driver.clone(),
        driver_override: s.driver_override.clone(),
        iommu_group: s.iommu_group.clone(),
        iommu_group_members: s.iommu_group_members.clone(),
        reset_methods: s.reset_methods.clone(),
        numa_node: s.numa_node,
        local_cpulist: s.local_cpulist.clone(),
        current_link_speed: s.current_link_speed.clone(),
        current_link_width: s.current_link_width,
        max_link_speed: s.max_link_speed.clone(),
        max_link_width: s.max_link_width,
        enabled: s.enabled,
        power_state: s.power_state.clone(),
        resize_files: s.resize_files.iter().map(|&n| n.into()).collect(),
        upstream: s.upstream.clone(),
        boot_vga: s.boot_vga,
        missing: s.missing.clone(),
        irq: s.irq,
        physfn: s.physfn.clone(),
    }
}

fn sysfs_back(s: pb::Sysfs) -> Result<m::Sysfs> {
    Ok(m::Sysfs {
        driver: s.driver,
        driver_override: s.driver_override,
        iommu_group: s.iommu_group,
        iommu_group_members: s.iommu_group_members,
        reset_methods: s.reset_methods,
        numa_node: s.numa_node,
        local_cpulist: s.local_cpulist,
        current_link_speed: s.current_link_speed,
        current_link_width: s.current_link_width,
        max_link_speed: s.max_link_speed,
        max_link_width: s.max_link_width,
        enabled: s.enabled,
        power_state: s.power_state,
        resize_files: s
            .resize_files
            .into_iter()
            .map(|n| n8("Sysfs.resize_files", n))
            .collect::<Result<_>>()?,
        upstream: s.upstream,
        boot_vga: s.boot_vga,
        irq: s.irq,
        missing: s.missing,
        physfn: s.physfn,
    })
}

fn link_budget(b: &m::LinkBudget) -> pb::LinkBudget {
    pb::LinkBudget {
        hops: b
            .hops
            .iter()
            .map(|h| pb::LinkHop {
                bdf: h.bdf.clone(),
                link: h.link.as_ref().map(link),
                capable: h.capable.as_ref().map(link),
            })
            .collect(),
        bottleneck_hop: b.bottleneck_hop,
        bottleneck_gbytes_per_s: b.bottleneck_gbytes_per_s,
        limited_by: b.limited_by.clone(),
        shared: b.shared.iter().map(shared_hop).collect(),
        contended_gbytes_per_s: b.contended_gbytes_per_s,
    }
}

fn link_budget_back(b: pb::LinkBudget) -> Result<m::LinkBudget> {
    Ok(m::LinkBudget {
        hops: b
            .hops
            .into_iter()
            .map(|h| {
                Ok(m::LinkHop {
                    bdf: h.bdf,
                    link: h.link.map(link_back).transpose()?,
                    capable: h.capable.map(link_back).transpose()?,
                })
            })
            .collect::<Result<_>>()?,
        bottleneck_hop: b.bottleneck_hop,
        bottleneck_gbytes_per_s: b.bottleneck_gbytes_per_s,
        limited_by: b.limited_by,
        shared: b.shared.into_iter().map(shared_hop_back).collect(),
        contended_gbytes_per_s: b.contended_gbytes_per_s,
    })
}

/// A hop a GPU shares with others (the link budget's and the topology's).
fn shared_hop(h: &m::SharedHop) -> pb::SharedHop {
    pb::SharedHop {
        hop: h.hop,
        bdf: h.bdf.clone(),
        with: h.with.clone(),
        gbytes_per_s_each: h.gbytes_per_s_each,
    }
}

fn shared_hop_back(h: pb::SharedHop) -> m::SharedHop {
    m::SharedHop {
        hop: h.hop,
        bdf: h.bdf,
        with: h.with,
        gbytes_per_s_each: h.gbytes_per_s_each,
    }
}

mod caps;
pub mod dma;
pub mod nv;
pub mod take;
mod topo;
use caps::{capability, capability_back};

#[cfg(test)]
mod tests;
