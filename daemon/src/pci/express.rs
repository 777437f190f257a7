//! The PCI Express capability (id 0x10) and link arithmetic.
//!
//! Registers: PCIe Base 6.0 §7.5.3. Registers past LnkSta (0x12) exist only in
//! version 2 of the capability. Bandwidth per lane after line encoding: 8b/10b for
//! 2.5 and 5 GT/s, 128b/130b for 8–32 GT/s, 242B/256B FLIT for 64 GT/s — so a
//! PCIe 3.0 x16 link carries 15.75 GB/s each way (seed note: the R9700's root port).

use super::regs::*;

/// A decoded PCI Express capability.
#[derive(Debug, Clone, PartialEq)]
pub struct Express {
    pub version: u8,
    pub port_type: u8,
    pub slot_implemented: bool,
    pub interrupt_message: u8,
    pub devcap: u32,
    pub devctl: u16,
    pub devsta: u16,
    pub lnkcap: u32,
    pub lnkctl: u16,
    pub lnksta: u16,
    pub sltcap: u32,
    pub sltctl: u16,
    pub sltsta: u16,
    /// Version 2 registers; `None` for a version 1 capability or when unreadable.
    pub v2: Option<ExpressV2>,
}

/// The "2" registers of a version 2 capability: the model's own type.
pub use rig_model::ExpressV2;

/// A link's speed and width.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    /// The encoded speed (1 = 2.5 GT/s … 6 = 64 GT/s), as LnkCap/LnkSta hold it.
    pub speed_code: u8,
    pub width: u8,
}

/// Decodes the capability at `at`; `None` when its first 0x14 bytes are unreadable.
pub fn parse(cfg: &[u8], at: usize) -> Option<Express> {
    let flags = r16(cfg, at + PCI_EXP_FLAGS)?;
    let version = (flags & 0xf) as u8;
    let port_type = ((flags >> 4) & 0xf) as u8;
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
    Some(Express {
        version,
        port_type,
        slot_implemented: flags & PCI_EXP_FLAGS_SLOT != 0,
        interrupt_message: ((flags >> 9) & 0x1f) as u8,
        devcap: r32(cfg, at + PCI_EXP_DEVCAP)?,
        devctl: r16(cfg, at + PCI_EXP_DEVCTL)?,
        devsta: r16(cfg, at + PCI_EXP_DEVSTA)?,
        lnkcap: r32(cfg, at + PCI_EXP_LNKCAP)?,
        lnkctl: r16(cfg, at + PCI_EXP_LNKCTL)?,
        lnksta,
        sltcap: r32(cfg, at + PCI_EXP_SLTCAP).unwrap_or(0),
        sltctl: r16(cfg, at + PCI_EXP_SLTCTL).unwrap_or(0),
        sltsta: r16(cfg, at + PCI_EXP_SLTSTA).unwrap_or(0),
        v2,
    })
}

impl Express {
    /// What the port type field names (PCI_EXP_TYPE_* in pci_regs.h).
    pub fn port_type_name(&self) -> &'static str {
        match self.port_type {
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

    /// Whether this function has a link at all (integrated endpoints and event
    /// collectors do not).
    pub fn has_link(&self) -> bool {
        !matches!(self.port_type, 0x9 | 0xa)
    }

    /// Max payload the device supports, in bytes.
    pub fn max_payload_supported(&self) -> u32 {
        128 << (self.devcap & 7).min(5)
    }

    /// Max payload in use, in bytes.
    pub fn max_payload(&self) -> u32 {
        128 << ((self.devctl >> 5) & 7).min(5)
    }

    /// Max read request size, in bytes.
    pub fn max_read_request(&self) -> u32 {
        128 << ((self.devctl >> 12) & 7).min(5)
    }

    /// Function Level Reset support (DevCap bit 28).
    pub fn flr_capable(&self) -> bool {
        self.devcap & PCI_EXP_DEVCAP_FLR != 0
    }

    /// LnkCap: the fastest and widest the port can train.
    pub fn link_capable(&self) -> Link {
        Link {
            speed_code: (self.lnkcap & 0xf) as u8,
            width: ((self.lnkcap >> 4) & 0x3f) as u8,
        }
    }

    /// LnkSta: what the link trained to.
    pub fn link_status(&self) -> Link {
        Link {
            speed_code: (self.lnksta & 0xf) as u8,
            width: ((self.lnksta >> 4) & 0x3f) as u8,
        }
    }

    /// Speeds named by LnkCap2's supported-speeds vector (bits 7:1).
    pub fn supported_speeds(&self) -> Vec<u8> {
        let Some(v2) = self.v2 else { return Vec::new() };
        (1u8..=7).filter(|b| v2.lnkcap2 & (1 << b) != 0).collect()
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
        assert_eq!(
            e.link_capable(),
            Link {
                speed_code: 3,
                width: 4
            }
        );
        assert!(parse(&cfg[..0x70], 0x60).is_none());
    }
}
