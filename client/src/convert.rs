//! Wire types → the library's own types. Values the wire carries as defaults (empty
//! strings, zero) become `None` where "absent" is what they mean.

use rig_proto::v1 as pb;

use crate::model::*;

fn opt(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

// CAST: the daemon fills these wire fields from narrower registers; a value that does
// not fit means a newer daemon widened the field, and saturating shows that plainly.
fn n8(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

fn n16(v: u32) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

pub fn version(v: pb::VersionReply) -> Version {
    Version {
        daemon: v.daemon_version,
        api: v.api_version,
        sysfs_root: v.sysfs_root,
    }
}

pub fn device(d: pb::Device) -> Device {
    let id = d.identity.unwrap_or_default();
    let h = d.header.unwrap_or_default();
    let ca = d.config_access.unwrap_or_default();
    Device {
        bdf: d.bdf,
        vendor_id: n16(id.vendor_id),
        device_id: n16(id.device_id),
        subsystem_vendor_id: n16(id.subsystem_vendor_id),
        subsystem_device_id: n16(id.subsystem_device_id),
        revision: n8(id.revision),
        class_code: id.class_code,
        names: Names {
            vendor: opt(id.vendor_name),
            device: opt(id.device_name),
            subsystem: opt(id.subsystem_name),
            class: opt(id.class_name),
            subsystem_vendor: opt(id.subsystem_vendor_name),
            base_class: opt(id.base_class_name),
            subclass: opt(id.subclass_name),
            prog_if: opt(id.prog_if_name),
        },
        gpu: id.gpu.map(|g| Gpu {
            vendor: g.vendor,
            chip: g.chip,
            family: g.family,
        }),
        config_access: ConfigAccess {
            readable: ca.readable,
            size: ca.size,
            limited: opt(ca.limited_reason),
        },
        header: Header {
            header_type: n8(h.header_type),
            multifunction: h.multifunction,
            command: n16(h.command),
            status: n16(h.status),
            cache_line_size: n8(h.cache_line_size),
            latency_timer: n8(h.latency_timer),
            interrupt_line: n8(h.interrupt_line),
            interrupt_pin: n8(h.interrupt_pin),
            bist: n8(h.bist),
        },
        bridge: d.bridge.map(|b| Bridge {
            primary_bus: n8(b.primary_bus),
            secondary_bus: n8(b.secondary_bus),
            subordinate_bus: n8(b.subordinate_bus),
            io: window(b.io),
            memory: window(b.memory),
            prefetchable: window(b.prefetchable),
            secondary_status: n16(b.secondary_status),
            bridge_control: n16(b.bridge_control),
        }),
        bars: d.bars.into_iter().map(bar).collect(),
        rom: d.rom.map(|r| Rom {
            address: r.address,
            size: r.size,
            enabled: r.enabled,
            assigned: r.assigned,
        }),
        capabilities: d.capabilities.into_iter().map(capability).collect(),
        extended_capabilities: d
            .extended_capabilities
            .into_iter()
            .map(capability)
            .collect(),
        chain_problems: d.chain_problems,
        sysfs: sysfs(d.sysfs.unwrap_or_default()),
        link: link_budget(d.link.unwrap_or_default()),
        config: d.config,
    }
}

fn window(w: Option<pb::Window>) -> Window {
    let w = w.unwrap_or_default();
    Window {
        base: w.base,
        limit: w.limit,
        enabled: w.enabled,
        is_64bit: w.is_64bit,
    }
}

pub fn bar(b: pb::Bar) -> Bar {
    Bar {
        index: n8(b.index),
        kind: if b.kind() == pb::bar::Kind::Io {
            BarKind::Io
        } else {
            BarKind::Memory
        },
        is_64bit: b.is_64bit,
        prefetchable: b.prefetchable,
        address: b.address,
        size: b.size,
        assigned: b.assigned,
        decode_enabled: b.decode_enabled,
        is_virtual: b.r#virtual,
        resizable_current: (!b.resizable_sizes.is_empty()).then_some(b.resizable_current),
        resizable_sizes: b.resizable_sizes,
        resize_file: b.resize_file,
    }
}

fn link(l: pb::Link) -> Link {
    Link {
        speed: l.speed,
        speed_gts: l.speed_gts,
        width: n8(l.width),
        gbytes_per_s: l.gbytes_per_s,
    }
}

fn capability(c: pb::Capability) -> Capability {
    use pb::capability::Detail as D;
    let detail = c.detail.map(|d| match d {
        D::PowerManagement(p) => CapDetail::PowerManagement {
            version: n8(p.version),
            d1: p.d1,
            d2: p.d2,
            pme_support: n8(p.pme_support),
            aux_current_ma: n16(p.aux_current_ma),
            power_state: n8(p.power_state),
            no_soft_reset: p.no_soft_reset,
            pme_enabled: p.pme_enabled,
            pme_status: p.pme_status,
        },
        D::Msi(m) => CapDetail::Msi {
            enabled: m.enabled,
            vectors_capable: m.vectors_capable,
            vectors_enabled: m.vectors_enabled,
            is_64bit: m.is_64bit,
            per_vector_masking: m.per_vector_masking,
            address: m.address,
            data: n16(m.data),
        },
        D::Msix(x) => CapDetail::MsiX {
            enabled: x.enabled,
            function_masked: x.function_masked,
            table_size: n16(x.table_size),
            table_bar: n8(x.table_bar),
            table_offset: x.table_offset,
            pba_bar: n8(x.pba_bar),
            pba_offset: x.pba_offset,
        },
        D::Express(e) => CapDetail::Express(Box::new(express(e))),
        D::VendorSpecific(v) => CapDetail::VendorSpecific {
            length: n8(v.length),
        },
        D::BridgeSubsystem(b) => CapDetail::BridgeSubsystem {
            vendor_id: n16(b.vendor_id),
            device_id: n16(b.device_id),
        },
        D::Aer(a) => CapDetail::Aer {
            uncorrectable_status: a.uncorrectable_status,
            uncorrectable_mask: a.uncorrectable_mask,
            uncorrectable_severity: a.uncorrectable_severity,
            correctable_status: a.correctable_status,
            correctable_mask: a.correctable_mask,
            capabilities_control: a.capabilities_control,
            first_error_pointer: n8(a.first_error_pointer),
        },
        D::SerialNumber(s) => CapDetail::SerialNumber {
            serial: s.serial,
            text: s.text,
        },
        D::PowerBudget(p) => CapDetail::PowerBudget {
            data_select: n8(p.data_select),
            data: p.data,
            system_allocated: p.system_allocated,
        },
        D::Vsec(v) => CapDetail::Vsec {
            vsec_id: n16(v.vsec_id),
            vsec_rev: n8(v.vsec_rev),
            length: n16(v.length),
        },
        D::Acs(a) => CapDetail::Acs {
            capability: n16(a.capability),
            control: n16(a.control),
        },
        D::Ari(a) => CapDetail::Ari {
            capability: n16(a.capability),
            control: n16(a.control),
            next_function: n8(a.next_function),
        },
        D::Sriov(s) => CapDetail::SrIov(Box::new(SrIov {
            capability: s.capability,
            control: n16(s.control),
            status: n16(s.status),
            initial_vfs: n16(s.initial_vfs),
            total_vfs: n16(s.total_vfs),
            num_vfs: n16(s.num_vfs),
            first_vf_offset: n16(s.first_vf_offset),
            vf_stride: n16(s.vf_stride),
            vf_device_id: n16(s.vf_device_id),
            supported_page_sizes: s.supported_page_sizes,
            system_page_size: s.system_page_size,
            vf_bars: s.vf_bars,
        })),
        D::ResizableBar(r) => CapDetail::ResizableBar {
            virtual_function: r.virtual_function,
            entries: r
                .entries
                .into_iter()
                .map(|e| RebarEntry {
                    bar: n8(e.bar),
                    supported_sizes: e.supported_sizes,
                    current_size: e.current_size,
                })
                .collect(),
        },
        D::Ltr(l) => CapDetail::Ltr {
            max_snoop_ns: l.max_snoop_ns,
            max_no_snoop_ns: l.max_no_snoop_ns,
        },
        D::Dvsec(d) => CapDetail::Dvsec {
            vendor_id: n16(d.vendor_id),
            revision: n8(d.revision),
            length: n16(d.length),
            dvsec_id: n16(d.dvsec_id),
        },
    });
    Capability {
        offset: n16(c.offset),
        id: n16(c.id),
        version: n8(c.version),
        name: c.name,
        detail,
    }
}

fn express(e: pb::Express) -> Express {
    Express {
        version: n8(e.version),
        port_type: e.port_type,
        slot_implemented: e.slot_implemented,
        interrupt_message: n8(e.interrupt_message),
        devcap: e.devcap,
        devctl: n16(e.devctl),
        devsta: n16(e.devsta),
        lnkcap: e.lnkcap,
        lnkctl: n16(e.lnkctl),
        lnksta: n16(e.lnksta),
        sltcap: e.sltcap,
        sltctl: n16(e.sltctl),
        sltsta: n16(e.sltsta),
        v2: e.has_v2_registers.then(|| ExpressV2 {
            devcap2: e.devcap2,
            devctl2: n16(e.devctl2),
            lnkcap2: e.lnkcap2,
            lnkctl2: n16(e.lnkctl2),
            lnksta2: n16(e.lnksta2),
        }),
        max_payload_supported: e.max_payload_supported,
        max_payload: e.max_payload,
        max_read_request: e.max_read_request,
        flr_capable: e.flr_capable,
        link_capable: e.link_capable.map(link),
        link_status: e.link_status.map(link),
        supported_speeds: e.supported_speeds,
        aspm_support: n8(e.aspm_support),
        aspm_control: n8(e.aspm_control),
    }
}

fn sysfs(s: pb::Sysfs) -> Sysfs {
    Sysfs {
        driver: opt(s.driver),
        driver_override: opt(s.driver_override),
        iommu_group: opt(s.iommu_group),
        iommu_group_members: s.iommu_group_members,
        reset_methods: s.reset_methods,
        numa_node: (s.numa_node >= 0).then_some(s.numa_node),
        local_cpulist: opt(s.local_cpulist),
        current_link_speed: opt(s.current_link_speed),
        current_link_width: (s.current_link_width != 0).then_some(s.current_link_width),
        max_link_speed: opt(s.max_link_speed),
        max_link_width: (s.max_link_width != 0).then_some(s.max_link_width),
        enabled: s.enabled,
        power_state: opt(s.power_state),
        resize_files: s.resize_files.into_iter().map(n8).collect(),
        upstream: s.upstream,
        boot_vga: s.boot_vga,
        irq: (s.irq != 0).then_some(s.irq),
        missing: s.missing,
    }
}

fn link_budget(b: pb::LinkBudget) -> LinkBudget {
    let any = b.hops.iter().any(|h| h.link.is_some());
    LinkBudget {
        hops: b
            .hops
            .into_iter()
            .map(|h| LinkHop {
                bdf: h.bdf,
                link: h.link.map(link),
                capable: h.capable.map(link),
            })
            .collect(),
        bottleneck_hop: any.then_some(b.bottleneck_hop),
        bottleneck_gbytes_per_s: any.then_some(b.bottleneck_gbytes_per_s),
        limited_by: opt(b.limited_by),
    }
}
