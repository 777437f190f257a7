//! lspci's side of the parity check: `lspci -vvv -nn -D` text → [`LspciDevice`], and
//! the hex dumps of `lspci -x…` (read, and written back in the form `lspci -F` reads).
//! Pure text in, values out. The names tables turn lspci's capability names back into
//! ids; see the parent module for what maps to what.

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
pub(super) fn parse_region(body: &str) -> Region {
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
