//! `rigctl dma`: each pool's blocks, what each client session holds (host memory, and
//! GPU memory and shared events on a served GPU), and each served GPU's GPU memory; `rigctl channels`:
//! every channel lent on an RM-served GPU.

use std::io::{self, Write};

use comfy_table::{ContentArrangement, Table, presets};
use rig_client::{
    channel::{ChannelInfo, Engine, Rings},
    dma::DmaStatus,
    session::Addressing,
};

use crate::fmt;

pub fn print(out: &mut impl Write, s: &DmaStatus, json: bool) -> io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, s)?;
        return writeln!(out);
    }
    if s.pools.is_empty() {
        writeln!(
            out,
            "No DMA pools (a pool exists per held device, or per dma.host_pools entry)."
        )?;
    } else {
        let mut pools = Table::new();
        pools
            .load_style(presets::UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header([
                "Pool",
                "Addressing",
                "Size",
                "Free",
                "Leased",
                "Quarantined",
                "Pinning",
                "Pinned at",
            ]);
        for p in &s.pools {
            pools.add_row([
                p.name.clone(),
                addressing(p.addressing).to_owned(),
                fmt::size(u64::from(p.target_blocks) * p.block_bytes),
                blocks(p.free_blocks, p.block_bytes),
                blocks(p.leased_blocks, p.block_bytes),
                blocks(p.quarantined_blocks, p.block_bytes),
                blocks(p.pinning_blocks, p.block_bytes),
                p.pin_gib_per_s
                    .map_or_else(|| "-".to_owned(), |r| format!("{r:.2} GiB/s")),
            ]);
        }
        writeln!(out, "{pools}")?;
        for p in &s.pools {
            if let Some(problem) = &p.problem {
                writeln!(out, "problem: {}: {problem}", p.name)?;
            }
        }
    }
    writeln!(
        out,
        "Quota: {} per uid, {} per uid on one device",
        fmt::size(s.quota_per_uid_bytes),
        fmt::size(s.quota_per_device_bytes)
    )?;
    for g in &s.gpu_memory {
        writeln!(
            out,
            "GPU memory on {}: {} lent, {} kept for CPU views, {} spare; quota {} per uid, {} in all",
            g.gpu,
            fmt::size(g.lent_bytes),
            fmt::size(g.kept_bytes),
            fmt::size(g.spare_bytes),
            fmt::size(g.per_uid_bytes),
            fmt::size(g.per_gpu_bytes)
        )?;
    }
    if s.clients.is_empty() {
        return writeln!(out, "No DMA sessions.");
    }
    let mut clients = Table::new();
    clients
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header([
            "Session",
            "UID",
            "PID",
            "Pool",
            "Leases",
            "Bytes",
            "GPU memory",
            "Shared events",
            "Side socket",
        ]);
    for c in &s.clients {
        clients.add_row([
            c.session.to_string(),
            c.uid.to_string(),
            c.pid.to_string(),
            c.device.clone(),
            c.leases.to_string(),
            fmt::size(c.bytes),
            if c.gpu_memory_allocations == 0 {
                "-".to_owned()
            } else {
                format!(
                    "{} ({})",
                    fmt::size(c.gpu_memory_bytes),
                    c.gpu_memory_allocations
                )
            },
            events(c.events_exported, c.events_imported),
            if c.claimed { "attached" } else { "not yet" }.to_owned(),
        ]);
    }
    writeln!(out, "{clients}")
}

fn addressing(a: Addressing) -> &'static str {
    match a {
        Addressing::None => "none (host)",
        Addressing::Physical => "physical (sysfs)",
        Addressing::Iova => "IOVA (vfio)",
        Addressing::GpuVa => "GPU VA (RM-served GPU, per session)",
    }
}

/// "2 exported, 1 imported", or "-" for none.
fn events(exported: u32, imported: u32) -> String {
    match (exported, imported) {
        (0, 0) => "-".to_owned(),
        (e, 0) => format!("{e} exported"),
        (0, i) => format!("{i} imported"),
        (e, i) => format!("{e} exported, {i} imported"),
    }
}

/// "12 (24M)".
fn blocks(n: u32, block: u64) -> String {
    if n == 0 {
        "0".to_owned()
    } else {
        format!("{n} ({})", fmt::size(u64::from(n) * block))
    }
}

pub fn print_channels(out: &mut impl Write, chans: &[ChannelInfo], json: bool) -> io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, chans)?;
        return writeln!(out);
    }
    if chans.is_empty() {
        return writeln!(
            out,
            "No channels (rigd lends them on the GPUs `[channels] serve` names)."
        );
    }
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header([
            "Channel", "GPU", "Session", "UID", "PID", "Engine", "Ring", "GP_GET", "GP_PUT",
            "Error",
        ]);
    for c in chans {
        t.add_row([
            c.channel.to_string(),
            c.gpu.clone(),
            c.session.to_string(),
            c.uid.to_string(),
            c.pid.to_string(),
            match c.engine {
                Some(Engine::Copy) => "copy",
                Some(Engine::Compute) => "compute",
                None => "?",
            }
            .to_owned(),
            match c.rings {
                Some(Rings::Gpu) => format!("{} in GPU", c.entries),
                _ => c.entries.to_string(),
            },
            c.gp_get.to_string(),
            c.gp_put.to_string(),
            c.fault.as_ref().map_or_else(
                || "-".to_owned(),
                |f| format!("{} ({})", f.info32, f.reason),
            ),
        ]);
    }
    writeln!(out, "{t}")
}
