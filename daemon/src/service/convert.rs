//! Internal PCI types → wire types. Nothing else in the daemon sees proto types.

use rig_proto::v1 as pb;

use crate::pci::{
    caps::{Capability, Detail},
    device::{Bar, Device, LinkHop},
    express::{self, Express, Link},
    gpu::GpuVendor,
    header::{BarKind, Window},
};

pub fn device(d: &Device) -> pb::Device {
    let h = &d.header;
    pb::Device {
        bdf: d.bdf.to_string(),
        identity: Some(pb::Identity {
            vendor_id: h.vendor_id.into(),
            device_id: h.device_id.into(),
            subsystem_vendor_id: h.subsystem_vendor_id.into(),
            subsystem_device_id: h.subsystem_id.into(),
            revision: h.revision.into(),
            class_code: h.class_code,
            vendor_name: d.names.vendor.clone().unwrap_or_default(),
            device_name: d.names.device.clone().unwrap_or_default(),
            subsystem_name: d.names.subsystem.clone().unwrap_or_default(),
            class_name: d.names.class.clone().unwrap_or_default(),
            subsystem_vendor_name: d.names.subsystem_vendor.clone().unwrap_or_default(),
            base_class_name: d.names.base_class.clone().unwrap_or_default(),
            subclass_name: d.names.subclass.clone().unwrap_or_default(),
            prog_if_name: d.names.prog_if.clone().unwrap_or_default(),
            gpu: d.gpu.as_ref().map(|g| pb::Gpu {
                vendor: match g.vendor {
                    GpuVendor::Nvidia => "nvidia",
                    GpuVendor::Amd => "amd",
                    GpuVendor::Intel => "intel",
                }
                .to_owned(),
                chip: g.chip.to_owned(),
                family: g.family.to_owned(),
            }),
        }),
        config_access: Some(pb::ConfigAccess {
            readable: u32::try_from(d.config_readable).unwrap_or(u32::MAX),
            size: u32::try_from(d.config_size).unwrap_or(u32::MAX),
            limited_reason: d.config_limited().unwrap_or_default(),
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
        bars: d.bars.iter().map(bar).collect(),
        rom: d.rom.as_ref().map(|r| pb::Rom {
            address: r.address,
            size: r.size,
            enabled: r.enabled,
            assigned: r.assigned,
        }),
        capabilities: d.caps.caps.iter().map(capability).collect(),
        extended_capabilities: d.ext_caps.caps.iter().map(capability).collect(),
        chain_problems: d
            .caps
            .problems
            .iter()
            .chain(&d.ext_caps.problems)
            .cloned()
            .collect(),
        sysfs: Some(sysfs(d)),
        link: Some(link_budget(d)),
        config: d.config.clone(),
        bridge: h.bridge.as_ref().map(|b| pb::BridgeWindows {
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

fn window(w: &Window) -> pb::Window {
    pb::Window {
        base: w.base,
        limit: w.limit,
        enabled: w.enabled(),
        is_64bit: w.is_64bit,
    }
}

pub fn bar(b: &Bar) -> pb::Bar {
    pb::Bar {
        index: b.index.into(),
        kind: match b.kind {
            BarKind::Memory => pb::bar::Kind::Memory,
            BarKind::Io => pb::bar::Kind::Io,
        }
        .into(),
        is_64bit: b.is_64bit,
        prefetchable: b.prefetchable,
        address: b.address,
        size: b.size,
        assigned: b.assigned,
        decode_enabled: b.decode_enabled,
        r#virtual: b.is_virtual,
        resizable_sizes: b.resizable.clone(),
        resizable_current: b.resizable_current.unwrap_or(0),
        resize_file: b.resize_file,
    }
}

fn link(l: Link) -> pb::Link {
    pb::Link {
        speed: express::speed_label(l.speed_code),
        speed_gts: express::speed_gts(l.speed_code).unwrap_or(0.0),
        width: l.width.into(),
        gbytes_per_s: express::gbytes_per_s(l.speed_code, l.width),
    }
}

fn capability(c: &Capability) -> pb::Capability {
    use pb::capability::Detail as D;
    let detail = match &c.detail {
        Detail::None | Detail::Truncated => None,
        Detail::PowerManagement(p) => Some(D::PowerManagement(pb::PowerManagement {
            version: p.version.into(),
            d1: p.d1,
            d2: p.d2,
            pme_support: p.pme_support.into(),
            aux_current_ma: p.aux_current_ma.into(),
            power_state: p.power_state.into(),
            no_soft_reset: p.no_soft_reset,
            pme_enabled: p.pme_enabled,
            pme_status: p.pme_status,
        })),
        Detail::Msi(m) => Some(D::Msi(pb::Msi {
            enabled: m.enabled,
            vectors_capable: m.vectors_capable,
            vectors_enabled: m.vectors_enabled,
            is_64bit: m.is_64bit,
            per_vector_masking: m.per_vector_masking,
            address: m.address,
            data: m.data.into(),
        })),
        Detail::MsiX(x) => Some(D::Msix(pb::MsiX {
            enabled: x.enabled,
            function_masked: x.function_masked,
            table_size: x.table_size.into(),
            table_bar: x.table_bar.into(),
            table_offset: x.table_offset,
            pba_bar: x.pba_bar.into(),
            pba_offset: x.pba_offset,
        })),
        Detail::Express(e) => Some(D::Express(express_cap(e))),
        Detail::VendorSpecific { length } => Some(D::VendorSpecific(pb::VendorSpecific {
            length: (*length).into(),
        })),
        Detail::BridgeSubsystem {
            vendor_id,
            device_id,
        } => Some(D::BridgeSubsystem(pb::BridgeSubsystem {
            vendor_id: (*vendor_id).into(),
            device_id: (*device_id).into(),
        })),
        Detail::Aer(a) => Some(D::Aer(pb::Aer {
            uncorrectable_status: a.uncorrectable_status,
            uncorrectable_mask: a.uncorrectable_mask,
            uncorrectable_severity: a.uncorrectable_severity,
            correctable_status: a.correctable_status,
            correctable_mask: a.correctable_mask,
            capabilities_control: a.capabilities_control,
            first_error_pointer: a.capabilities_control & 0x1f,
        })),
        Detail::SerialNumber(s) => Some(D::SerialNumber(pb::SerialNumber {
            serial: *s,
            text: s
                .to_be_bytes()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join("-"),
        })),
        Detail::PowerBudget {
            data_select,
            data,
            system_allocated,
        } => Some(D::PowerBudget(pb::PowerBudget {
            data_select: (*data_select).into(),
            data: *data,
            system_allocated: *system_allocated,
        })),
        Detail::Vsec { id, rev, length } => Some(D::Vsec(pb::Vsec {
            vsec_id: (*id).into(),
            vsec_rev: (*rev).into(),
            length: (*length).into(),
        })),
        Detail::Acs {
            capability,
            control,
        } => Some(D::Acs(pb::Acs {
            capability: (*capability).into(),
            control: (*control).into(),
        })),
        Detail::Ari {
            capability,
            control,
        } => Some(D::Ari(pb::Ari {
            capability: (*capability).into(),
            control: (*control).into(),
            next_function: u32::from(*capability >> 8),
        })),
        Detail::SrIov(s) => Some(D::Sriov(pb::SrIov {
            capability: s.capability,
            control: s.control.into(),
            status: s.status.into(),
            initial_vfs: s.initial_vfs.into(),
            total_vfs: s.total_vfs.into(),
            num_vfs: s.num_vfs.into(),
            first_vf_offset: s.first_vf_offset.into(),
            vf_stride: s.vf_stride.into(),
            vf_device_id: s.vf_device_id.into(),
            supported_page_sizes: s.supported_page_sizes,
            system_page_size: s.system_page_size,
            vf_bars: s.vf_bars.to_vec(),
        })),
        Detail::ResizableBar {
            virtual_function,
            entries,
        } => Some(D::ResizableBar(pb::ResizableBar {
            virtual_function: *virtual_function,
            entries: entries
                .iter()
                .map(|e| pb::ResizableBarEntry {
                    bar: e.bar.into(),
                    supported_sizes: e.supported.clone(),
                    current_size: e.current,
                })
                .collect(),
        })),
        Detail::Ltr {
            max_snoop_ns,
            max_no_snoop_ns,
        } => Some(D::Ltr(pb::Ltr {
            max_snoop_ns: *max_snoop_ns,
            max_no_snoop_ns: *max_no_snoop_ns,
        })),
        Detail::Dvsec {
            vendor_id,
            revision,
            length,
            id,
        } => Some(D::Dvsec(pb::Dvsec {
            vendor_id: (*vendor_id).into(),
            revision: (*revision).into(),
            length: (*length).into(),
            dvsec_id: (*id).into(),
        })),
    };
    pb::Capability {
        offset: c.offset.into(),
        id: c.id.into(),
        version: c.version.into(),
        name: if c.detail == Detail::Truncated {
            format!("{} (truncated)", c.name())
        } else {
            c.name().to_owned()
        },
        detail,
    }
}

fn express_cap(e: &Express) -> pb::Express {
    let v2 = e.v2.unwrap_or(express::ExpressV2 {
        devcap2: 0,
        devctl2: 0,
        lnkcap2: 0,
        lnkctl2: 0,
        lnksta2: 0,
    });
    pb::Express {
        version: e.version.into(),
        port_type: e.port_type_name().to_owned(),
        port_type_raw: e.port_type.into(),
        slot_implemented: e.slot_implemented,
        interrupt_message: e.interrupt_message.into(),
        devcap: e.devcap,
        devctl: e.devctl.into(),
        devsta: e.devsta.into(),
        lnkcap: e.lnkcap,
        lnkctl: e.lnkctl.into(),
        lnksta: e.lnksta.into(),
        devcap2: v2.devcap2,
        devctl2: v2.devctl2.into(),
        lnkcap2: v2.lnkcap2,
        lnkctl2: v2.lnkctl2.into(),
        lnksta2: v2.lnksta2.into(),
        sltcap: e.sltcap,
        sltctl: e.sltctl.into(),
        sltsta: e.sltsta.into(),
        max_payload_supported: e.max_payload_supported(),
        max_payload: e.max_payload(),
        max_read_request: e.max_read_request(),
        flr_capable: e.flr_capable(),
        link_capable: e.has_link().then(|| link(e.link_capable())),
        link_status: e.has_link().then(|| link(e.link_status())),
        supported_speeds: e
            .supported_speeds()
            .into_iter()
            .map(express::speed_label)
            .collect(),
        aspm_support: (e.lnkcap >> 10) & 3,
        aspm_control: u32::from(e.lnkctl & 3),
        has_v2_registers: e.v2.is_some(),
    }
}

fn sysfs(d: &Device) -> pb::Sysfs {
    let s = &d.sysfs;
    pb::Sysfs {
        driver: s.driver.clone().unwrap_or_default(),
        driver_override: s.driver_override.clone().unwrap_or_default(),
        iommu_group: s.iommu_group.clone().unwrap_or_default(),
        iommu_group_members: s
            .iommu_group_members
            .iter()
            .map(ToString::to_string)
            .collect(),
        reset_methods: s.reset_methods.clone(),
        numa_node: s.numa_node.unwrap_or(-1),
        local_cpulist: s.local_cpulist.clone().unwrap_or_default(),
        current_link_speed: s.current_link_speed.clone().unwrap_or_default(),
        current_link_width: s.current_link_width.unwrap_or(0),
        max_link_speed: s.max_link_speed.clone().unwrap_or_default(),
        max_link_width: s.max_link_width.unwrap_or(0),
        enabled: s.enabled.unwrap_or(false),
        power_state: s.power_state.clone().unwrap_or_default(),
        resize_files: s.resize_files.iter().map(|&n| n.into()).collect(),
        upstream: s.upstream.iter().map(ToString::to_string).collect(),
        boot_vga: s.boot_vga,
        irq: s.irq.unwrap_or(0),
        missing: s.missing.iter().map(|m| (*m).to_owned()).collect(),
    }
}

fn hop(h: &LinkHop) -> pb::LinkHop {
    pb::LinkHop {
        bdf: h.bdf.to_string(),
        link: h.status.map(link),
        capable: h.capable.map(link),
    }
}

fn link_budget(d: &Device) -> pb::LinkBudget {
    let b = &d.link;
    pb::LinkBudget {
        hops: b.hops.iter().map(hop).collect(),
        bottleneck_hop: b
            .bottleneck
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0),
        bottleneck_gbytes_per_s: b.bottleneck_gbytes_per_s().unwrap_or(0.0),
        limited_by: b
            .limited_upstream()
            .map(|(h, g)| {
                let l = h
                    .status
                    .map(|l| format!("{} x{}", express::speed_label(l.speed_code), l.width));
                format!(
                    "{} ({}) at {} = {g:.2} GB/s",
                    h.bdf,
                    h.port_type.unwrap_or("bridge"),
                    l.unwrap_or_default()
                )
            })
            .unwrap_or_default(),
    }
}
