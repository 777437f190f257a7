//! `rigctl show BDF`: the full decode, grouped the way a person reads it.

use std::io::{self, Write};

use rig_client::{CapDetail, Capability, Device, Express};

use crate::fmt;

pub fn print(out: &mut impl Write, d: &Device, json: bool, hex: bool) -> io::Result<()> {
    if json {
        let mut v = serde_json::to_value(d)?;
        if hex {
            v["config_hex"] = serde_json::Value::String(hex_string(&d.config));
        }
        serde_json::to_writer_pretty(&mut *out, &v)?;
        return writeln!(out);
    }
    writeln!(out, "{}", fmt::title(d))?;
    identity(out, d)?;
    host(out, d)?;
    link(out, d)?;
    bars(out, d)?;
    caps(out, "Capabilities", &d.capabilities, false)?;
    caps(out, "Extended capabilities", &d.extended_capabilities, true)?;
    if let Some(why) = &d.config_access.limited {
        writeln!(out, "\nNote: {why}")?;
    }
    if !d.chain_problems.is_empty() {
        writeln!(out, "\nProblems")?;
        for p in &d.chain_problems {
            writeln!(out, "  {p}")?;
        }
    }
    if hex {
        writeln!(out, "\nConfig space ({} bytes)", d.config.len())?;
        for (i, row) in d.config.chunks(16).enumerate() {
            let bytes: Vec<String> = row.iter().map(|b| format!("{b:02x}")).collect();
            writeln!(out, "  {:03x}: {}", i * 16, bytes.join(" "))?;
        }
    }
    Ok(())
}

fn hex_string(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn row(out: &mut impl Write, label: &str, value: impl std::fmt::Display) -> io::Result<()> {
    writeln!(out, "  {label:<12}{value}")
}

fn identity(out: &mut impl Write, d: &Device) -> io::Result<()> {
    if let Some(g) = &d.gpu {
        row(
            out,
            "GPU",
            format!("{} {} ({})", g.vendor, g.chip, g.family),
        )?;
    }
    row(
        out,
        "Subsystem",
        format!(
            "{} {}",
            fmt::named(d.names.subsystem_vendor.as_deref(), d.subsystem_vendor_id),
            d.names.subsystem.clone().map_or(
                format!("[{:04x}]", d.subsystem_device_id),
                |n| format!("{n} [{:04x}]", d.subsystem_device_id)
            )
        ),
    )?;
    let h = &d.header;
    row(
        out,
        "Header",
        format!(
            "type {}{}, command {:#06x} ({}), status {:#06x}",
            h.header_type,
            if h.multifunction {
                " multifunction"
            } else {
                ""
            },
            h.command,
            command_flags(h.command),
            h.status
        ),
    )?;
    if h.interrupt_pin != 0 {
        row(
            out,
            "Interrupt",
            format!(
                "pin {} routed to IRQ {}",
                (b'A' + h.interrupt_pin - 1) as char,
                d.sysfs.irq.unwrap_or(u32::from(h.interrupt_line))
            ),
        )?;
    }
    if let Some(b) = &d.bridge {
        row(
            out,
            "Bus",
            format!(
                "primary={:02x} secondary={:02x} subordinate={:02x}",
                b.primary_bus, b.secondary_bus, b.subordinate_bus
            ),
        )?;
        for (name, w) in [
            ("I/O behind", &b.io),
            ("Mem behind", &b.memory),
            ("Pref behind", &b.prefetchable),
        ] {
            if w.enabled {
                row(
                    out,
                    name,
                    format!(
                        "{:#x}-{:#x} [size={}]",
                        w.base,
                        w.limit,
                        fmt::size(w.limit - w.base + 1)
                    ),
                )?;
            }
        }
    }
    Ok(())
}

fn command_flags(c: u16) -> String {
    let f = |bit: u16, name: &str| format!("{name}{}", if c & bit != 0 { '+' } else { '-' });
    [
        f(1, "I/O"),
        f(2, "Mem"),
        f(4, "BusMaster"),
        f(0x400, "DisINTx"),
    ]
    .join(" ")
}

fn host(out: &mut impl Write, d: &Device) -> io::Result<()> {
    let s = &d.sysfs;
    let driver = s.driver.as_deref().unwrap_or("none");
    match &s.driver_override {
        Some(o) => row(out, "Driver", format!("{driver} (driver_override={o})"))?,
        None => row(out, "Driver", driver)?,
    }
    match &s.iommu_group {
        Some(g) => row(
            out,
            "IOMMU",
            format!("group {g}: {}", s.iommu_group_members.join(" ")),
        )?,
        None => row(out, "IOMMU", "no group (no IOMMU, or it is off)")?,
    }
    row(
        out,
        "NUMA",
        format!(
            "node {}, local CPUs {}",
            s.numa_node.map_or("unknown".to_owned(), |n| n.to_string()),
            s.local_cpulist.as_deref().unwrap_or("?")
        ),
    )?;
    if let Some(pf) = &s.physfn {
        row(out, "SR-IOV", format!("virtual function of {pf}"))?;
    }
    row(
        out,
        "Power",
        format!(
            "{}, {}{}",
            s.power_state.as_deref().unwrap_or("?"),
            if s.enabled { "enabled" } else { "not enabled" },
            if s.boot_vga { ", boot VGA" } else { "" }
        ),
    )?;
    row(
        out,
        "Reset",
        if s.reset_methods.is_empty() {
            "no method".to_owned()
        } else {
            s.reset_methods.join(" ")
        },
    )?;
    if !s.upstream.is_empty() {
        row(out, "Upstream", s.upstream.join(" → "))?;
    }
    Ok(())
}

fn link(out: &mut impl Write, d: &Device) -> io::Result<()> {
    let b = &d.link;
    let Some(own) = b.hops.first() else {
        return Ok(());
    };
    let Some(l) = &own.link else { return Ok(()) };
    let cap = own
        .capable
        .as_ref()
        .map(|c| format!(" (capable {})", fmt::link(c)))
        .unwrap_or_default();
    row(
        out,
        "Link",
        format!(
            "{}{cap} = {:.2} GB/s each way",
            fmt::link(l),
            l.gbytes_per_s
        ),
    )?;
    for h in b.hops.iter().skip(1) {
        if let Some(hl) = &h.link {
            row(
                out,
                "",
                format!(
                    "↑ {} {} = {:.2} GB/s",
                    h.bdf,
                    fmt::link(hl),
                    hl.gbytes_per_s
                ),
            )?;
        }
    }
    match (&b.limited_by, b.bottleneck_gbytes_per_s) {
        (Some(limit), _) => row(
            out,
            "Bottleneck",
            format!("⚠ {limit}: host copies stop there"),
        )?,
        (None, Some(g)) => row(out, "Bottleneck", format!("none upstream; {g:.2} GB/s"))?,
        _ => {}
    }
    for s in &b.shared {
        let each = s
            .gbytes_per_s_each
            .map(|g| format!(" ({g:.2} GB/s each when all copy)"))
            .unwrap_or_default();
        row(
            out,
            "Shared",
            format!("↑ {} with {}{each}", s.bdf, s.with.join(", ")),
        )?;
    }
    if let Some(g) = b.contended_gbytes_per_s {
        row(
            out,
            "Contended",
            format!("{g:.2} GB/s when every GPU sharing these hops copies"),
        )?;
    }
    Ok(())
}

fn bars(out: &mut impl Write, d: &Device) -> io::Result<()> {
    if d.bars.is_empty() && d.rom.is_none() {
        return Ok(());
    }
    writeln!(out, "\nBARs")?;
    for b in &d.bars {
        let kind = match b.kind {
            rig_client::BarKind::Io => "I/O ports".to_owned(),
            rig_client::BarKind::Memory => format!(
                "Memory ({}-bit, {})",
                if b.is_64bit { 64 } else { 32 },
                if b.prefetchable {
                    "prefetchable"
                } else {
                    "non-prefetchable"
                }
            ),
        };
        let mut line = format!("  BAR{} {kind} at {:#x}", b.index, b.address);
        if b.size != 0 {
            line.push_str(&format!(" [size={}]", fmt::size(b.size)));
        }
        if !b.assigned {
            line.push_str(" [unassigned]");
        }
        if !b.decode_enabled {
            line.push_str(" [disabled]");
        }
        if b.is_virtual {
            line.push_str(" [virtual]");
        }
        if !b.resizable_sizes.is_empty() {
            let sizes: Vec<String> = b.resizable_sizes.iter().map(|s| fmt::size(*s)).collect();
            line.push_str(&format!(
                "  resizable: {} (current {})",
                sizes.join(" "),
                b.resizable_current.map_or("?".to_owned(), fmt::size)
            ));
        }
        if b.resize_file {
            line.push_str(&format!("  [resource{}_resize]", b.index));
        }
        writeln!(out, "{line}")?;
    }
    if let Some(r) = &d.rom {
        writeln!(
            out,
            "  ROM  at {:#x} [size={}]{}",
            r.address,
            fmt::size(r.size),
            if r.enabled { "" } else { " [disabled]" }
        )?;
    }
    Ok(())
}

fn caps(out: &mut impl Write, title: &str, list: &[Capability], extended: bool) -> io::Result<()> {
    if list.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n{title}")?;
    for c in list {
        let at = if extended {
            format!("[{:03x} v{}]", c.offset, c.version)
        } else {
            format!("[{:02x}]", c.offset)
        };
        let id = if c.name == "Unknown" {
            format!("Unknown id {:#06x}", c.id)
        } else {
            c.name.clone()
        };
        let detail = c.detail.as_ref().map(detail).unwrap_or_default();
        writeln!(
            out,
            "  {at} {id}{}{detail}",
            if detail.is_empty() { "" } else { ": " }
        )?;
    }
    Ok(())
}

fn pm(b: bool) -> char {
    if b { '+' } else { '-' }
}

fn detail(d: &CapDetail) -> String {
    match d {
        CapDetail::PowerManagement {
            version,
            d1,
            d2,
            power_state,
            pme_enabled,
            ..
        } => format!(
            "version {version}, D1{} D2{}, state D{power_state}, PME-Enable{}",
            pm(*d1),
            pm(*d2),
            pm(*pme_enabled)
        ),
        CapDetail::Msi {
            enabled,
            vectors_capable,
            vectors_enabled,
            is_64bit,
            per_vector_masking,
            ..
        } => format!(
            "Enable{} Count={vectors_enabled}/{vectors_capable} Maskable{} 64bit{}",
            pm(*enabled),
            pm(*per_vector_masking),
            pm(*is_64bit)
        ),
        CapDetail::MsiX {
            enabled,
            function_masked,
            table_size,
            table_bar,
            table_offset,
            pba_bar,
            pba_offset,
        } => format!(
            "Enable{} Count={table_size} Masked{}; table BAR{table_bar}+{table_offset:#x}, PBA BAR{pba_bar}+{pba_offset:#x}",
            pm(*enabled),
            pm(*function_masked)
        ),
        CapDetail::Express(e) => express(e),
        CapDetail::VendorSpecific { length } => format!("length {length}"),
        CapDetail::BridgeSubsystem {
            vendor_id,
            device_id,
        } => format!("{vendor_id:04x}:{device_id:04x}"),
        CapDetail::Aer {
            uncorrectable_status,
            correctable_status,
            ..
        } => {
            format!("UESta {uncorrectable_status:#010x} CESta {correctable_status:#010x}")
        }
        CapDetail::SerialNumber { text, .. } => text.clone(),
        CapDetail::PowerBudget {
            data_select,
            data,
            system_allocated,
        } => {
            format!(
                "entry {data_select}: {data:#010x}, system allocated{}",
                pm(*system_allocated)
            )
        }
        CapDetail::Vsec {
            vsec_id,
            vsec_rev,
            length,
        } => format!("ID={vsec_id:04x} Rev={vsec_rev} Len={length:03x}"),
        CapDetail::Acs {
            capability,
            control,
        } => format!("cap {capability:#06x} ctl {control:#06x}"),
        CapDetail::Ari { next_function, .. } => format!("next function {next_function}"),
        CapDetail::SrIov(s) => format!(
            "VFs {}/{} (initial {}), VF device {:04x}, offset {} stride {}",
            s.num_vfs, s.total_vfs, s.initial_vfs, s.vf_device_id, s.first_vf_offset, s.vf_stride
        ),
        CapDetail::ResizableBar { entries, .. } => entries
            .iter()
            .map(|e| {
                let sizes: Vec<String> = e.supported_sizes.iter().map(|s| fmt::size(*s)).collect();
                format!(
                    "BAR{}: current {}, supported {}",
                    e.bar,
                    fmt::size(e.current_size),
                    sizes.join(" ")
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
        CapDetail::Ltr {
            max_snoop_ns,
            max_no_snoop_ns,
        } => {
            format!("max snoop {max_snoop_ns}ns, max no-snoop {max_no_snoop_ns}ns")
        }
        CapDetail::Dvsec {
            vendor_id,
            revision,
            length,
            dvsec_id,
        } => {
            format!("vendor {vendor_id:04x} ID {dvsec_id:04x} rev {revision} length {length}")
        }
    }
}

fn express(e: &Express) -> String {
    let mut s = format!(
        "v{} {}, MaxPayload {}/{} MaxReadReq {}, FLR{}",
        e.version,
        e.port_type,
        e.max_payload,
        e.max_payload_supported,
        e.max_read_request,
        pm(e.flr_capable)
    );
    if let (Some(c), Some(l)) = (&e.link_capable, &e.link_status) {
        s.push_str(&format!(
            "; LnkCap {}, LnkSta {}",
            fmt::link(c),
            fmt::link(l)
        ));
    }
    if !e.supported_speeds.is_empty() {
        s.push_str(&format!("; speeds {}", e.supported_speeds.join(" ")));
    }
    s
}
