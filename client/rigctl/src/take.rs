//! `rigctl detach | attach | reset | resize | status`. The steps rigd streams are drawn
//! by `progress` (live on a terminal, plain lines otherwise); the outcome goes to
//! stdout, under `--json` with `"outcome": "ok"` (the audit line's word) and each
//! step's duration.

use std::io::Write;

use clap::Subcommand;
use rig_client::{BarSize, Client, DetachRequest, Mode, Outcome, ResetMethod, Status, Step};

use crate::{
    BoxError, fmt,
    progress::{Progress, Style},
};

#[derive(Debug, Subcommand)]
pub enum TakeCmd {
    /// Take a device from its kernel driver (root or the admin group).
    Detach {
        bdf: String,
        /// vfio (IOMMU-confined) or sysfs (driverless; only where the config allows it).
        #[arg(long, default_value = "vfio", value_parser = words::<Mode>(&Mode::ALL.map(Mode::as_str)))]
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
    },
    /// Give a device back to its original driver.
    Attach { bdf: String },
    /// Reset a held device.
    Reset {
        bdf: String,
        /// auto (VFIO's reset, else the kernel's first), flr, pm, or bus.
        #[arg(long, default_value = "auto", value_parser = words::<ResetMethod>(&ResetMethod::ALL.map(ResetMethod::as_str)))]
        method: ResetMethod,
    },
    /// Resize a BAR of a held device.
    Resize {
        bdf: String,
        bar: u8,
        /// max, or a size such as 32G.
        size: BarSize,
    },
    /// What rigd holds.
    Status,
}

/// A flag that takes one of `all`: `--help`, the man page and the completions list the
/// words, and the model's `FromStr` reads them (one spelling, the model's).
fn words<T>(all: &[&'static str]) -> impl clap::builder::TypedValueParser<Value = T>
where
    T: std::str::FromStr + Clone + Send + Sync + 'static,
    T::Err: std::error::Error + Send + Sync + 'static,
{
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(all.to_vec()).try_map(|s| s.parse::<T>())
}

/// What each take-over is called in `--json`'s `action` (the CLI's word for it).
fn action(cmd: &TakeCmd) -> &'static str {
    match cmd {
        TakeCmd::Detach { .. } => "detach",
        TakeCmd::Attach { .. } => "attach",
        TakeCmd::Reset { .. } => "reset",
        TakeCmd::Resize { .. } => "resize",
        TakeCmd::Status => "status",
    }
}

pub async fn run(client: &mut Client, cmd: TakeCmd, json: bool) -> Result<(), BoxError> {
    if matches!(cmd, TakeCmd::Status) {
        let status = client.status().await?;
        return print_status(&status, json);
    }
    let action = action(&cmd);
    // Steps go to stderr as they happen, so stdout stays the result (or the JSON).
    let progress = Progress::start(Style::detect(json));
    let mut show = |s: &Step| progress.step(s);
    let result = match cmd {
        TakeCmd::Status => unreachable!("answered above"),
        TakeCmd::Detach {
            bdf,
            mode,
            bar_size,
            entire_group,
            force,
            timeout,
        } => {
            let req = DetachRequest {
                bdf,
                mode: Some(mode),
                bar_size: Some(bar_size),
                entire_group,
                force,
                timeout_s: timeout,
            };
            client.detach(&req, &mut show).await
        }
        TakeCmd::Attach { bdf } => client.attach(&bdf, &mut show).await,
        TakeCmd::Reset { bdf, method } => client.reset(&bdf, method, &mut show).await,
        TakeCmd::Resize { bdf, bar, size } => client.resize(&bdf, bar, size, &mut show).await,
    };
    progress
        .finish(result.as_ref().ok().map(|o| o.elapsed_s))
        .await;
    print_outcome(&result?, action, json)
}

fn print_outcome(o: &Outcome, action: &str, json: bool) -> Result<(), BoxError> {
    let mut out = crate::out::stdout();
    if json {
        // The Outcome as the library has it, named: what was done and how it ended
        // (`ok`, the audit line's RIG_OUTCOME; a failure is `{"error": …}`).
        let mut v = serde_json::to_value(o)?;
        if let Some(m) = v.as_object_mut() {
            m.insert("action".into(), action.into());
            m.insert("outcome".into(), "ok".into());
        }
        serde_json::to_writer_pretty(&mut out, &v)?;
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
    let mut out = crate::out::stdout();
    if json {
        serde_json::to_writer_pretty(&mut out, s)?;
        writeln!(out)?;
        return Ok(());
    }
    if s.devices.is_empty() {
        writeln!(out, "rigd holds no devices")?;
    }
    for g in &s.served {
        let state = if g.reason.is_empty() {
            &g.health
        } else {
            &g.reason
        };
        let shape = g.geometry.map_or(String::new(), |c| {
            format!(
                " (sm_{}{}, {} SMs)",
                c.sm_version >> 8,
                c.sm_version & 0xff,
                c.sms()
            )
        });
        let copies = if g.copy_engines.is_empty() {
            "; copies in each session's GR0 group".to_owned()
        } else {
            let ces: Vec<_> = g.copy_engines.iter().map(|n| format!("COPY{n}")).collect();
            format!("; copies on {}", ces.join(" "))
        };
        let waits = match (g.interrupts, g.wakes_given, g.wakes_passed) {
            (Some(n), Some(given), Some(passed)) => {
                format!(
                    "; waits sleep ({n} interrupts: {given} channel wakes, {passed} passed over by wake words)"
                )
            }
            (Some(n), ..) => format!("; waits sleep ({n} interrupts)"),
            (None, ..) => "; waits never sleep".to_owned(),
        };
        writeln!(
            out,
            "{}  served through its driver: {state}{shape}{copies}{waits}",
            g.bdf
        )?;
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
