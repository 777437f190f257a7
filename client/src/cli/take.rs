//! `rigctl detach | attach | reset | resize | status`.

use std::io::{self, Write};

use clap::Subcommand;
use rig_client::{BarSize, Client, DetachRequest, Mode, Outcome, ResetMethod, Status, Step};

use crate::{BoxError, fmt};

#[derive(Debug, Subcommand)]
pub enum TakeCmd {
    /// Take a device from its kernel driver (root or the admin group).
    Detach {
        bdf: String,
        /// vfio (IOMMU-confined) or sysfs (driverless; only where the config allows it).
        #[arg(long, default_value = "vfio")]
        mode: Mode,
        /// keep, max, or a size such as 256M or 32G.
        #[arg(long, default_value = "keep")]
        bar_size: BarSize,
        /// Also take the other members of its IOMMU group.
        #[arg(long)]
        entire_group: bool,
        /// Override what is safe to override (console, boot VGA); says what it overrode.
        #[arg(long)]
        force: bool,
        /// Seconds an unbind may take.
        #[arg(long)]
        timeout: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Give a device back to its original driver.
    Attach {
        bdf: String,
        #[arg(long)]
        json: bool,
    },
    /// Reset a held device.
    Reset {
        bdf: String,
        /// auto, flr, pm, or bus.
        #[arg(long, default_value = "auto")]
        method: ResetMethod,
        #[arg(long)]
        json: bool,
    },
    /// Resize a BAR of a held device.
    Resize {
        bdf: String,
        bar: u8,
        /// max, or a size such as 32G.
        size: BarSize,
        #[arg(long)]
        json: bool,
    },
    /// What rigd holds.
    Status {
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(client: &mut Client, cmd: TakeCmd) -> Result<(), BoxError> {
    let json = matches!(
        cmd,
        TakeCmd::Detach { json: true, .. }
            | TakeCmd::Attach { json: true, .. }
            | TakeCmd::Reset { json: true, .. }
            | TakeCmd::Resize { json: true, .. }
            | TakeCmd::Status { json: true }
    );
    // Steps go to stderr as they happen, so stdout stays the result (or the JSON).
    let mut show = |s: &Step| {
        if !json {
            eprintln!("  [{:6.2}s] {}", s.elapsed_s, s.text);
        }
    };
    let outcome = match cmd {
        TakeCmd::Status { .. } => {
            let status = client.status().await?;
            return print_status(&status, json);
        }
        TakeCmd::Detach {
            bdf,
            mode,
            bar_size,
            entire_group,
            force,
            timeout,
            ..
        } => {
            let req = DetachRequest {
                bdf,
                mode: Some(mode),
                bar_size: Some(bar_size),
                entire_group,
                force,
                timeout_s: timeout,
            };
            client.detach(&req, &mut show).await?
        }
        TakeCmd::Attach { bdf, .. } => client.attach(&bdf, &mut show).await?,
        TakeCmd::Reset { bdf, method, .. } => client.reset(&bdf, method, &mut show).await?,
        TakeCmd::Resize { bdf, bar, size, .. } => client.resize(&bdf, bar, size, &mut show).await?,
    };
    print_outcome(&outcome, json)
}

fn print_outcome(o: &Outcome, json: bool) -> Result<(), BoxError> {
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, o)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "{} ({:.2} s)", o.summary, o.elapsed_s)?;
    if let Some(r) = &o.resize {
        writeln!(
            out,
            "  BAR{}: {} → {}",
            r.bar,
            fmt::size(r.before),
            fmt::size(r.after)
        )?;
        for s in &r.no_room {
            writeln!(out, "  no room for {}", fmt::size(*s))?;
        }
        for (b, from, to) in &r.moved {
            writeln!(out, "  the kernel moved BAR{b}: {from:#x} → {to:#x}")?;
        }
    }
    if let Some(d) = &o.device {
        for b in &d.bars {
            writeln!(out, "  BAR{} {}", b.index, fmt::bar_short(b))?;
        }
    }
    for w in &o.warnings {
        writeln!(out, "  warning: {w}")?;
    }
    Ok(())
}

fn print_status(s: &Status, json: bool) -> Result<(), BoxError> {
    let mut out = io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, s)?;
        writeln!(out)?;
        return Ok(());
    }
    if s.devices.is_empty() {
        writeln!(out, "rigd holds no devices")?;
    }
    for d in &s.devices {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |n| n.as_secs())
            .saturating_sub(d.since_unix);
        writeln!(
            out,
            "{}  {}  {} mode, was {}, for {since} s; BARs {}",
            d.bdf,
            d.state,
            d.mode.map_or("?", rig_client::Mode::as_str),
            d.original_driver.as_deref().unwrap_or("driverless"),
            d.bars
                .iter()
                .map(fmt::bar_short)
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        if let Some(l) = &d.lease {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |n| n.as_secs());
            writeln!(
                out,
                "  leased whole to uid {} (pid {}, session {}) for {} s",
                l.uid,
                l.pid,
                l.session,
                now.saturating_sub(l.since_unix)
            )?;
        }
    }
    for u in &s.stuck_unbinds {
        writeln!(
            out,
            "{}  unbind from {} stuck in the kernel for {} s: one worker waits there; no second unbind of it is started",
            u.bdf, u.driver, u.seconds
        )?;
    }
    for r in &s.recovered {
        writeln!(out, "at start: {r}")?;
    }
    Ok(())
}
