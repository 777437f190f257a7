use proptest::{collection::vec, option, prelude::*};
use rig_model as m;

use super::*;

fn text() -> impl Strategy<Value = String> {
    "\\PC{0,12}"
}

fn some_text() -> impl Strategy<Value = Option<String>> {
    option::of(text())
}

/// Finite, so that `==` means equal (a NaN is never equal to itself).
fn real() -> impl Strategy<Value = f64> {
    -1.0e12..1.0e12f64
}

fn link() -> impl Strategy<Value = m::Link> {
    (text(), real(), any::<u8>(), real()).prop_map(|(speed, speed_gts, width, gbytes_per_s)| {
        m::Link {
            speed,
            speed_gts,
            width,
            gbytes_per_s,
        }
    })
}

fn express() -> impl Strategy<Value = m::Express> {
    let regs = (
        any::<u8>(),
        text(),
        any::<bool>(),
        any::<u8>(),
        any::<(u32, u16, u16, u32, u16, u16, u32, u16, u16)>(),
        option::of(any::<(u32, u16, u32, u16, u16)>()),
    );
    let derived = (
        any::<(u32, u32, u32, bool)>(),
        option::of(link()),
        option::of(link()),
        vec(text(), 0..4),
        any::<(u8, u8)>(),
    );
    (regs, derived).prop_map(
        |(
            (version, port_type, slot_implemented, interrupt_message, r, v2),
            ((mps, mp, mrr, flr), link_capable, link_status, supported_speeds, (asup, actl)),
        )| m::Express {
            version,
            port_type,
            slot_implemented,
            interrupt_message,
            devcap: r.0,
            devctl: r.1,
            devsta: r.2,
            lnkcap: r.3,
            lnkctl: r.4,
            lnksta: r.5,
            sltcap: r.6,
            sltctl: r.7,
            sltsta: r.8,
            v2: v2.map(|v| m::ExpressV2 {
                devcap2: v.0,
                devctl2: v.1,
                lnkcap2: v.2,
                lnkctl2: v.3,
                lnksta2: v.4,
            }),
            max_payload_supported: mps,
            max_payload: mp,
            max_read_request: mrr,
            flr_capable: flr,
            link_capable,
            link_status,
            supported_speeds,
            aspm_support: asup,
            aspm_control: actl,
        },
    )
}

fn sriov() -> impl Strategy<Value = m::SrIov> {
    (
        any::<(u32, u16, u16, u16, u16, u16, u16, u16, u16)>(),
        any::<(u32, u32)>(),
        vec(any::<u32>(), 0..7),
    )
        .prop_map(|(a, (sup, sys), vf_bars)| m::SrIov {
            capability: a.0,
            control: a.1,
            status: a.2,
            initial_vfs: a.3,
            total_vfs: a.4,
            num_vfs: a.5,
            first_vf_offset: a.6,
            vf_stride: a.7,
            vf_device_id: a.8,
            supported_page_sizes: sup,
            system_page_size: sys,
            vf_bars,
        })
}

/// Every variant of `CapDetail`: a new variant without an arm here fails to compile
/// the exhaustive match in `variant_name`, which the test below walks.
fn cap_detail() -> impl Strategy<Value = m::CapDetail> {
    use m::CapDetail as C;
    prop_oneof![
        any::<(u8, bool, bool, u8, u16, u8, bool, bool, bool)>().prop_map(|p| {
            C::PowerManagement {
                version: p.0,
                d1: p.1,
                d2: p.2,
                pme_support: p.3,
                aux_current_ma: p.4,
                power_state: p.5,
                no_soft_reset: p.6,
                pme_enabled: p.7,
                pme_status: p.8,
            }
        }),
        any::<(bool, u32, u32, bool, bool, u64, u16)>().prop_map(|p| C::Msi {
            enabled: p.0,
            vectors_capable: p.1,
            vectors_enabled: p.2,
            is_64bit: p.3,
            per_vector_masking: p.4,
            address: p.5,
            data: p.6,
        }),
        any::<(bool, bool, u16, u8, u32, u8, u32)>().prop_map(|p| C::MsiX {
            enabled: p.0,
            function_masked: p.1,
            table_size: p.2,
            table_bar: p.3,
            table_offset: p.4,
            pba_bar: p.5,
            pba_offset: p.6,
        }),
        express().prop_map(|e| C::Express(Box::new(e))),
        any::<u8>().prop_map(|length| C::VendorSpecific { length }),
        any::<(u16, u16)>().prop_map(|(vendor_id, device_id)| C::BridgeSubsystem {
            vendor_id,
            device_id
        }),
        any::<(u32, u32, u32, u32, u32, u32, u8)>().prop_map(|a| C::Aer {
            uncorrectable_status: a.0,
            uncorrectable_mask: a.1,
            uncorrectable_severity: a.2,
            correctable_status: a.3,
            correctable_mask: a.4,
            capabilities_control: a.5,
            first_error_pointer: a.6,
        }),
        (any::<u64>(), text()).prop_map(|(serial, text)| C::SerialNumber { serial, text }),
        any::<(u8, u32, bool)>().prop_map(|p| C::PowerBudget {
            data_select: p.0,
            data: p.1,
            system_allocated: p.2,
        }),
        any::<(u16, u8, u16)>().prop_map(|v| C::Vsec {
            vsec_id: v.0,
            vsec_rev: v.1,
            length: v.2,
        }),
        any::<(u16, u16)>().prop_map(|(capability, control)| C::Acs {
            capability,
            control
        }),
        any::<(u16, u16, u8)>().prop_map(|a| C::Ari {
            capability: a.0,
            control: a.1,
            next_function: a.2,
        }),
        sriov().prop_map(|s| C::SrIov(Box::new(s))),
        (
            any::<bool>(),
            vec(
                (any::<u8>(), vec(any::<u64>(), 0..5), any::<u64>()).prop_map(
                    |(bar, supported_sizes, current_size)| m::RebarEntry {
                        bar,
                        supported_sizes,
                        current_size,
                    }
                ),
                0..4
            )
        )
            .prop_map(|(virtual_function, entries)| C::ResizableBar {
                virtual_function,
                entries
            }),
        any::<(u64, u64)>().prop_map(|(max_snoop_ns, max_no_snoop_ns)| C::Ltr {
            max_snoop_ns,
            max_no_snoop_ns
        }),
        any::<(u16, u8, u16, u16)>().prop_map(|d| C::Dvsec {
            vendor_id: d.0,
            revision: d.1,
            length: d.2,
            dvsec_id: d.3,
        }),
    ]
}

fn variant_name(d: &m::CapDetail) -> &'static str {
    use m::CapDetail as C;
    match d {
        C::PowerManagement { .. } => "power_management",
        C::Msi { .. } => "msi",
        C::MsiX { .. } => "msi_x",
        C::Express(_) => "express",
        C::VendorSpecific { .. } => "vendor_specific",
        C::BridgeSubsystem { .. } => "bridge_subsystem",
        C::Aer { .. } => "aer",
        C::SerialNumber { .. } => "serial_number",
        C::PowerBudget { .. } => "power_budget",
        C::Vsec { .. } => "vsec",
        C::Acs { .. } => "acs",
        C::Ari { .. } => "ari",
        C::SrIov(_) => "sr_iov",
        C::ResizableBar { .. } => "resizable_bar",
        C::Ltr { .. } => "ltr",
        C::Dvsec { .. } => "dvsec",
    }
}

const VARIANTS: usize = 16;

fn capability() -> impl Strategy<Value = m::Capability> {
    (any::<(u16, u16, u8)>(), text(), option::of(cap_detail())).prop_map(
        |((offset, id, version), name, detail)| m::Capability {
            offset,
            id,
            version,
            name,
            detail,
        },
    )
}

fn window() -> impl Strategy<Value = m::Window> {
    any::<(u64, u64, bool, bool)>().prop_map(|w| m::Window {
        base: w.0,
        limit: w.1,
        enabled: w.2,
        is_64bit: w.3,
    })
}

fn bar() -> impl Strategy<Value = m::Bar> {
    (
        any::<(u8, bool, bool, bool, u64, u64, bool, bool, bool)>(),
        vec(any::<u64>(), 0..4),
        option::of(any::<u64>()),
    )
        .prop_map(|(b, resizable_sizes, resizable_current)| m::Bar {
            index: b.0,
            kind: if b.1 {
                m::BarKind::Io
            } else {
                m::BarKind::Memory
            },
            is_64bit: b.2,
            prefetchable: b.3,
            address: b.4,
            size: b.5,
            assigned: b.6,
            decode_enabled: b.7,
            is_virtual: b.8,
            resizable_sizes,
            resizable_current,
            resize_file: b.0 % 2 == 0,
        })
}

fn names() -> impl Strategy<Value = m::Names> {
    vec(some_text(), 8).prop_map(|mut n| {
        let mut next = || n.pop().flatten();
        m::Names {
            vendor: next(),
            device: next(),
            subsystem: next(),
            class: next(),
            subsystem_vendor: next(),
            base_class: next(),
            subclass: next(),
            prog_if: next(),
        }
    })
}

fn sysfs() -> impl Strategy<Value = m::Sysfs> {
    (
        (
            some_text(),
            some_text(),
            some_text(),
            vec(text(), 0..3),
            vec(text(), 0..3),
        ),
        (
            option::of(any::<i32>()),
            some_text(),
            some_text(),
            option::of(any::<u32>()),
        ),
        (
            some_text(),
            option::of(any::<u32>()),
            any::<bool>(),
            some_text(),
        ),
        (vec(any::<u8>(), 0..4), vec(text(), 0..3), any::<bool>()),
        (option::of(any::<u32>()), vec(text(), 0..3), some_text()),
    )
        .prop_map(|(a, b, c, d, e)| m::Sysfs {
            driver: a.0,
            driver_override: a.1,
            iommu_group: a.2,
            iommu_group_members: a.3,
            reset_methods: a.4,
            numa_node: b.0,
            local_cpulist: b.1,
            current_link_speed: b.2,
            current_link_width: b.3,
            max_link_speed: c.0,
            max_link_width: c.1,
            enabled: c.2,
            power_state: c.3,
            resize_files: d.0,
            upstream: d.1,
            boot_vga: d.2,
            irq: e.0,
            missing: e.1,
            physfn: e.2,
        })
}

fn link_budget() -> impl Strategy<Value = m::LinkBudget> {
    (
        vec(
            (text(), option::of(link()), option::of(link()))
                .prop_map(|(bdf, link, capable)| m::LinkHop { bdf, link, capable }),
            0..4,
        ),
        option::of(any::<u32>()),
        option::of(real()),
        some_text(),
        vec(
            (any::<u32>(), text(), vec(text(), 0..3), option::of(real())).prop_map(
                |(hop, bdf, with, gbytes_per_s_each)| m::SharedHop {
                    hop,
                    bdf,
                    with,
                    gbytes_per_s_each,
                },
            ),
            0..3,
        ),
        option::of(real()),
    )
        .prop_map(
            |(
                hops,
                bottleneck_hop,
                bottleneck_gbytes_per_s,
                limited_by,
                shared,
                contended_gbytes_per_s,
            )| m::LinkBudget {
                hops,
                bottleneck_hop,
                bottleneck_gbytes_per_s,
                limited_by,
                shared,
                contended_gbytes_per_s,
            },
        )
}

fn device() -> impl Strategy<Value = m::Device> {
    let identity = (
        text(),
        any::<(u16, u16, u16, u16, u8, u32)>(),
        names(),
        option::of(
            (0..3u8, text(), text()).prop_map(|(v, chip, family)| m::Gpu {
                vendor: [m::GpuVendor::Nvidia, m::GpuVendor::Amd, m::GpuVendor::Intel]
                    [usize::from(v)],
                chip,
                family,
            }),
        ),
        (any::<(u32, u32)>(), some_text()),
    );
    let header = (
        any::<(u8, bool, u16, u16, u8, u8, u8, u8, u8)>(),
        option::of((
            any::<(u8, u8, u8, u16, u16)>(),
            window(),
            window(),
            window(),
        )),
    );
    let body = (
        vec(bar(), 0..4),
        option::of(any::<(u64, u64, bool, bool)>()),
        vec(capability(), 0..6),
        vec(capability(), 0..6),
        vec(text(), 0..3),
        sysfs(),
        link_budget(),
        vec(any::<u8>(), 0..64),
    );
    (identity, header, body).prop_map(|(i, (h, bridge), b)| m::Device {
        bdf: i.0,
        vendor_id: i.1.0,
        device_id: i.1.1,
        subsystem_vendor_id: i.1.2,
        subsystem_device_id: i.1.3,
        revision: i.1.4,
        class_code: i.1.5,
        names: i.2,
        gpu: i.3,
        config_access: m::ConfigAccess {
            readable: i.4.0.0,
            size: i.4.0.1,
            limited: i.4.1,
        },
        header: m::Header {
            header_type: h.0,
            multifunction: h.1,
            command: h.2,
            status: h.3,
            cache_line_size: h.4,
            latency_timer: h.5,
            interrupt_line: h.6,
            interrupt_pin: h.7,
            bist: h.8,
        },
        bridge: bridge.map(|(r, io, memory, prefetchable)| m::Bridge {
            primary_bus: r.0,
            secondary_bus: r.1,
            subordinate_bus: r.2,
            io,
            memory,
            prefetchable,
            secondary_status: r.3,
            bridge_control: r.4,
        }),
        bars: b.0,
        rom: b.1.map(|r| m::Rom {
            address: r.0,
            size: r.1,
            enabled: r.2,
            assigned: r.3,
        }),
        capabilities: b.2,
        extended_capabilities: b.3,
        chain_problems: b.4,
        sysfs: b.5,
        link: b.6,
        config: b.7,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn model_to_wire_to_model_gives_back_the_model(d in device()) {
        let wire = pb::Device::from(&d);
        prop_assert_eq!(m::Device::try_from(wire), Ok(d));
    }

    #[test]
    fn every_capability_detail_comes_back(c in cap_detail()) {
        let cap = m::Capability { offset: 0x40, id: 1, version: 0, name: "x".into(), detail: Some(c) };
        let back = caps::capability_back(caps::capability(&cap));
        prop_assert_eq!(back, Ok(cap));
    }

    /// The encoded bytes decode to the same wire message: the round trip holds through
    /// what actually crosses the socket, optional fields' presence included.
    #[test]
    fn the_round_trip_holds_through_the_encoded_bytes(d in device()) {
        use prost::Message;
        let bytes = pb::Device::from(&d).encode_to_vec();
        let wire = pb::Device::decode(bytes.as_slice()).expect("our own encoding decodes");
        prop_assert_eq!(m::Device::try_from(wire), Ok(d));
    }
}

#[test]
fn the_generator_reaches_every_capability_variant() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = cap_detail();
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..2000 {
        let tree = strategy.new_tree(&mut runner).expect("a value");
        seen.insert(variant_name(&tree.current()));
    }
    assert_eq!(seen.len(), VARIANTS, "{seen:?}");
}

fn minimal() -> pb::Device {
    pb::Device::from(&m::Device {
        bdf: "0000:03:00.0".into(),
        vendor_id: 0x10de,
        device_id: 0x2335,
        subsystem_vendor_id: 0,
        subsystem_device_id: 0,
        revision: 0xa1,
        class_code: 0x03_0200,
        names: m::Names::default(),
        gpu: Some(m::Gpu {
            vendor: m::GpuVendor::Nvidia,
            chip: "GH100".into(),
            family: "Hopper".into(),
        }),
        config_access: m::ConfigAccess {
            readable: 4096,
            size: 4096,
            limited: None,
        },
        header: m::Header {
            header_type: 0,
            multifunction: false,
            command: 0,
            status: 0,
            cache_line_size: 0,
            latency_timer: 0,
            interrupt_line: 0,
            interrupt_pin: 0,
            bist: 0,
        },
        bridge: None,
        bars: Vec::new(),
        rom: None,
        capabilities: Vec::new(),
        extended_capabilities: Vec::new(),
        chain_problems: Vec::new(),
        sysfs: m::Sysfs::default(),
        link: m::LinkBudget::default(),
        config: Vec::new(),
    })
}

#[test]
fn a_device_without_its_identity_is_refused_by_name() {
    let wire = pb::Device {
        identity: None,
        ..minimal()
    };
    assert_eq!(
        m::Device::try_from(wire),
        Err(ConvertError::Missing {
            field: "Device.identity"
        })
    );
}

#[test]
fn a_register_wider_than_its_bits_is_refused_not_saturated() {
    let mut wire = minimal();
    if let Some(id) = wire.identity.as_mut() {
        id.revision = 0x100;
    }
    assert_eq!(
        m::Device::try_from(wire),
        Err(ConvertError::OutOfRange {
            field: "Identity.revision",
            value: 0x100,
            bits: 8
        })
    );
}

#[test]
fn an_unknown_or_unset_gpu_vendor_is_refused() {
    for value in [99, 0] {
        let mut wire = minimal();
        if let Some(g) = wire.identity.as_mut().and_then(|id| id.gpu.as_mut()) {
            g.vendor = value;
        }
        assert_eq!(
            m::Device::try_from(wire),
            Err(ConvertError::UnknownEnum {
                field: "Gpu.vendor",
                value
            })
        );
    }
}

#[test]
fn a_bar_of_unset_kind_is_refused() {
    let bar = pb::Bar::default();
    assert_eq!(
        m::Bar::try_from(bar),
        Err(ConvertError::UnknownEnum {
            field: "Bar.kind",
            value: 0
        })
    );
}

#[test]
fn garbled_bytes_never_panic_the_conversion() {
    use prost::Message;
    let good = minimal().encode_to_vec();
    for cut in 0..good.len() {
        for flip in [0x00u8, 0xff, 0x80] {
            let mut bytes = good.clone();
            bytes.truncate(cut);
            bytes.push(flip);
            if let Ok(wire) = pb::Device::decode(bytes.as_slice()) {
                let _ = m::Device::try_from(wire);
            }
        }
    }
}
