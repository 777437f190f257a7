//! The PCI Express capability (id 0x10) and link arithmetic, decoded straight into the
//! model's [`Express`] and [`Link`].
//!
//! Flow: `caps` finds the capability → [`parse`] reads its registers and derives what
//! the model shows (port type, payload sizes, links, speeds as lspci spells them) →
//! `device` uses the links for the budget up to the root port. Pure: no I/O.
//!
//! Registers: PCIe Base 6.0 §7.5.3. Registers past LnkSta (0x12) exist only in
//! version 2 of the capability. Bandwidth per lane after line encoding: 8b/10b for
//! 2.5 and 5 GT/s, 128b/130b for 8–32 GT/s, 242B/256B FLIT for 64 GT/s — so a
//! PCIe 3.0 x16 link carries 15.75 GB/s each way (docs/hardware/pci-takeover.md,
//! "Links": why the budget reads every hop up to the root port).
//! Not here: the capability walk (`caps`), the model's types (`rig-model`).

use rig_model::{Express, ExpressV2, Link};

use super::regs::*;

/// Decodes the capability at `at`; `None` when its first 0x14 bytes are unreadable.
pub fn parse(cfg: &[u8], at: usize) -> Option<Express> {
    let flags = r16(cfg, at + PCI_EXP_FLAGS)?;
    let version = (flags & 0xf) as u8;
    let port_type = ((flags >> 4) & 0xf) as u8;
    let devcap = r32(cfg, at + PCI_EXP_DEVCAP)?;
    let devctl = r16(cfg, at + PCI_EXP_DEVCTL)?;
    let devsta = r16(cfg, at + PCI_EXP_DEVSTA)?;
    let lnkcap = r32(cfg, at + PCI_EXP_LNKCAP)?;
    let lnkctl = r16(cfg, at + PCI_EXP_LNKCTL)?;
    let lnksta = r16(cfg, at + PCI_EXP_LNKSTA)?;
    let v2 = if version >= 2 {
        (|| {
            Some(ExpressV2 {
                devcap2: r32(cfg, at + PCI_EXP_DEVCAP2)?,
                devctl2: r16(cfg, at + PCI_EXP_DEVCTL2)?,
                lnkcap2: r32(cfg, at + PCI_EXP_LNKCAP2)?,
                lnkctl2: r16(cfg, at + PCI_EXP_LNKCTL2)?,
                lnksta2: r16(cfg, at + PCI_EXP_LNKSTA2)?,
            })
        })()
    } else {
        None
    };
    // Integrated endpoints and event collectors have no link.
    let has_link = !matches!(port_type, 0x9 | 0xa);
    Some(Express {
        version,
        port_type: port_type_name(port_type).to_owned(),
        slot_implemented: flags & PCI_EXP_FLAGS_SLOT != 0,
        interrupt_message: ((flags >> 9) & 0x1f) as u8,
        devcap,
        devctl,
        devsta,
        lnkcap,
        lnkctl,
        lnksta,
        sltcap: r32(cfg, at + PCI_EXP_SLTCAP).unwrap_or(0),
        sltctl: r16(cfg, at + PCI_EXP_SLTCTL).unwrap_or(0),
        sltsta: r16(cfg, at + PCI_EXP_SLTSTA).unwrap_or(0),
        v2,
        // DevCap bits 2:0 and DevCtl bits 7:5 / 14:12 encode 128 << n bytes.
        max_payload_supported: 128 << (devcap & 7).min(5),
        max_payload: 128 << ((devctl >> 5) & 7).min(5),
        max_read_request: 128 << ((devctl >> 12) & 7).min(5),
        flr_capable: devcap & PCI_EXP_DEVCAP_FLR != 0,
        // LnkCap: the fastest and widest the port can train; LnkSta: what it trained to.
        link_capable: has_link.then(|| link(lnk_speed(lnkcap), lnk_width(lnkcap))),
        link_status: has_link.then(|| link(lnk_speed(lnksta.into()), lnk_width(lnksta.into()))),
        // LnkCap2's supported-speeds vector, bits 7:1.
        supported_speeds: v2
            .map(|v2| {
                (1u8..=7)
                    .filter(|b| v2.lnkcap2 & (1 << b) != 0)
                    .map(speed_label)
                    .collect()
            })
            .unwrap_or_default(),
        // LnkCap bits 11:10 (ASPM support), LnkCtl bits 1:0 (ASPM control).
        aspm_support: ((lnkcap >> 10) & 3) as u8,
        aspm_control: (lnkctl & 3) as u8,
    })
}

/// The link speed field (bits 3:0) of LnkCap or LnkSta.
fn lnk_speed(reg: u32) -> u8 {
    (reg & 0xf) as u8
}

/// The link width field (bits 9:4) of LnkCap or LnkSta.
fn lnk_width(reg: u32) -> u8 {
    ((reg >> 4) & 0x3f) as u8
}

/// What the port type field names (PCI_EXP_TYPE_* in pci_regs.h).
fn port_type_name(port_type: u8) -> &'static str {
    match port_type {
        0x0 => "Endpoint",
        0x1 => "Legacy Endpoint",
        0x4 => "Root Port",
        0x5 => "Upstream Port",
        0x6 => "Downstream Port",
        0x7 => "PCI-Express to PCI/PCI-X Bridge",
        0x8 => "PCI/PCI-X to PCI-Express Bridge",
        0x9 => "Root Complex Integrated Endpoint",
        0xa => "Root Complex Event Collector",
        _ => "Unknown",
    }
}

/// A link of encoded speed `code` (1 = 2.5 GT/s … 6 = 64 GT/s) and `width` lanes: its
/// speed as lspci spells it, its GT/s (0 for a reserved code) and its bandwidth.
pub fn link(code: u8, width: u8) -> Link {
    Link {
        speed: speed_label(code),
        speed_gts: speed_gts(code).unwrap_or(0.0),
        width,
        gbytes_per_s: gbytes_per_s(code, width),
    }
}

/// GT/s of an encoded link speed; `None` for codes the spec leaves reserved.
pub fn speed_gts(code: u8) -> Option<f64> {
    Some(match code {
        1 => 2.5,
        2 => 5.0,
        3 => 8.0,
        4 => 16.0,
        5 => 32.0,
        6 => 64.0,
        _ => return None,
    })
}

/// lspci's spelling of a speed: "2.5GT/s", "32GT/s", or "unknown (n)".
pub fn speed_label(code: u8) -> String {
    match speed_gts(code) {
        Some(g) if g.fract() != 0.0 => format!("{g}GT/s"),
        Some(g) => format!("{g:.0}GT/s"),
        None => format!("unknown ({code})"),
    }
}

/// Bytes per second one direction after line encoding, in GB/s (10^9).
pub fn gbytes_per_s(code: u8, width: u8) -> f64 {
    let per_lane = match code {
        1 => 2.5 * 8.0 / 10.0 / 8.0,
        2 => 5.0 * 8.0 / 10.0 / 8.0,
        3 => 8.0 * 128.0 / 130.0 / 8.0,
        4 => 16.0 * 128.0 / 130.0 / 8.0,
        5 => 32.0 * 128.0 / 130.0 / 8.0,
        6 => 64.0 * 242.0 / 256.0 / 8.0,
        _ => 0.0,
    };
    per_lane * f64::from(width)
}

/// Parses sysfs `current_link_speed`/`max_link_speed` ("8.0 GT/s PCIe", "2.5 GT/s") into a
/// speed code; `None` for "Unknown" and anything else.
pub fn parse_sysfs_speed(s: &str) -> Option<u8> {
    let gts: f64 = s.split_whitespace().next()?.parse().ok()?;
    (1u8..=6).find(|&c| speed_gts(c).is_some_and(|g| (g - gts).abs() < 0.01))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie3_x16_carries_15_75_gbytes() {
        assert!((gbytes_per_s(3, 16) - 15.754).abs() < 0.001);
        assert!((gbytes_per_s(5, 16) - 63.015).abs() < 0.001);
        assert_eq!(gbytes_per_s(0, 16), 0.0);
        assert_eq!(gbytes_per_s(7, 16), 0.0);
    }

    #[test]
    fn speed_labels_follow_lspci() {
        assert_eq!(speed_label(1), "2.5GT/s");
        assert_eq!(speed_label(5), "32GT/s");
        assert_eq!(speed_label(0), "unknown (0)");
    }

    #[test]
    fn sysfs_speed_strings_parse() {
        assert_eq!(parse_sysfs_speed("32.0 GT/s PCIe"), Some(5));
        assert_eq!(parse_sysfs_speed("2.5 GT/s"), Some(1));
        assert_eq!(parse_sysfs_speed("Unknown"), None);
        assert_eq!(parse_sysfs_speed(""), None);
    }

    #[test]
    fn version1_capability_has_no_v2_registers_and_truncation_is_none() {
        let mut cfg = vec![0u8; 0x60 + 0x14];
        cfg[0x62] = 0x01; // version 1, endpoint
        cfg[0x6c] = 0x43; // LnkCap 8GT/s x4
        cfg[0x72] = 0x43;
        let e = parse(&cfg, 0x60).expect("0x14 bytes readable");
        assert_eq!(e.v2, None);
        assert_eq!(e.link_capable, Some(link(3, 4)));
        let capable = e.link_capable.expect("an endpoint has a link");
        assert_eq!(
            (capable.speed.as_str(), capable.speed_gts, capable.width),
            ("8GT/s", 8.0, 4)
        );
        assert!(e.supported_speeds.is_empty());
        assert!(parse(&cfg[..0x70], 0x60).is_none());
    }

    #[test]
    fn integrated_endpoint_has_no_link_and_payload_sizes_decode() {
        let mut cfg = vec![0u8; 0x60 + 0x3c];
        cfg[0x62] = 0x92; // version 2, root complex integrated endpoint
        cfg[0x64] = 0x02; // DevCap: 512 B payload supported
        cfg[0x67] = 0x10; // DevCap bit 28: FLR
        put16(&mut cfg, 0x68, (1 << 5) | (2 << 12)); // DevCtl: 256 B payload, 512 B reads
        cfg[0x6c] = 0x43; // LnkCap 8GT/s x4, ignored without a link
        put16(&mut cfg, 0x8c, 0b1110); // LnkCap2: 2.5, 5 and 8 GT/s
        let e = parse(&cfg, 0x60).expect("0x3c bytes readable");
        assert_eq!(e.port_type, "Root Complex Integrated Endpoint");
        assert_eq!((e.link_capable, e.link_status), (None, None));
        assert_eq!(
            (e.max_payload_supported, e.max_payload, e.max_read_request),
            (512, 256, 512)
        );
        assert!(e.flr_capable);
        assert_eq!(e.supported_speeds, ["2.5GT/s", "5GT/s", "8GT/s"]);
    }

    fn put16(cfg: &mut [u8], at: usize, v: u16) {
        cfg[at..at + 2].copy_from_slice(&v.to_le_bytes());
    }
}
