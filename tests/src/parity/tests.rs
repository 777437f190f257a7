use rig_client::{ConfigAccess, Express, Header, LinkBudget, Names, RebarEntry, Sysfs};

use super::{lspci::parse_region, *};

/// Shaped like the H200 (docs/h200.md), in the format pciutils 3.9 prints.
const GPU: &str = "\
0000:00:06.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:18bf]
\tRegion 0: Memory at 104002000000 (64-bit, prefetchable) [size=16M]
\tRegion 2: Memory at 100000000000 (64-bit, prefetchable) [size=256G]
\tCapabilities: [48] MSI: Enable- Count=1/16 Maskable+ 64bit+
\t\tAddress: 0000000000000000  Data: 0000
\tCapabilities: [60] Express (v2) Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM L1, Exit Latency L1 unlimited
\t\tLnkSta:\tSpeed 32GT/s, Width x16
\tCapabilities: [b0] MSI-X: Enable+ Count=9 Masked-
\t\tVector table: BAR=0 offset=00b90000
\t\tPBA: BAR=0 offset=00ba0000
\tCapabilities: [100 v1] Null
\tCapabilities: [12c v1] Latency Tolerance Reporting
\t\tMax snoop latency: 0ns
\tCapabilities: [134 v1] Physical Resizable BAR
\t\tBAR 2: current size: 256GB, supported: 64MB 128MB 256GB
\tCapabilities: [2a4 v1] Vendor Specific Information: ID=0001 Rev=1 Len=014 <?>
\tCapabilities: [2f0 v1] Device Serial Number 00-00-00-01-02-03-04-05
\tCapabilities: [300 v2] Extended Capability ID 0x2a
\tKernel driver in use: nvidia
";

fn cap(offset: u16, id: u16, version: u8, detail: Option<CapDetail>) -> Capability {
    Capability {
        offset,
        id,
        version,
        name: String::new(),
        detail,
    }
}

fn bar(index: u8, address: u64, size: u64, sizes: Vec<u64>) -> Bar {
    Bar {
        index,
        kind: BarKind::Memory,
        is_64bit: true,
        prefetchable: true,
        address,
        size,
        assigned: true,
        decode_enabled: true,
        is_virtual: false,
        resizable_current: (!sizes.is_empty()).then_some(256 << 30),
        resizable_sizes: sizes,
        resize_file: false,
    }
}

fn link() -> Option<rig_client::Link> {
    Some(rig_client::Link {
        speed: "32GT/s".to_owned(),
        speed_gts: 32.0,
        width: 16,
        gbytes_per_s: 63.0,
    })
}

/// rig's decode of `GPU`, as it should be.
fn gpu() -> Device {
    let sizes = vec![64 << 20, 128 << 20, 256 << 30];
    let express = Express {
        version: 2,
        port_type: "Endpoint".to_owned(),
        slot_implemented: false,
        interrupt_message: 0,
        devcap: 0,
        devctl: 0,
        devsta: 0,
        lnkcap: 0,
        lnkctl: 0,
        lnksta: 0,
        sltcap: 0,
        sltctl: 0,
        sltsta: 0,
        v2: None,
        max_payload_supported: 256,
        max_payload: 256,
        max_read_request: 4096,
        flr_capable: true,
        link_capable: link(),
        link_status: link(),
        supported_speeds: Vec::new(),
        aspm_support: 2,
        aspm_control: 0,
    };
    Device {
        bdf: "0000:00:06.0".to_owned(),
        vendor_id: 0x10de,
        device_id: 0x2335,
        subsystem_vendor_id: 0x10de,
        subsystem_device_id: 0x18bf,
        revision: 0xa1,
        class_code: 0x030200,
        names: Names {
            vendor: Some("NVIDIA Corporation".to_owned()),
            device: Some("GH100 [H200 SXM 141GB]".to_owned()),
            subsystem: None,
            class: Some("3D controller".to_owned()),
            ..Names::default()
        },
        gpu: None,
        config_access: ConfigAccess {
            readable: 4096,
            size: 4096,
            limited: None,
        },
        header: Header {
            header_type: 0,
            multifunction: false,
            command: 0x0546,
            status: 0x0010,
            cache_line_size: 0,
            latency_timer: 0,
            interrupt_line: 0,
            interrupt_pin: 1,
            bist: 0,
        },
        bridge: None,
        bars: vec![
            bar(0, 0x1040_0200_0000, 16 << 20, Vec::new()),
            bar(2, 0x1000_0000_0000, 256 << 30, sizes.clone()),
        ],
        rom: None,
        capabilities: vec![
            cap(
                0x48,
                0x05,
                0,
                Some(CapDetail::Msi {
                    enabled: false,
                    vectors_capable: 16,
                    vectors_enabled: 1,
                    is_64bit: true,
                    per_vector_masking: true,
                    address: 0,
                    data: 0,
                }),
            ),
            cap(0x60, 0x10, 0, Some(CapDetail::Express(Box::new(express)))),
            cap(
                0xb0,
                0x11,
                0,
                Some(CapDetail::MsiX {
                    enabled: true,
                    function_masked: false,
                    table_size: 9,
                    table_bar: 0,
                    table_offset: 0xb9_0000,
                    pba_bar: 0,
                    pba_offset: 0xba_0000,
                }),
            ),
        ],
        extended_capabilities: vec![
            cap(0x100, 0x00, 1, None),
            cap(0x12c, 0x18, 1, None),
            cap(
                0x134,
                0x15,
                1,
                Some(CapDetail::ResizableBar {
                    virtual_function: false,
                    entries: vec![RebarEntry {
                        bar: 2,
                        supported_sizes: sizes,
                        current_size: 256 << 30,
                    }],
                }),
            ),
            cap(
                0x2a4,
                0x0b,
                1,
                Some(CapDetail::Vsec {
                    vsec_id: 1,
                    vsec_rev: 1,
                    length: 0x14,
                }),
            ),
            cap(
                0x2f0,
                0x03,
                1,
                Some(CapDetail::SerialNumber {
                    serial: 0x0000_0001_0203_0405,
                    text: String::new(),
                }),
            ),
            cap(0x300, 0x2a, 2, None),
        ],
        chain_problems: Vec::new(),
        sysfs: Sysfs {
            driver: Some("nvidia".to_owned()),
            ..Sysfs::default()
        },
        link: LinkBudget::default(),
        config: Vec::new(),
    }
}

fn only(text: &str) -> LspciDevice {
    let mut all = parse_lspci(text);
    assert_eq!(all.len(), 1, "one device in {text}");
    all.remove(0)
}

#[test]
fn title_yields_ids_names_class_and_revision() {
    let d = only(GPU);
    assert_eq!(d.bdf, "0000:00:06.0");
    assert_eq!(
        (d.vendor_id, d.device_id, d.revision),
        (0x10de, 0x2335, 0xa1)
    );
    assert_eq!(
        (d.class_id, d.class_name.as_str()),
        (0x0302, "3D controller")
    );
    assert_eq!(d.name, "NVIDIA Corporation GH100 [H200 SXM 141GB]");
    assert_eq!(
        d.subsystem,
        Some((0x10de, 0x18bf, "NVIDIA Corporation Device".to_owned()))
    );
}

#[test]
fn prog_if_and_short_address_are_read() {
    let d = only(
        "00:1f.2 SATA controller [0106]: Intel Corporation Device [8086:a352] (rev 10) (prog-if 01 [AHCI 1.0])\n",
    );
    assert_eq!(d.bdf, "0000:00:1f.2");
    assert_eq!(
        (d.prog_if, d.prog_if_name.as_deref()),
        (1, Some("AHCI 1.0"))
    );
    assert_eq!(d.name, "Intel Corporation Device");
}

#[test]
fn capabilities_map_lspci_names_to_ids_in_order() {
    let d = only(GPU);
    let std: Vec<(u16, Vec<u16>)> = d
        .capabilities
        .iter()
        .map(|c| (c.offset, c.ids.clone()))
        .collect();
    assert_eq!(
        std,
        [(0x48, vec![0x05]), (0x60, vec![0x10]), (0xb0, vec![0x11])]
    );
    let ext: Vec<(u16, Option<u8>, Vec<u16>)> = d
        .extended_capabilities
        .iter()
        .map(|c| (c.offset, c.version, c.ids.clone()))
        .collect();
    assert_eq!(
        ext,
        [
            (0x100, Some(1), vec![0x00]),
            (0x12c, Some(1), vec![0x18]),
            (0x134, Some(1), vec![0x15]),
            (0x2a4, Some(1), vec![0x0b]),
            (0x2f0, Some(1), vec![0x03]),
            (0x300, Some(2), vec![0x2a]),
        ]
    );
}

#[test]
fn lines_under_a_capability_fill_its_detail() {
    let d = only(GPU);
    let detail = |off: u16| {
        d.capabilities
            .iter()
            .chain(&d.extended_capabilities)
            .find(|c| c.offset == off)
            .and_then(|c| c.detail.clone())
    };
    assert_eq!(
        detail(0xb0),
        Some(LspciDetail::MsiX {
            enabled: true,
            count: 9,
            masked: false,
            table: Some((0, 0xb9_0000)),
            pba: Some((0, 0xba_0000)),
        })
    );
    assert_eq!(
        detail(0x60),
        Some(LspciDetail::Express {
            version: Some(2),
            port_type: "Endpoint".to_owned(),
            lnkcap: Some(("32GT/s".to_owned(), 16)),
            lnksta: Some(("32GT/s".to_owned(), 16)),
        })
    );
    assert_eq!(
        detail(0x134),
        Some(LspciDetail::Rebar {
            virtual_function: false,
            entries: vec![(2, Some(256 << 30), vec![64 << 20, 128 << 20, 256 << 30])],
        })
    );
}

#[test]
fn region_flags_sizes_and_placeholders_parse() {
    let r = parse_region("Memory at <unassigned> (32-bit, non-prefetchable) [disabled]");
    assert_eq!(
        (r.address, r.is_64bit, r.prefetchable, r.disabled),
        (None, false, false, true)
    );
    let r = parse_region("I/O ports at e000 [virtual] [size=256]");
    assert_eq!(
        (r.io, r.address, r.is_virtual, r.size),
        (true, Some(0xe000), true, Some(256))
    );
    let r = parse_region("[virtual] Memory at fe000000 (32-bit, prefetchable) [size=2T]");
    assert_eq!(
        (r.is_virtual, r.prefetchable, r.size),
        (true, true, Some(2 << 40))
    );
}

#[test]
fn matching_decode_has_no_mismatches() {
    assert_eq!(compare(&only(GPU), &gpu(), Source::Live), []);
}

#[test]
fn changed_fields_are_each_reported_once() {
    let mut rig = gpu();
    rig.bars[1].size = 128 << 30;
    rig.extended_capabilities[1].offset = 0x128;
    rig.sysfs.driver = None;
    let fields: Vec<String> = compare(&only(GPU), &rig, Source::Live)
        .into_iter()
        .map(|m| m.field)
        .collect();
    assert_eq!(
        fields,
        [
            "bars[2].size",
            "extended_capabilities (offsets)",
            "sysfs.driver"
        ]
    );
}

#[test]
fn dump_source_skips_upper_halves_sizes_and_driver() {
    let text = GPU
        .replace(" [size=16M]", "")
        .replace(
            " [size=256G]",
            "\n\tRegion 3: Memory at <unassigned> (32-bit, non-prefetchable)",
        )
        .replace("\tKernel driver in use: nvidia\n", "");
    assert_eq!(compare(&only(&text), &gpu(), Source::Dump), []);
    assert!(!compare(&only(&text), &gpu(), Source::Live).is_empty());
}

#[test]
fn access_denied_compares_what_lspci_read() {
    let text = "00:06.0 3D controller [0302]: NVIDIA Corporation GH100 [H200 SXM 141GB] [10de:2335] (rev a1)\n\tCapabilities: <access denied>\n";
    let mut rig = gpu();
    rig.capabilities.clear();
    rig.extended_capabilities.clear();
    rig.bars.clear();
    rig.sysfs.driver = None;
    rig.names.subsystem = None;
    rig.subsystem_vendor_id = 0;
    let d = only(text);
    assert!(d.access_denied);
    let fields: Vec<String> = compare(&d, &rig, Source::Live)
        .into_iter()
        .map(|m| m.field)
        .collect();
    assert_eq!(fields, ["config_access.limited"]);
}

#[test]
fn dump_round_trips_and_differences_name_offsets() {
    let bytes: Vec<u8> = (0..=255).collect();
    let dumps = parse_hex_dumps(&format_dump("0000:00:06.0", "3D controller", &bytes));
    assert_eq!(dumps, [("0000:00:06.0".to_owned(), bytes.clone())]);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(compare_config("0000:00:06.0", &bytes, &hex), []);
    let mut other = bytes.clone();
    other[6] = 0xff;
    let m = compare_config("0000:00:06.0", &other, &hex);
    assert_eq!(m.len(), 1);
    assert!(m[0].lspci.starts_with("0x006: ff/06"), "{}", m[0]);
}
