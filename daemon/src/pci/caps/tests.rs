use super::*;

/// A 4 KiB config space with the status register's capability-list bit set.
fn blank() -> Vec<u8> {
    let mut cfg = vec![0u8; 4096];
    cfg[0x06] = 0x10;
    cfg
}

fn put(cfg: &mut [u8], at: usize, bytes: &[u8]) {
    cfg[at..at + bytes.len()].copy_from_slice(bytes);
}

fn ext_header(id: u16, version: u8, next: u16) -> [u8; 4] {
    (u32::from(id) | (u32::from(version) << 16) | (u32::from(next) << 20)).to_le_bytes()
}

#[test]
fn standard_chain_decodes_in_order_with_msi_and_msix() {
    let mut cfg = blank();
    put(&mut cfg, 0x40, &[0x01, 0x48, 0x03, 0x00]); // PM v3
    put(&mut cfg, 0x48, &[0x05, 0xb0, 0x88, 0x00]); // MSI, 64-bit, 16 capable (QMASK=4), disabled
    put(&mut cfg, 0xb0, &[0x11, 0x00, 0x08, 0x80]); // MSI-X, 9 vectors, enabled
    put(&mut cfg, 0xb4, &0x00b9_0000u32.to_le_bytes()); // table BAR0 + 0xb90000
    put(&mut cfg, 0xb8, &0x00ba_0000u32.to_le_bytes());
    let list = parse_standard(&cfg, 0x40);
    assert!(list.problems.is_empty(), "{:?}", list.problems);
    let ids: Vec<_> = list.caps.iter().map(|c| (c.offset, c.id)).collect();
    assert_eq!(ids, [(0x40, 1), (0x48, 5), (0xb0, 0x11)]);
    let Some(CapDetail::Msi {
        vectors_capable,
        is_64bit,
        enabled,
        ..
    }) = list.caps[1].detail
    else {
        panic!("MSI decoded")
    };
    assert_eq!((vectors_capable, is_64bit, enabled), (16, true, false));
    let Some(CapDetail::MsiX {
        table_size,
        table_bar,
        table_offset,
        pba_offset,
        enabled,
        ..
    }) = list.caps[2].detail
    else {
        panic!("MSI-X decoded")
    };
    assert_eq!(
        (table_size, table_bar, table_offset, pba_offset),
        (9, 0, 0xb9_0000, 0xba_0000)
    );
    assert!(enabled);
}

#[test]
fn standard_loop_is_reported_not_followed() {
    let mut cfg = blank();
    put(&mut cfg, 0x40, &[0x01, 0x50]);
    put(&mut cfg, 0x50, &[0x05, 0x40]);
    let list = parse_standard(&cfg, 0x40);
    assert_eq!(list.caps.len(), 2);
    assert_eq!(list.problems.len(), 1);
    assert!(
        list.problems[0].contains("loops back to 0x40"),
        "{:?}",
        list.problems
    );
}

#[test]
fn standard_pointer_into_header_is_reported() {
    let mut cfg = blank();
    put(&mut cfg, 0x40, &[0x01, 0x10]);
    let list = parse_standard(&cfg, 0x40);
    assert_eq!(list.caps.len(), 1);
    assert!(
        list.problems[0].contains("into the header"),
        "{:?}",
        list.problems
    );
}

#[test]
fn unprivileged_64_bytes_report_the_unreadable_capability() {
    let cfg = blank();
    let list = parse_standard(&cfg[..64], 0x40);
    assert!(list.caps.is_empty());
    assert!(
        list.problems[0].contains("64 readable bytes"),
        "{:?}",
        list.problems
    );
}

#[test]
fn truncated_capability_body_is_marked_truncated() {
    let mut cfg = blank();
    put(&mut cfg, 0xf8, &[0x11, 0x00, 0x08, 0x80]); // MSI-X needs 12 bytes; 8 remain
    let list = parse_standard(&cfg[..256], 0xf8);
    assert_eq!(list.caps[0].detail, None);
    assert_eq!(list.caps[0].name, "MSI-X (truncated)");
}

#[test]
fn unknown_ids_are_kept_with_offset_and_version() {
    let mut cfg = blank();
    put(&mut cfg, 0x40, &[0x42, 0x00]);
    put(&mut cfg, 0x100, &ext_header(0x7777, 3, 0));
    let std = parse_standard(&cfg, 0x40);
    assert_eq!(
        (std.caps[0].id, std.caps[0].name.as_str()),
        (0x42, "Unknown")
    );
    assert_eq!(std.caps[0].detail, None);
    let ext = parse_extended(&cfg);
    assert_eq!(
        (ext.caps[0].id, ext.caps[0].version, ext.caps[0].offset),
        (0x7777, 3, 0x100)
    );
    assert_eq!(ext.caps[0].name, "Unknown");
}

#[test]
fn extended_chain_walks_through_null_entries_like_the_h200() {
    let mut cfg = blank();
    put(&mut cfg, 0x100, &ext_header(0x0000, 0, 0x12c));
    put(&mut cfg, 0x12c, &ext_header(0x0018, 1, 0x2f0));
    put(&mut cfg, 0x130, &[0x01, 0x08, 0x02, 0x04]); // snoop 1 × 32² ns, no-snoop 2 × 32 ns
    put(&mut cfg, 0x2f0, &ext_header(0x0003, 1, 0));
    put(&mut cfg, 0x2f4, &0x0403_0201u32.to_le_bytes());
    put(&mut cfg, 0x2f8, &0x0807_0605u32.to_le_bytes());
    let list = parse_extended(&cfg);
    assert!(list.problems.is_empty(), "{:?}", list.problems);
    let names: Vec<_> = list.caps.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Null",
            "Latency Tolerance Reporting",
            "Device Serial Number"
        ]
    );
    assert_eq!(
        list.caps[1].detail,
        Some(CapDetail::Ltr {
            max_snoop_ns: 1024,
            max_no_snoop_ns: 64
        })
    );
    assert_eq!(
        list.caps[2].detail,
        Some(CapDetail::SerialNumber {
            serial: 0x0807_0605_0403_0201,
            text: "08-07-06-05-04-03-02-01".to_owned()
        })
    );
}

#[test]
fn extended_loop_and_backward_pointer_are_reported() {
    let mut cfg = blank();
    put(&mut cfg, 0x100, &ext_header(0x0001, 2, 0x140));
    put(&mut cfg, 0x140, &ext_header(0x0003, 1, 0x100));
    let list = parse_extended(&cfg);
    assert_eq!(list.caps.len(), 2);
    assert!(
        list.problems[0].contains("loops back to 0x100"),
        "{:?}",
        list.problems
    );

    put(&mut cfg, 0x140, &ext_header(0x0003, 1, 0x0c0));
    let list = parse_extended(&cfg);
    assert!(
        list.problems[0].contains("below 0x100"),
        "{:?}",
        list.problems
    );
}

#[test]
fn extended_pointer_past_readable_bytes_is_reported() {
    let mut cfg = blank();
    put(&mut cfg, 0x100, &ext_header(0x0001, 2, 0xffc));
    let list = parse_extended(&cfg[..0x200]);
    assert_eq!(list.caps.len(), 1);
    assert!(
        list.problems[0].contains("past the 512 readable bytes"),
        "{:?}",
        list.problems
    );
}

#[test]
fn no_extended_space_gives_an_empty_list() {
    assert_eq!(parse_extended(&blank()[..256]), CapList::default());
    let mut cfg = blank();
    put(&mut cfg, 0x100, &[0xff; 4]);
    assert_eq!(parse_extended(&cfg), CapList::default());
}

#[test]
fn resizable_bar_decodes_sizes_and_current_for_each_bar() {
    let mut cfg = blank();
    put(&mut cfg, 0x100, &ext_header(0x0001, 2, 0x200));
    put(&mut cfg, 0x200, &ext_header(0x0015, 1, 0));
    // Two BARs: BAR0 supports 256 MiB..32 GiB (bits 12..19 → n=8..15), current 256 MiB;
    // BAR2 supports 2 MiB only, current 2 MiB.
    let cap0: u32 = (8..=15).map(|n| 1u32 << (n + 4)).sum();
    put(&mut cfg, 0x204, &cap0.to_le_bytes());
    put(&mut cfg, 0x208, &((2u32 << 5) | (8 << 8)).to_le_bytes());
    put(&mut cfg, 0x20c, &(1u32 << 5).to_le_bytes());
    put(&mut cfg, 0x210, &(2u32 | (1 << 8)).to_le_bytes());
    let list = parse_extended(&cfg);
    let Some(CapDetail::ResizableBar {
        virtual_function,
        entries,
    }) = &list.caps[1].detail
    else {
        panic!("ReBAR decoded: {:?}", list.caps)
    };
    assert!(!virtual_function);
    assert_eq!(entries.len(), 2);
    assert_eq!(entries[0].bar, 0);
    assert_eq!(entries[0].current_size, 256 << 20);
    assert_eq!(entries[0].supported_sizes.first(), Some(&(256 << 20)));
    assert_eq!(entries[0].supported_sizes.last(), Some(&(32u64 << 30)));
    assert_eq!(entries[0].supported_sizes.len(), 8);
    assert_eq!(
        (
            entries[1].bar,
            entries[1].current_size,
            entries[1].supported_sizes.clone()
        ),
        (2, 2 << 20, vec![2 << 20])
    );
}

#[test]
fn rebar_size_encoding_boundaries() {
    assert_eq!(rebar_size_bytes(0), 1 << 20);
    assert_eq!(rebar_size_bytes(43), 1 << 63);
    assert_eq!(rebar_size_bytes(44), 0);
    // Control bit 16 continues the capability's list at 256 TiB.
    assert_eq!(rebar_sizes(0, 1 << 16), vec![1u64 << 48]);
    assert_eq!(rebar_sizes(1 << 31, 0), vec![1u64 << 47]);
    assert!(rebar_sizes(0xf, 0xffff).is_empty());
}

#[test]
fn random_config_bytes_never_panic() {
    // A cheap deterministic fuzz: xorshift bytes through both walkers.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in [0usize, 1, 63, 64, 65, 255, 256, 257, 4095, 4096] {
        for _ in 0..200 {
            let cfg: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x & 0xff) as u8
                })
                .collect();
            let first = cfg.get(0x34).copied().unwrap_or(0x40);
            let _ = parse_standard(&cfg, first);
            let _ = parse_extended(&cfg);
        }
    }
}
