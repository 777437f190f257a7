//! Small formatting helpers shared by the commands.

use rig_client::{Bar, BarKind, Device, Link};

/// lspci's size spelling: 16M, 256G, 4K, 512 (bytes).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["", "K", "M", "G", "T", "P"];
    let mut v = bytes;
    let mut u = 0;
    while v >= 1024 && v.is_multiple_of(1024) && u + 1 < UNITS.len() {
        v /= 1024;
        u += 1;
    }
    format!("{v}{}", UNITS[u])
}

/// "32GT/s x16".
pub fn link(l: &Link) -> String {
    format!("{} x{}", l.speed, l.width)
}

/// "[10de:2335]"-style ids, with the name when known.
pub fn named(name: Option<&str>, id: u16) -> String {
    match name {
        Some(n) => format!("{n} [{id:04x}]"),
        None => format!("[{id:04x}]"),
    }
}

/// One BAR on a line: "BAR2 256G pf64 @0x100000000000".
pub fn bar_short(b: &Bar) -> String {
    let kind = match (b.kind, b.prefetchable, b.is_64bit) {
        (BarKind::Io, _, _) => "io",
        (BarKind::Memory, true, true) => "pf64",
        (BarKind::Memory, true, false) => "pf32",
        (BarKind::Memory, false, true) => "mem64",
        (BarKind::Memory, false, false) => "mem32",
    };
    let sz = if b.size == 0 {
        "?".to_owned()
    } else {
        size(b.size)
    };
    let rebar = if b.resizable_sizes.is_empty() {
        ""
    } else {
        " rebar"
    };
    format!("{}:{sz} {kind}{rebar}", b.index)
}

/// The device's one-line title, lspci style.
pub fn title(d: &Device) -> String {
    let class = d.names.class.as_deref().unwrap_or("Class");
    let vendor = d.names.vendor.as_deref().unwrap_or("Unknown vendor");
    let device = d.names.device.as_deref().unwrap_or("Device");
    let mut t = format!(
        "{} {class} [{:04x}]: {vendor} {device} [{:04x}:{:04x}]",
        d.bdf,
        d.class_code >> 8,
        d.vendor_id,
        d.device_id
    );
    if d.revision != 0 {
        t.push_str(&format!(" (rev {:02x})", d.revision));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_like_lspci() {
        assert_eq!(size(16 << 20), "16M");
        assert_eq!(size(256 << 30), "256G");
        assert_eq!(size(4096), "4K");
        assert_eq!(size(1000), "1000");
        assert_eq!(size(0), "0");
    }
}
