//! Parity with pciutils: `lspci -vvv -nn -D` text and `lspci -xxxx` dumps, compared field
//! by field with what `rigctl show --json [-x]` answers (docs/h200.md, "Result: parity
//! holds on every function").
//!
//! Flow: lspci text → [`parse_lspci`] → [`LspciDevice`]; rigctl JSON → `rig_client::Device`;
//! [`compare`] → one [`Mismatch`] line per field that differs. [`compare_config`] checks
//! the bytes of an `lspci -xxxx` dump against `config_hex`; [`format_dump`] writes bytes in
//! the form `lspci -F` reads. Pure text in, values out: no I/O here (the host test in
//! `tests/parity_host.rs` runs the programs). Reading lspci's text is `parity/lspci.rs`;
//! this file compares.
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

mod lspci;

pub use lspci::{
    EXTENDED_NAMES, LspciCap, LspciDetail, LspciDevice, Region, STANDARD_NAMES, format_dump,
    parse_hex_dumps, parse_lspci,
};

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

#[cfg(test)]
mod tests;
