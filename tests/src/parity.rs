//! Parity with pciutils: `lspci -vvv -nn -D` text and `lspci -xxxx` dumps, compared field
//! by field with what `rigctl show --json [-x]` answers (issue 2's acceptance).
//!
//! Flow: lspci text → [`parse_lspci`] → [`LspciDevice`]; rigctl JSON → `rig_client::Device`;
//! [`compare`] → one [`Mismatch`] line per field that differs. [`compare_config`] checks
//! the bytes of an `lspci -xxxx` dump against `config_hex`; [`format_dump`] writes bytes in
//! the form `lspci -F` reads. Pure text in, values out: no I/O here (the host test in
//! `tests/parity_host.rs` runs the programs).
//!
//! What maps to what (lspci line → JSON field):
//! - title `BDF Class [cccc]: Vendor Device [vvvv:dddd] (rev rr) (prog-if pp [Name])` →
//!   `bdf`, `class_code` (cccc = bits 23:8, pp = bits 7:0), `names.class` (the subclass
//!   name, or the prog-if name, which rig prefers), `vendor_id`, `device_id`,
//!   `names.vendor` + `names.device` (lspci joins them: "V D", "V Device", "Device"),
//!   `revision`.
//! - `Subsystem: Name [ssvv:ssdd]` → `subsystem_vendor_id`/`subsystem_device_id` (for a
//!   bridge: the `bridge_subsystem` capability), `names.subsystem` ends the name.
//! - `Region N: Memory at A (64-bit, prefetchable) [disabled] [virtual] [size=S]`, or
//!   `I/O ports at A` → `bars[]` by `index`: `kind`, `address`, `is_64bit`,
//!   `prefetchable`, `size`, `decode_enabled` (= not `[disabled]`), `is_virtual`;
//!   `<unassigned>`/`<ignored>` → `assigned: false`. `Expansion ROM at` → `rom`.
//! - `Capabilities: [off] Name` (standard) and `Capabilities: [off vN] Name` (extended) →
//!   `capabilities[]`/`extended_capabilities[]`: the offsets in order, then `id` and
//!   `version` per offset. lspci prints names, not ids, and its names are not ours, so
//!   [`STANDARD_NAMES`]/[`EXTENDED_NAMES`] turn its names back into ids: e.g. "Vendor
//!   Specific Information" (09, or 0b extended), "Express (v2) Endpoint" (10), "Null" (00),
//!   "Latency Tolerance Reporting" (18), "Device Serial Number" (03), "Physical Resizable
//!   BAR" (15); ids it has no name for read "Capability ID 0x15" / "Extended Capability ID
//!   0x2a". A name missing from the tables (a newer lspci) is compared by offset only.
//! - `MSI: Enable+ Count=a/b Maskable+ 64bit+` → `msi`: `enabled`, `vectors_enabled` (a),
//!   `vectors_capable` (b), `per_vector_masking`, `is_64bit`.
//! - `MSI-X: Enable+ Count=n Masked-`, `Vector table: BAR=b offset=o`, `PBA: BAR=b
//!   offset=o` → `msi_x`: `enabled`, `table_size`, `function_masked`, `table_bar`,
//!   `table_offset`, `pba_bar`, `pba_offset`.
//! - `Express (vN) Type`, `LnkCap: … Speed S, Width xW`, `LnkSta: Speed S, Width xW` →
//!   `express`: `version`, `port_type`, `link_capable`, `link_status`.
//! - `BAR n: current size: X, supported: Y Z …` (Resizable BAR) → `resizable_bar.entries`,
//!   and for the physical capability `bars[n].resizable_sizes`/`resizable_current`.
//! - `Device Serial Number xx-…-xx` → `serial_number.serial`; extended `Vendor Specific
//!   Information: ID=i Rev=r Len=l` → `vsec`.
//! - `Kernel driver in use: d` → `sysfs.driver`; `IOMMU group: g` → `sysfs.iommu_group`.
//!
//! Two ways lspci can see less than rig (see [`Source`]): without root it reads 64 bytes
//! and prints `Capabilities: <access denied>`: then only the capabilities it printed are
//! compared and rig must say its config access is limited. With `lspci -F dump` it reads
//! config bytes only: driver, IOMMU group, sizes and `[virtual]` come from nowhere and
//! are not compared, and lspci 3.9 prints the upper half of each 64-bit BAR as a region of
//! its own (`Region 1: Memory at <unassigned> (32-bit, non-prefetchable)`), which is
//! skipped. lspci shows extended capabilities only after a PCIe or PCI-X capability.
//!
//! Reference: pciutils 3.9 `lspci.c` (`show_bases`, `show_rom`), `ls-caps.c`,
//! `ls-ecaps.c`, `lib/dump.c`. Not here: running lspci, rigd and rigctl
//! (`tests/parity_host.rs`), the guest captures (`vm::parity`).

use std::fmt;

use rig_client::{Bar, BarKind, CapDetail, Capability, Device};

/// Where lspci read the device from, which decides what it can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// sysfs on the machine rig runs on: everything is compared.
    Live,
    /// `lspci -F dump`: config bytes only.
    Dump,
}

/// One field that differs: `device field: lspci X, rig Y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub bdf: String,
    pub field: String,
    pub lspci: String,
    pub rig: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}: lspci {}, rig {}",
            self.bdf, self.field, self.lspci, self.rig
        )
    }
}

/// What `lspci -vvv -nn -D` printed for one function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LspciDevice {
    pub bdf: String,
    pub class_id: u16,
    pub class_name: String,
    pub prog_if: u8,
    pub prog_if_name: Option<String>,
    pub vendor_id: u16,
    pub device_id: u16,
    /// Vendor and device names as lspci joins them ("V D", "V Device" or "Device").
    pub name: String,
    pub revision: u8,
    /// Subsystem vendor, device and name.
    pub subsystem: Option<(u16, u16, String)>,
    pub regions: Vec<Region>,
    pub rom: Option<Region>,
    pub capabilities: Vec<LspciCap>,
    pub extended_capabilities: Vec<LspciCap>,
    /// `Capabilities: <access denied>`: the list above stops where lspci could not read.
    pub access_denied: bool,
    /// `<chain broken>` or `<chain looped>`.
    pub chain_problem: bool,
    pub driver: Option<String>,
    pub iommu_group: Option<String>,
}

/// A `Region N:` or `Expansion ROM at` line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Region {
    pub index: u8,
    pub io: bool,
    /// `None` for `<unassigned>`, `<ignored>` and broken 64-bit slots.
    pub address: Option<u64>,
    pub is_64bit: bool,
    pub prefetchable: bool,
    pub disabled: bool,
    pub is_virtual: bool,
    pub size: Option<u64>,
}

/// A `Capabilities: [off] …` line and the lines under it that are compared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LspciCap {
    pub offset: u16,
    /// Extended capabilities: the `vN` of `[100 vN]`.
    pub version: Option<u8>,
    /// The ids lspci's name stands for (two for "Virtual Channel"); empty if unknown.
    pub ids: Vec<u16>,
    pub text: String,
    pub detail: Option<LspciDetail>,
}

/// The registers lspci prints that are compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LspciDetail {
    Msi {
        enabled: bool,
        vectors_enabled: u32,
        vectors_capable: u32,
        maskable: bool,
        is_64bit: bool,
    },
    MsiX {
        enabled: bool,
        count: u16,
        masked: bool,
        table: Option<(u8, u32)>,
        pba: Option<(u8, u32)>,
    },
    Express {
        version: Option<u8>,
        port_type: String,
        lnkcap: Option<(String, u8)>,
        lnksta: Option<(String, u8)>,
    },
    Rebar {
        virtual_function: bool,
        /// (BAR, current size, supported sizes) in bytes.
        entries: Vec<(u8, Option<u64>, Vec<u64>)>,
    },
    SerialNumber(u64),
    Vsec {
        id: u16,
        rev: u8,
        length: u16,
    },
}

/// lspci's names of standard capabilities (`ls-caps.c`), as line prefixes, longest first
/// where one prefixes another.
pub const STANDARD_NAMES: &[(&str, u16)] = &[
    ("Null", 0x00),
    ("Power Management version", 0x01),
    ("AGP version", 0x02),
    ("Vital Product Data", 0x03),
    ("Slot ID", 0x04),
    ("MSI-X:", 0x11),
    ("MSI:", 0x05),
    ("CompactPCI hot-swap", 0x06),
    ("PCI-X", 0x07),
    ("HyperTransport", 0x08),
    ("Vendor Specific Information", 0x09),
    ("Debug port", 0x0a),
    ("CompactPCI central resource control", 0x0b),
    ("Hot-plug capable", 0x0c),
    ("Subsystem:", 0x0d),
    ("AGP3", 0x0e),
    ("Secure device", 0x0f),
    ("Express ", 0x10),
    ("SATA HBA", 0x12),
    ("PCI Advanced Features", 0x13),
    ("Enhanced Allocation", 0x14),
    ("Flattening Portal Bridge", 0x15),
];

/// lspci's names of extended capabilities (`ls-ecaps.c`); "Virtual Channel" is 02 or 09.
pub const EXTENDED_NAMES: &[(&str, &[u16])] = &[
    ("Null", &[0x00]),
    ("Advanced Error Reporting", &[0x01]),
    ("Virtual Channel", &[0x02, 0x09]),
    ("Device Serial Number", &[0x03]),
    ("Power Budgeting", &[0x04]),
    ("Root Complex Link", &[0x05]),
    ("Root Complex Internal Link", &[0x06]),
    ("Root Complex Event Collector", &[0x07]),
    ("Multi-Function Virtual Channel", &[0x08]),
    ("Root Complex Register Block", &[0x0a]),
    ("Vendor Specific Information", &[0x0b]),
    ("Access Control Services", &[0x0d]),
    ("Alternative Routing-ID Interpretation", &[0x0e]),
    ("Address Translation Service", &[0x0f]),
    ("Single Root I/O Virtualization", &[0x10]),
    ("Multi-Root I/O Virtualization", &[0x11]),
    ("Multicast", &[0x12]),
    ("Page Request Interface", &[0x13]),
    ("Physical Resizable BAR", &[0x15]),
    ("Dynamic Power Allocation", &[0x16]),
    ("Transaction Processing Hints", &[0x17]),
    ("Latency Tolerance Reporting", &[0x18]),
    ("Secondary PCI Express", &[0x19]),
    ("Protocol Multiplexing", &[0x1a]),
    ("Process Address Space ID", &[0x1b]),
    ("LN Requester", &[0x1c]),
    ("Downstream Port Containment", &[0x1d]),
    ("L1 PM Substates", &[0x1e]),
    ("Precision Time Measurement", &[0x1f]),
    ("PCI Express over M_PHY", &[0x20]),
    ("FRS Queueing", &[0x21]),
    ("Readiness Time Reporting", &[0x22]),
    ("Designated Vendor-Specific", &[0x23]),
    ("Virtual Resizable BAR", &[0x24]),
    ("Data Link Feature", &[0x25]),
    ("Physical Layer 16.0 GT/s", &[0x26]),
    ("Lane Margining at the Receiver", &[0x27]),
    ("Hierarchy ID", &[0x28]),
    ("Native PCIe Enclosure Management", &[0x29]),
    ("Physical Layer 32.0 GT/s", &[0x2a]),
    ("Data Object Exchange", &[0x2e]),
    ("Integrity and Data Encryption", &[0x30]),
    ("Physical Layer 64.0 GT/s", &[0x31]),
];

/// Parses the output of `lspci -vvv -nn [-D]` for one or many functions. Lines it does
/// not compare are skipped; a title it cannot read yields a device with only `bdf`.
#[must_use]
pub fn parse_lspci(text: &str) -> Vec<LspciDevice> {
    let mut devices: Vec<LspciDevice> = Vec::new();
    // Sub-lines belong to the capability printed last, standard or extended.
    let mut last_extended = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            devices.push(parse_title(line));
            last_extended = false;
            continue;
        }
        let Some(d) = devices.last_mut() else {
            continue;
        };
        if let Some(sub) = line.strip_prefix("\t\t") {
            let cap = if last_extended {
                d.extended_capabilities.last_mut()
            } else {
                d.capabilities.last_mut()
            };
            if let Some(cap) = cap {
                parse_sub_line(cap, sub.trim());
            }
        } else if let Some(rest) = line.trim().strip_prefix("Capabilities: ") {
            last_extended = parse_cap_line(d, rest);
        } else {
            parse_top_line(d, line.trim());
        }
    }
    devices
}

fn parse_title(line: &str) -> LspciDevice {
    let (bdf, rest) = line.split_once(' ').unwrap_or((line, ""));
    let mut d = LspciDevice {
        bdf: full_bdf(bdf),
        ..LspciDevice::default()
    };
    let Some((class, mut dev)) = rest.split_once("]: ") else {
        return d;
    };
    if let Some((name, id)) = class.rsplit_once(" [") {
        d.class_name = name.to_owned();
        d.class_id = hex16(id);
    }
    if let Some(at) = dev.rfind(" (prog-if ") {
        let p = dev[at + 10..].trim_end_matches(')');
        d.prog_if = p.get(..2).map_or(0, hex8);
        d.prog_if_name = p
            .get(2..)
            .and_then(|n| n.trim().strip_prefix('['))
            .map(|n| n.trim_end_matches(']').to_owned());
        dev = &dev[..at];
    }
    if let Some(at) = dev.rfind(" (rev ") {
        d.revision = hex8(dev[at + 6..].trim_end_matches(')'));
        dev = &dev[..at];
    }
    if let Some((name, ids)) = dev.rsplit_once(" [") {
        let (v, i) = ids
            .trim_end_matches(']')
            .split_once(':')
            .unwrap_or(("", ""));
        (d.name, d.vendor_id, d.device_id) = (name.to_owned(), hex16(v), hex16(i));
    }
    d
}

/// `00:06.0` → `0000:00:06.0`.
fn full_bdf(s: &str) -> String {
    if s.matches(':').count() == 1 {
        format!("0000:{s}")
    } else {
        s.to_owned()
    }
}

fn parse_top_line(d: &mut LspciDevice, line: &str) {
    if let Some(rest) = line.strip_prefix("Subsystem: ") {
        if let Some((name, ids)) = rest.rsplit_once(" [") {
            let (v, i) = ids
                .trim_end_matches(']')
                .split_once(':')
                .unwrap_or(("", ""));
            d.subsystem = Some((hex16(v), hex16(i), name.to_owned()));
        }
    } else if let Some(rest) = line.strip_prefix("Region ") {
        let (index, body) = rest.split_once(": ").unwrap_or(("", rest));
        let mut r = parse_region(body);
        r.index = index.parse().unwrap_or(u8::MAX);
        d.regions.push(r);
    } else if let Some(body) = line.strip_prefix("Expansion ROM at ") {
        d.rom = Some(parse_region(&format!("Memory at {body}")));
    } else if let Some(drv) = line.strip_prefix("Kernel driver in use: ") {
        d.driver = Some(drv.to_owned());
    } else if let Some(g) = line.strip_prefix("IOMMU group: ") {
        d.iommu_group = Some(g.to_owned());
    } else if line.starts_with("<access denied") {
        d.access_denied = true;
    }
}

/// The part of a region line after `Region N: `.
fn parse_region(body: &str) -> Region {
    let body = body.replace("[virtual] ", "[virtual]");
    let io = body.contains("I/O ports at ");
    let at = body.split_once(" at ").map_or("", |(_, a)| a);
    let addr = at.split_whitespace().next().unwrap_or("");
    Region {
        index: 0,
        io,
        address: u64::from_str_radix(addr, 16).ok(),
        is_64bit: body.contains("(64-bit,"),
        prefetchable: body.contains(", prefetchable)"),
        disabled: body.contains("[disabled"),
        is_virtual: body.contains("[virtual]"),
        size: body
            .split_once("[size=")
            .and_then(|(_, s)| parse_size(s.split(']').next().unwrap_or(""))),
    }
}

/// `16M` (lspci `show_size`) or `256GB` (Resizable BAR) → bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches('B');
    let digits = s.trim_end_matches(char::is_alphabetic);
    let shift = match &s[digits.len()..] {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "P" => 50,
        "E" => 60,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Parses a `Capabilities:` line; returns whether it was an extended capability.
fn parse_cap_line(d: &mut LspciDevice, rest: &str) -> bool {
    if rest.starts_with("<access denied>") {
        d.access_denied = true;
        return false;
    }
    let Some((pos, text)) = rest.strip_prefix('[').and_then(|r| r.split_once("] ")) else {
        return false;
    };
    if text.starts_with("<chain") {
        d.chain_problem = true;
        return false;
    }
    let (off, version) = match pos.split_once(" v") {
        Some((o, v)) => (o, v.parse().ok()),
        None => (pos, None),
    };
    let extended = version.is_some() || off.len() == 3;
    let mut cap = LspciCap {
        offset: hex16(off),
        version,
        ids: cap_ids(text, extended),
        text: text.to_owned(),
        detail: None,
    };
    cap.detail = first_line_detail(text, &cap.ids);
    if extended {
        d.extended_capabilities.push(cap);
    } else {
        d.capabilities.push(cap);
    }
    extended
}

fn cap_ids(text: &str, extended: bool) -> Vec<u16> {
    let numbered = if extended {
        "Extended Capability ID "
    } else {
        "Capability ID "
    };
    if let Some(id) = text.strip_prefix(numbered) {
        let id = id.split_whitespace().next().unwrap_or("");
        return vec![hex16(id.trim_start_matches("0x"))];
    }
    if extended {
        EXTENDED_NAMES
            .iter()
            .find(|(n, _)| text.starts_with(n))
            .map_or_else(Vec::new, |(_, ids)| ids.to_vec())
    } else {
        STANDARD_NAMES
            .iter()
            .find(|(n, _)| text.starts_with(n))
            .map_or_else(Vec::new, |(_, id)| vec![*id])
    }
}

/// Details lspci prints on the capability's own line.
fn first_line_detail(text: &str, ids: &[u16]) -> Option<LspciDetail> {
    let flag = |name: &str| text.contains(&format!("{name}+"));
    let field = |name: &str| {
        text.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .map(str::to_owned)
    };
    if let Some(rest) = text.strip_prefix("MSI: ") {
        let count = field("Count=").unwrap_or_default();
        let (a, b) = count.split_once('/').unwrap_or(("0", "0"));
        return Some(LspciDetail::Msi {
            enabled: rest.contains("Enable+"),
            vectors_enabled: a.parse().unwrap_or(0),
            vectors_capable: b.parse().unwrap_or(0),
            maskable: flag("Maskable"),
            is_64bit: flag("64bit"),
        });
    }
    if text.starts_with("MSI-X: ") {
        return Some(LspciDetail::MsiX {
            enabled: flag("Enable"),
            count: field("Count=").and_then(|c| c.parse().ok()).unwrap_or(0),
            masked: flag("Masked"),
            table: None,
            pba: None,
        });
    }
    if let Some(rest) = text.strip_prefix("Express ") {
        let (version, kind) = match rest.strip_prefix("(v") {
            Some(r) => {
                let (v, k) = r.split_once(") ").unwrap_or(("", r));
                (v.parse().ok(), k)
            }
            None => (None, rest),
        };
        let kind = kind.split(", MSI ").next().unwrap_or(kind);
        return Some(LspciDetail::Express {
            version,
            port_type: kind.split(" (Slot").next().unwrap_or(kind).to_owned(),
            lnkcap: None,
            lnksta: None,
        });
    }
    if text.ends_with("Resizable BAR") {
        return Some(LspciDetail::Rebar {
            virtual_function: text.starts_with("Virtual"),
            entries: Vec::new(),
        });
    }
    if let Some(sn) = text.strip_prefix("Device Serial Number ") {
        return u64::from_str_radix(&sn.trim().replace('-', ""), 16)
            .ok()
            .map(LspciDetail::SerialNumber);
    }
    if ids == [0x0b] {
        let id = field("ID=")?;
        return Some(LspciDetail::Vsec {
            id: hex16(&id),
            rev: field("Rev=").and_then(|r| r.parse().ok()).unwrap_or(0),
            length: hex16(&field("Len=").unwrap_or_default()),
        });
    }
    None
}

/// Lines under a capability: MSI-X table and PBA, LnkCap/LnkSta, Resizable BAR entries.
fn parse_sub_line(cap: &mut LspciCap, line: &str) {
    let bar_offset = |s: &str| -> Option<(u8, u32)> {
        let (bar, off) = s.strip_prefix("BAR=")?.split_once(" offset=")?;
        Some((bar.parse().ok()?, u32::from_str_radix(off.trim(), 16).ok()?))
    };
    let link = |s: &str| -> Option<(String, u8)> {
        let speed = s.split_once("Speed ")?.1.split([',', ' ']).next()?;
        let width = s.split_once("Width x")?.1;
        let width = width.split(|c: char| !c.is_ascii_digit()).next()?;
        Some((speed.to_owned(), width.parse().ok()?))
    };
    match &mut cap.detail {
        Some(LspciDetail::MsiX { table, pba, .. }) => {
            if let Some(r) = line.strip_prefix("Vector table: ") {
                *table = bar_offset(r);
            } else if let Some(r) = line.strip_prefix("PBA: ") {
                *pba = bar_offset(r);
            }
        }
        Some(LspciDetail::Express { lnkcap, lnksta, .. }) => {
            if let Some(r) = line.strip_prefix("LnkCap:") {
                *lnkcap = link(r);
            } else if let Some(r) = line.strip_prefix("LnkSta:") {
                *lnksta = link(r);
            }
        }
        Some(LspciDetail::Rebar { entries, .. }) => {
            let Some((bar, rest)) = line
                .strip_prefix("BAR ")
                .and_then(|r| r.split_once(": current size: "))
            else {
                return;
            };
            let (current, supported) = rest.split_once(", supported:").unwrap_or((rest, ""));
            entries.push((
                bar.parse().unwrap_or(u8::MAX),
                parse_size(current),
                supported
                    .split_whitespace()
                    .filter_map(parse_size)
                    .collect(),
            ));
        }
        _ => {}
    }
}

fn hex16(s: &str) -> u16 {
    u16::from_str_radix(s.trim(), 16).unwrap_or(u16::MAX)
}

fn hex8(s: &str) -> u8 {
    u8::from_str_radix(s.trim(), 16).unwrap_or(u8::MAX)
}

/// Collects mismatches for one device.
struct Diff<'a> {
    bdf: &'a str,
    out: Vec<Mismatch>,
}

impl Diff<'_> {
    fn check<T: fmt::Debug + PartialEq>(&mut self, field: impl Into<String>, lspci: T, rig: T) {
        if lspci != rig {
            self.out.push(Mismatch {
                bdf: self.bdf.to_owned(),
                field: field.into(),
                lspci: format!("{lspci:?}"),
                rig: format!("{rig:?}"),
            });
        }
    }
}

/// Compares every device of an lspci listing with rig's devices, by address; a device
/// only one side has is a mismatch too.
#[must_use]
pub fn compare_all(lspci: &[LspciDevice], rig: &[Device], source: Source) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for l in lspci {
        match rig.iter().find(|d| d.bdf == l.bdf) {
            Some(d) => out.extend(compare(l, d, source)),
            None => out.push(Mismatch {
                bdf: l.bdf.clone(),
                field: "device".to_owned(),
                lspci: "present".to_owned(),
                rig: "absent".to_owned(),
            }),
        }
    }
    for d in rig.iter().filter(|d| !lspci.iter().any(|l| l.bdf == d.bdf)) {
        out.push(Mismatch {
            bdf: d.bdf.clone(),
            field: "device".to_owned(),
            lspci: "absent".to_owned(),
            rig: "present".to_owned(),
        });
    }
    out
}

/// Compares what lspci printed for one function with rig's decode of it.
#[must_use]
pub fn compare(l: &LspciDevice, rig: &Device, source: Source) -> Vec<Mismatch> {
    let mut d = Diff {
        bdf: &l.bdf,
        out: Vec::new(),
    };
    d.check("bdf", l.bdf.as_str(), rig.bdf.as_str());
    identity(&mut d, l, rig);
    regions(&mut d, l, rig, source);
    capabilities(&mut d, l, rig);
    if source == Source::Live {
        d.check(
            "sysfs.driver",
            l.driver.as_deref(),
            rig.sysfs.driver.as_deref(),
        );
        d.check(
            "sysfs.iommu_group",
            l.iommu_group.as_deref(),
            rig.sysfs.iommu_group.as_deref(),
        );
    }
    d.out
}

fn identity(d: &mut Diff<'_>, l: &LspciDevice, rig: &Device) {
    d.check("vendor_id", l.vendor_id, rig.vendor_id);
    d.check("device_id", l.device_id, rig.device_id);
    d.check("revision", l.revision, rig.revision);
    d.check("class_code", u32::from(l.class_id), rig.class_code >> 8);
    d.check(
        "class_code (prog-if)",
        u32::from(l.prog_if),
        rig.class_code & 0xff,
    );
    let n = &rig.names;
    let joined = match (&n.vendor, &n.device) {
        (Some(v), Some(dev)) => format!("{v} {dev}"),
        (Some(v), None) => format!("{v} Device"),
        (None, _) => "Device".to_owned(),
    };
    d.check(
        "names.vendor + names.device",
        l.name.as_str(),
        joined.as_str(),
    );
    // lspci prints the subclass name (or "Class"); rig prefers the prog-if name.
    let class_ok = match &n.class {
        Some(c) => *c == l.class_name || l.prog_if_name.as_ref() == Some(c),
        None => l.class_name == "Class",
    };
    if !class_ok {
        d.check("names.class", Some(&l.class_name), n.class.as_ref());
    }
    let ours = match (&rig.bridge, bridge_subsystem(rig)) {
        (Some(_), Some(ids)) => Some(ids),
        _ => Some((rig.subsystem_vendor_id, rig.subsystem_device_id))
            .filter(|&(v, _)| v != 0 && v != 0xffff),
    };
    d.check(
        "subsystem ids",
        l.subsystem.as_ref().map(|s| (s.0, s.1)),
        ours,
    );
    if let Some((_, _, name)) = &l.subsystem {
        let ok = match &n.subsystem {
            Some(s) => name == s || name.ends_with(&format!(" {s}")),
            None => name == "Device" || name.ends_with(" Device"),
        };
        if !ok {
            d.check("names.subsystem", Some(name), n.subsystem.as_ref());
        }
    }
}

fn bridge_subsystem(rig: &Device) -> Option<(u16, u16)> {
    rig.capabilities.iter().find_map(|c| match c.detail {
        Some(CapDetail::BridgeSubsystem {
            vendor_id,
            device_id,
        }) => Some((vendor_id, device_id)),
        _ => None,
    })
}

fn regions(d: &mut Diff<'_>, l: &LspciDevice, rig: &Device, source: Source) {
    let mut shown: Vec<&Region> = Vec::new();
    for r in &l.regions {
        // lspci -F: the upper half of a 64-bit BAR printed as a region of its own.
        let upper_half = shown
            .last()
            .is_some_and(|p| !p.io && p.is_64bit && p.index + 1 == r.index);
        if !(source == Source::Dump && upper_half) {
            shown.push(r);
        }
    }
    let lspci_idx: Vec<u8> = shown.iter().map(|r| r.index).collect();
    let rig_idx: Vec<u8> = rig.bars.iter().map(|b| b.index).collect();
    d.check("bars (indices)", &lspci_idx, &rig_idx);
    for r in shown {
        let Some(b) = rig.bars.iter().find(|b| b.index == r.index) else {
            continue;
        };
        region(d, &format!("bars[{}]", r.index), r, b, source);
    }
    let rom = rig.rom.as_ref();
    d.check("rom", l.rom.is_some(), rom.is_some());
    if let (Some(r), Some(m)) = (&l.rom, rom) {
        if let Some(a) = r.address {
            d.check("rom.address", a, m.address);
        }
        if source == Source::Live {
            d.check("rom.size", r.size.unwrap_or(0), m.size);
        }
    }
}

fn region(d: &mut Diff<'_>, f: &str, r: &Region, b: &Bar, source: Source) {
    d.check(format!("{f}.kind"), r.io, b.kind == BarKind::Io);
    if !r.io {
        d.check(format!("{f}.is_64bit"), r.is_64bit, b.is_64bit);
        d.check(format!("{f}.prefetchable"), r.prefetchable, b.prefetchable);
    }
    match r.address {
        Some(a) => d.check(format!("{f}.address"), a, b.address),
        None if source == Source::Live => d.check(format!("{f}.assigned"), false, b.assigned),
        None => {}
    }
    if !r.is_virtual {
        d.check(format!("{f}.decode_enabled"), !r.disabled, b.decode_enabled);
    }
    if source == Source::Live {
        d.check(format!("{f}.size"), r.size.unwrap_or(0), b.size);
        d.check(format!("{f}.is_virtual"), r.is_virtual, b.is_virtual);
    }
}

fn capabilities(d: &mut Diff<'_>, l: &LspciDevice, rig: &Device) {
    cap_list(d, "capabilities", &l.capabilities, &rig.capabilities, rig);
    if l.access_denied {
        d.check(
            "config_access.limited",
            true,
            rig.config_access.limited.is_some(),
        );
        return;
    }
    d.check(
        "chain_problems",
        l.chain_problem,
        !rig.chain_problems.is_empty(),
    );
    // lspci walks the extended list only after a PCIe or PCI-X capability.
    if l.capabilities
        .iter()
        .any(|c| c.ids == [0x10] || c.ids == [0x07])
    {
        cap_list(
            d,
            "extended_capabilities",
            &l.extended_capabilities,
            &rig.extended_capabilities,
            rig,
        );
    }
}

fn cap_list(d: &mut Diff<'_>, f: &str, l: &[LspciCap], rig: &[Capability], dev: &Device) {
    let offsets = |o: Vec<u16>| o.iter().map(|o| format!("{o:#x}")).collect::<Vec<_>>();
    d.check(
        format!("{f} (offsets)"),
        offsets(l.iter().map(|c| c.offset).collect()),
        offsets(rig.iter().map(|c| c.offset).collect()),
    );
    for c in l {
        let Some(r) = rig.iter().find(|r| r.offset == c.offset) else {
            continue;
        };
        let at = format!("{f}[{:#x}]", c.offset);
        if !c.ids.is_empty() && !c.ids.contains(&r.id) {
            d.check(format!("{at}.id ({})", c.text), c.ids[0], r.id);
        }
        if let Some(v) = c.version {
            d.check(format!("{at}.version"), v, r.version);
        }
        if let Some(detail) = &c.detail {
            cap_detail(d, &at, detail, r.detail.as_ref(), dev);
        }
    }
}

fn cap_detail(d: &mut Diff<'_>, at: &str, l: &LspciDetail, r: Option<&CapDetail>, dev: &Device) {
    match (l, r) {
        (
            LspciDetail::Msi {
                enabled,
                vectors_enabled,
                vectors_capable,
                maskable,
                is_64bit,
            },
            Some(CapDetail::Msi {
                enabled: e,
                vectors_enabled: ve,
                vectors_capable: vc,
                per_vector_masking: m,
                is_64bit: b,
                ..
            }),
        ) => {
            d.check(format!("{at}.msi.enabled"), enabled, e);
            d.check(
                format!("{at}.msi.vectors (enabled/capable)"),
                (vectors_enabled, vectors_capable),
                (ve, vc),
            );
            d.check(format!("{at}.msi.per_vector_masking"), maskable, m);
            d.check(format!("{at}.msi.is_64bit"), is_64bit, b);
        }
        (
            LspciDetail::MsiX {
                enabled,
                count,
                masked,
                table,
                pba,
            },
            Some(CapDetail::MsiX {
                enabled: e,
                function_masked: m,
                table_size,
                table_bar,
                table_offset,
                pba_bar,
                pba_offset,
            }),
        ) => {
            d.check(format!("{at}.msi_x.enabled"), enabled, e);
            d.check(format!("{at}.msi_x.table_size"), count, table_size);
            d.check(format!("{at}.msi_x.function_masked"), masked, m);
            d.check(
                format!("{at}.msi_x.table (bar, offset)"),
                *table,
                Some((*table_bar, *table_offset)),
            );
            d.check(
                format!("{at}.msi_x.pba (bar, offset)"),
                *pba,
                Some((*pba_bar, *pba_offset)),
            );
        }
        (
            LspciDetail::Express {
                version,
                port_type,
                lnkcap,
                lnksta,
            },
            Some(CapDetail::Express(e)),
        ) => {
            if let Some(v) = version {
                d.check(format!("{at}.express.version"), *v, e.version);
            }
            d.check(format!("{at}.express.port_type"), port_type, &e.port_type);
            let link = |l: Option<&rig_client::Link>| l.map(|l| (l.speed.clone(), l.width));
            d.check(
                format!("{at}.express.link_capable"),
                lnkcap.clone(),
                link(e.link_capable.as_ref()),
            );
            d.check(
                format!("{at}.express.link_status"),
                lnksta.clone(),
                link(e.link_status.as_ref()),
            );
        }
        (
            LspciDetail::Rebar {
                virtual_function,
                entries,
            },
            Some(CapDetail::ResizableBar {
                virtual_function: v,
                entries: ours,
            }),
        ) => {
            d.check(format!("{at}.virtual_function"), virtual_function, v);
            let ours: Vec<_> = ours
                .iter()
                .map(|e| (e.bar, Some(e.current_size), e.supported_sizes.clone()))
                .collect();
            d.check(format!("{at}.resizable_bar.entries"), entries, &ours);
            if !virtual_function {
                for (bar, current, sizes) in entries {
                    let b = dev.bars.iter().find(|b| b.index == *bar);
                    d.check(
                        format!("bars[{bar}].resizable (current, sizes)"),
                        Some((*current, sizes.clone())),
                        b.map(|b| (b.resizable_current, b.resizable_sizes.clone())),
                    );
                }
            }
        }
        (LspciDetail::SerialNumber(s), Some(CapDetail::SerialNumber { serial, .. })) => {
            d.check(format!("{at}.serial"), s, serial);
        }
        (
            LspciDetail::Vsec { id, rev, length },
            Some(CapDetail::Vsec {
                vsec_id,
                vsec_rev,
                length: n,
            }),
        ) => {
            d.check(
                format!("{at}.vsec (id, rev, length)"),
                (id, rev, length),
                (vsec_id, vsec_rev, n),
            );
        }
        (l, r) => d.check(
            format!("{at}.detail"),
            Some(detail_kind(l)),
            r.map(rig_detail_kind),
        ),
    }
}

fn detail_kind(l: &LspciDetail) -> &'static str {
    match l {
        LspciDetail::Msi { .. } => "msi",
        LspciDetail::MsiX { .. } => "msi_x",
        LspciDetail::Express { .. } => "express",
        LspciDetail::Rebar { .. } => "resizable_bar",
        LspciDetail::SerialNumber(_) => "serial_number",
        LspciDetail::Vsec { .. } => "vsec",
    }
}

fn rig_detail_kind(r: &CapDetail) -> &'static str {
    match r {
        CapDetail::Msi { .. } => "msi",
        CapDetail::MsiX { .. } => "msi_x",
        CapDetail::Express(_) => "express",
        CapDetail::ResizableBar { .. } => "resizable_bar",
        CapDetail::SerialNumber { .. } => "serial_number",
        CapDetail::Vsec { .. } => "vsec",
        _ => "other",
    }
}

/// The config bytes of each function in `lspci -x`/`-xxx`/`-xxxx` output, by address.
#[must_use]
pub fn parse_hex_dumps(text: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let dump = line.split_once(": ").filter(|(off, _)| {
            !off.is_empty() && off.len() <= 8 && off.chars().all(|c| c.is_ascii_hexdigit())
        });
        let Some((off, rest)) = dump else {
            let bdf = line.split_whitespace().next().unwrap_or_default();
            out.push((full_bdf(bdf), Vec::new()));
            continue;
        };
        let Some((_, bytes)) = out.last_mut() else {
            continue;
        };
        if usize::from_str_radix(off, 16).ok() == Some(bytes.len()) {
            bytes.extend(
                rest.split_whitespace()
                    .map_while(|b| u8::from_str_radix(b, 16).ok()),
            );
        }
    }
    out
}

/// Checks that the bytes lspci dumped equal rig's `config_hex`; names up to 16 offsets
/// that differ.
#[must_use]
pub fn compare_config(bdf: &str, lspci: &[u8], config_hex: &str) -> Vec<Mismatch> {
    let mut d = Diff {
        bdf,
        out: Vec::new(),
    };
    let rig: Vec<u8> = config_hex
        .as_bytes()
        .chunks(2)
        .map_while(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
        })
        .collect();
    d.check("config_hex (length)", lspci.len(), rig.len());
    let differ: Vec<String> = lspci
        .iter()
        .zip(&rig)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, (a, b))| format!("{i:#05x}: {a:02x}/{b:02x}"))
        .collect();
    if !differ.is_empty() {
        let n = differ.len();
        let shown = differ.into_iter().take(16).collect::<Vec<_>>().join(", ");
        d.out.push(Mismatch {
            bdf: bdf.to_owned(),
            field: format!("config_hex ({n} bytes differ, lspci/rig)"),
            lspci: shown,
            rig: "see left".to_owned(),
        });
    }
    d.out
}

/// Config bytes in the form `lspci -xxxx` prints and `lspci -F` reads: a title line
/// (`lib/dump.c` wants the address followed by a space), then 16 bytes a line.
#[must_use]
pub fn format_dump(bdf: &str, title: &str, bytes: &[u8]) -> String {
    let mut s = format!("{bdf} {title}\n");
    for (i, row) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
        s.push_str(&format!("{:02x}: {}\n", i * 16, hex.join(" ")));
    }
    s.push('\n');
    s
}

#[cfg(test)]
mod tests;
