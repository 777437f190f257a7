//! `rigctl list`: one row per function, GPUs first.

use std::io::{self, Write};

use comfy_table::{ContentArrangement, Table, presets};
use rig_client::{Device, Listing};

use crate::fmt;

pub fn print(out: &mut impl Write, listing: &Listing, json: bool) -> io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, listing)?;
        writeln!(out)?;
        return Ok(());
    }
    let mut table = Table::new();
    table
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(["BDF", "Class", "Device", "Driver", "IOMMU", "Link", "BARs"]);
    for d in &listing.devices {
        table.add_row([
            d.bdf.clone(),
            class(d),
            name(d),
            d.sysfs.driver.clone().unwrap_or_else(|| "-".to_owned()),
            d.sysfs
                .iommu_group
                .clone()
                .unwrap_or_else(|| "-".to_owned()),
            link(d),
            d.bars
                .iter()
                .map(fmt::bar_short)
                .collect::<Vec<_>>()
                .join("\n"),
        ]);
    }
    writeln!(out, "{table}")?;
    for p in &listing.problems {
        writeln!(out, "problem: {p}")?;
    }
    Ok(())
}

fn class(d: &Device) -> String {
    let code = format!("{:04x}", d.class_code >> 8);
    match &d.names.class {
        Some(n) => format!("{n} [{code}]"),
        None => code,
    }
}

fn name(d: &Device) -> String {
    let ids = format!("[{:04x}:{:04x}]", d.vendor_id, d.device_id);
    let mut s = match (&d.names.vendor, &d.names.device) {
        (Some(v), Some(n)) => format!("{v} {n} {ids}"),
        (Some(v), None) => format!("{v} {ids}"),
        _ => ids,
    };
    if let Some(g) = &d.gpu {
        s.push_str(&format!("\n{} {}", g.chip, g.family));
    }
    s
}

/// The device's own link, then the bottleneck when it lies upstream.
fn link(d: &Device) -> String {
    let own = d.link.hops.first().and_then(|h| h.link.as_ref());
    let Some(own) = own else {
        return "-".to_owned();
    };
    let mut s = format!("{} {:.2} GB/s", fmt::link(own), own.gbytes_per_s);
    if let Some(limit) = &d.link.limited_by {
        s.push_str(&format!("\n⚠ limited by {limit}"));
    }
    // The nearest shared hop names the GPUs that share the most with this one.
    if let (Some(near), Some(g)) = (d.link.shared.first(), d.link.contended_gbytes_per_s) {
        s.push_str(&format!(
            "\nshares {} with {}: {g:.2} GB/s when all copy",
            near.bdf,
            near.with.join(" ")
        ));
    }
    s
}
