//! The first 64 bytes of config space: ids, command/status, BAR registers, and a
//! bridge's bus numbers and windows. Pure decoding; the caller reads the bytes.
//!
//! The registers the model shows decode straight into its [`rig_model::Header`] and a
//! bridge's windows into its [`Bridge`]; ids, the capability pointer and the ROM
//! register are kept beside them for `device`, which puts them where the model wants
//! them (and feeds the capability walk and the ROM from them).

use rig_model::{BarKind, Bridge, Window};

use super::regs::*;

/// The decoded common header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub vendor_id: u16,
    pub device_id: u16,
    pub revision: u8,
    /// 24 bits: base class, subclass, programming interface.
    pub class_code: u32,
    /// Command, status, layout (`header_type`: 0 endpoint, 1 bridge, 2 CardBus; other
    /// values kept as read) and the other registers the model shows.
    pub registers: rig_model::Header,
    pub subsystem_vendor_id: u16,
    pub subsystem_id: u16,
    /// Set when the status register says a capability list exists.
    pub capabilities_pointer: Option<u8>,
    pub rom_register: u32,
    pub bridge: Option<Bridge>,
}

/// One BAR register as config space shows it (before sysfs adds sizes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarRegister {
    pub index: u8,
    pub kind: BarKind,
    pub is_64bit: bool,
    pub prefetchable: bool,
    /// The address bits of the register (both halves for 64-bit BARs).
    pub address: u64,
}

/// Decodes the common header.
///
/// Returns `None` when fewer than 64 bytes are given: every user can read that much of
/// sysfs `config`, so less means the file is truncated, and the caller says so.
pub fn parse_header(cfg: &[u8]) -> Option<Header> {
    if cfg.len() < PCI_STD_HEADER_SIZEOF {
        return None;
    }
    // PANIC: none of the reads below can fail: every offset is below 64.
    let r8 = |o| r8(cfg, o).expect("offset below 64");
    let r16 = |o| r16(cfg, o).expect("offset below 64");
    let r32 = |o| r32(cfg, o).expect("offset below 64");
    let raw_type = r8(PCI_HEADER_TYPE);
    let header_type = raw_type & PCI_HEADER_TYPE_MASK;
    let status = r16(PCI_STATUS);
    let class_rev = r32(PCI_CLASS_REVISION);
    let (sub_vendor, sub_id, rom_register) = match header_type {
        PCI_HEADER_TYPE_NORMAL => (
            r16(PCI_SUBSYSTEM_VENDOR_ID),
            r16(PCI_SUBSYSTEM_ID),
            r32(PCI_ROM_ADDRESS),
        ),
        PCI_HEADER_TYPE_BRIDGE => (0, 0, r32(PCI_ROM_ADDRESS1)),
        // CardBus keeps its subsystem ids at 0x40, past the standard header.
        _ => (0, 0, 0),
    };
    // The CardBus capability pointer sits at 0x14; the others at 0x34.
    let cap_ptr_at = if header_type == PCI_HEADER_TYPE_CARDBUS {
        0x14
    } else {
        PCI_CAPABILITY_LIST
    };
    let capabilities_pointer = (status & PCI_STATUS_CAP_LIST != 0).then(|| r8(cap_ptr_at));
    let bridge = (header_type == PCI_HEADER_TYPE_BRIDGE).then(|| parse_bridge(cfg));
    Some(Header {
        vendor_id: r16(PCI_VENDOR_ID),
        device_id: r16(PCI_DEVICE_ID),
        revision: (class_rev & 0xff) as u8,
        class_code: class_rev >> 8,
        registers: rig_model::Header {
            header_type,
            multifunction: raw_type & PCI_HEADER_TYPE_MFD != 0,
            command: r16(PCI_COMMAND),
            status,
            cache_line_size: r8(PCI_CACHE_LINE_SIZE),
            latency_timer: r8(PCI_LATENCY_TIMER),
            interrupt_line: r8(PCI_INTERRUPT_LINE),
            interrupt_pin: r8(PCI_INTERRUPT_PIN),
            bist: r8(PCI_BIST),
        },
        subsystem_vendor_id: sub_vendor,
        subsystem_id: sub_id,
        capabilities_pointer,
        rom_register,
        bridge,
    })
}

fn parse_bridge(cfg: &[u8]) -> Bridge {
    let r8 = |o| r8(cfg, o).unwrap_or(0);
    let r16 = |o| r16(cfg, o).unwrap_or(0);
    let r32 = |o| r32(cfg, o).unwrap_or(0);
    // I/O: bits 7:4 of base/limit are address bits 15:12; 32-bit I/O adds the upper halves.
    let io_base_lo = r8(PCI_IO_BASE);
    let io_limit_lo = r8(PCI_IO_LIMIT);
    let io32 = io_base_lo & 0x0f == PCI_IO_RANGE_TYPE_32;
    let (io_up_b, io_up_l) = if io32 {
        (
            u64::from(r16(PCI_IO_BASE_UPPER16)),
            u64::from(r16(PCI_IO_LIMIT_UPPER16)),
        )
    } else {
        (0, 0)
    };
    let io = window(
        (io_up_b << 16) | (u64::from(io_base_lo & 0xf0) << 8),
        (io_up_l << 16) | (u64::from(io_limit_lo & 0xf0) << 8) | 0xfff,
        false,
    );
    // Memory: bits 15:4 are address bits 31:20.
    let memory = window(
        u64::from(r16(PCI_MEMORY_BASE) & 0xfff0) << 16,
        (u64::from(r16(PCI_MEMORY_LIMIT) & 0xfff0) << 16) | 0xf_ffff,
        false,
    );
    let pb = r16(PCI_PREF_MEMORY_BASE);
    let pl = r16(PCI_PREF_MEMORY_LIMIT);
    let pref64 = pb & 0x0f == PCI_PREF_RANGE_TYPE_64;
    let (up_b, up_l) = if pref64 {
        (
            u64::from(r32(PCI_PREF_BASE_UPPER32)),
            u64::from(r32(PCI_PREF_LIMIT_UPPER32)),
        )
    } else {
        (0, 0)
    };
    let prefetchable = window(
        (up_b << 32) | (u64::from(pb & 0xfff0) << 16),
        (up_l << 32) | (u64::from(pl & 0xfff0) << 16) | 0xf_ffff,
        pref64,
    );
    Bridge {
        primary_bus: r8(PCI_PRIMARY_BUS),
        secondary_bus: r8(PCI_SECONDARY_BUS),
        subordinate_bus: r8(PCI_SUBORDINATE_BUS),
        io,
        memory,
        prefetchable,
        secondary_status: r16(PCI_SEC_STATUS),
        bridge_control: r16(PCI_BRIDGE_CONTROL),
    }
}

/// One forwarding window; `base > limit` means the bridge forwards none of it.
fn window(base: u64, limit: u64, is_64bit: bool) -> Window {
    Window {
        base,
        limit,
        enabled: base <= limit,
        is_64bit,
    }
}

/// How many BAR registers a header layout has.
pub fn bar_count(header_type: u8) -> u8 {
    match header_type {
        PCI_HEADER_TYPE_NORMAL => 6,
        PCI_HEADER_TYPE_BRIDGE => 2,
        _ => 0,
    }
}

/// Decodes the BAR registers. The upper half of a 64-bit BAR is not a BAR of its own
/// and is skipped, as lspci does; a 64-bit BAR in the last slot is decoded with the
/// bits that exist.
pub fn parse_bar_registers(cfg: &[u8], header_type: u8) -> Vec<BarRegister> {
    let n = bar_count(header_type);
    let mut bars = Vec::with_capacity(usize::from(n));
    let mut i = 0u8;
    while i < n {
        let at = PCI_BASE_ADDRESS_0 + 4 * usize::from(i);
        let Some(lo) = r32(cfg, at) else { break };
        if lo & PCI_BASE_ADDRESS_SPACE_IO != 0 {
            bars.push(BarRegister {
                index: i,
                kind: BarKind::Io,
                is_64bit: false,
                prefetchable: false,
                address: u64::from(lo & PCI_BASE_ADDRESS_IO_MASK),
            });
            i += 1;
            continue;
        }
        let is_64bit = lo & PCI_BASE_ADDRESS_MEM_TYPE_MASK == PCI_BASE_ADDRESS_MEM_TYPE_64;
        let hi = if is_64bit && i + 1 < n {
            r32(cfg, at + 4).unwrap_or(0)
        } else {
            0
        };
        bars.push(BarRegister {
            index: i,
            kind: BarKind::Memory,
            is_64bit,
            prefetchable: lo & PCI_BASE_ADDRESS_MEM_PREFETCH != 0,
            address: (u64::from(hi) << 32) | u64::from(lo & PCI_BASE_ADDRESS_MEM_MASK),
        });
        i += if is_64bit { 2 } else { 1 };
    }
    bars
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg_with(writes: &[(usize, &[u8])]) -> Vec<u8> {
        let mut cfg = vec![0u8; 256];
        for (off, bytes) in writes {
            cfg[*off..*off + bytes.len()].copy_from_slice(bytes);
        }
        cfg
    }

    #[test]
    fn short_config_has_no_header() {
        assert_eq!(parse_header(&[0u8; 63]), None);
        assert!(parse_header(&[0u8; 64]).is_some());
    }

    #[test]
    fn endpoint_header_decodes_ids_class_and_cap_pointer() {
        let cfg = cfg_with(&[
            (0x00, &[0xde, 0x10, 0x35, 0x23]),
            (0x06, &[0x10, 0x00]),
            (0x08, &[0xa1, 0x00, 0x02, 0x03]),
            (0x0e, &[0x80]),
            (0x2c, &[0xde, 0x10, 0xbf, 0x18]),
            (0x34, &[0x40]),
        ]);
        let h = parse_header(&cfg).expect("64 bytes");
        assert_eq!((h.vendor_id, h.device_id), (0x10de, 0x2335));
        assert_eq!(h.class_code, 0x030200);
        assert_eq!(h.revision, 0xa1);
        assert!(h.registers.multifunction);
        assert_eq!(h.registers.header_type, 0);
        assert_eq!((h.subsystem_vendor_id, h.subsystem_id), (0x10de, 0x18bf));
        assert_eq!(h.capabilities_pointer, Some(0x40));
        assert_eq!(h.bridge, None);
    }

    #[test]
    fn cap_pointer_absent_without_status_bit() {
        let cfg = cfg_with(&[(0x34, &[0x40])]);
        assert_eq!(
            parse_header(&cfg).expect("64 bytes").capabilities_pointer,
            None
        );
    }

    #[test]
    fn sixty_four_bit_prefetchable_bar_spans_two_registers() {
        let cfg = cfg_with(&[
            (0x10, &[0x0c, 0x00, 0x00, 0x02]),
            (0x14, &[0x04, 0x10, 0x00, 0x00]),
            (0x18, &[0x01, 0xc0, 0x00, 0x00]),
            (0x1c, &[0x00, 0x00, 0x00, 0xfe]),
        ]);
        let bars = parse_bar_registers(&cfg, 0);
        // BAR1 is BAR0's upper half; BARs 4 and 5 read zero but are still registers.
        let indices: Vec<_> = bars.iter().map(|b| b.index).collect();
        assert_eq!(indices, [0, 2, 3, 4, 5]);
        assert_eq!(bars[0].address, 0x1004_0200_0000);
        assert!(bars[0].is_64bit && bars[0].prefetchable);
        assert_eq!(bars[1].index, 2);
        assert_eq!(bars[1].kind, BarKind::Io);
        assert_eq!(bars[1].address, 0xc000);
        assert_eq!(bars[2].index, 3);
        assert_eq!(bars[2].address, 0xfe00_0000);
        assert!(!bars[2].is_64bit);
    }

    #[test]
    fn sixty_four_bit_bar_in_last_slot_does_not_read_past_it() {
        let cfg = cfg_with(&[(0x24, &[0x04, 0x00, 0x00, 0x80]), (0x28, &[0xff; 4])]);
        let bars = parse_bar_registers(&cfg, 0);
        let last = bars.last().expect("six slots");
        assert_eq!((last.index, last.address), (5, 0x8000_0000));
    }

    #[test]
    fn bridge_windows_decode_and_closed_window_is_disabled() {
        let cfg = cfg_with(&[
            (0x0e, &[0x01]),
            (0x18, &[0x00, 0x01, 0x03]),
            (0x1c, &[0xf0, 0x00]),
            (0x20, &[0x00, 0xfe, 0x10, 0xfe]),
            (0x24, &[0x01, 0x00, 0xf1, 0xff]),
            (0x28, &[0x00, 0x10, 0x00, 0x00, 0x3f, 0x10, 0x00, 0x00]),
        ]);
        let h = parse_header(&cfg).expect("64 bytes");
        let b = h.bridge.expect("type 1");
        assert_eq!(
            (b.primary_bus, b.secondary_bus, b.subordinate_bus),
            (0, 1, 3)
        );
        assert!(!b.io.enabled);
        assert_eq!((b.memory.base, b.memory.limit), (0xfe00_0000, 0xfe1f_ffff));
        assert!(b.prefetchable.is_64bit);
        assert_eq!(b.prefetchable.base, 0x1000_0000_0000);
        assert_eq!(b.prefetchable.limit, 0x103f_ffff_ffff);
        assert_eq!(parse_bar_registers(&cfg, 1).len(), 2);
    }
}
