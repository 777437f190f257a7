//! rigd: parse flags, set up tracing, load the config, build `Rig`, serve; on SIGHUP,
//! re-read the config (`Rig::reload` and the log level), telling systemd RELOADING=1
//! and READY=1 around it.
//!
//! The log: under systemd, with stderr still the journal's stream (`JOURNAL_STREAM`),
//! each event goes to the journal by its native protocol with its fields
//! (`rigd::journal_log`: `PRIORITY`, `RIG_BDF` the device, `RIG_STEP` a take-over's
//! step, the request's `RIG_METHOD`, `RIG_UID`, `RIG_PID`) and no timestamp of rigd's
//! own (the journal keeps one). Otherwise plain text on stderr, with timestamps, in
//! colour only when stderr is a terminal. There is no JSON format: `journalctl -o
//! json` gives every entry with its fields, and rigd takes no flag beyond `--config`,
//! `--socket` and `-v`.

use std::{io::IsTerminal as _, path::PathBuf, process::ExitCode, sync::Arc};

use clap::Parser;
use rigd::{
    config::{self, Config},
    journal_log::{self, JournalLayer},
    rig::Rig,
    service::{
        self,
        status::{error_line, recovered_line},
        watchdog::{self, Health},
    },
};
use tracing_subscriber::{
    EnvFilter, Layer as _, Registry, layer::SubscriberExt, util::SubscriberInitExt,
};

/// The rig daemon: lends PCI GPUs to unprivileged programs.
#[derive(Debug, Parser)]
#[command(version, about)]
pub(crate) struct Args {
    /// Config file.
    #[arg(long, default_value = config::DEFAULT_PATH)]
    config: PathBuf,
    /// Unix socket to serve on (overrides server.socket).
    #[arg(long)]
    socket: Option<PathBuf>,
    /// More logging: -v debug, -vv trace (RUST_LOG overrides).
    #[arg(short, action = clap::ArgAction::Count)]
    verbose: u8,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let log = init_tracing(args.verbose);
    match run(args, log) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once: the subscriber writes to stderr, which is also what systemd logs.
            tracing::error!("{}", error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// The log filter, and whether `[log] level` decides it (not `-v` or RUST_LOG).
struct Log {
    handle: tracing_subscriber::reload::Handle<EnvFilter, Registry>,
    from_config: bool,
}

impl Log {
    /// Puts `[log] level` (or info) in force, unless -v or RUST_LOG chose.
    fn apply(&self, level: Option<&str>) {
        if !self.from_config {
            return;
        }
        // Config::parse checked the filter.
        let filter =
            EnvFilter::try_new(level.unwrap_or("info")).unwrap_or_else(|_| EnvFilter::new("info"));
        let _ = self.handle.reload(filter);
    }
}

fn init_tracing(verbose: u8) -> Log {
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let env = EnvFilter::try_from_default_env().ok();
    let from_config = env.is_none() && verbose == 0;
    let filter = env.unwrap_or_else(|| EnvFilter::new(default));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let under_journal = rigd::sys::systemd::stderr_is_journal();
    let journal = under_journal
        .then(|| JournalLayer::new(std::path::Path::new(journal_log::JOURNAL_SOCKET)).ok())
        .flatten();
    // Text when the journal's socket is not there: stderr (the journal's stream, if
    // that is what it is, which stamps each line itself).
    let text = journal.is_none().then(|| {
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(in_colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            ));
        if under_journal {
            fmt.without_time().boxed()
        } else {
            fmt.boxed()
        }
    });
    tracing_subscriber::registry()
        .with(filter)
        .with(journal)
        .with(text)
        .init();
    Log {
        handle,
        from_config,
    }
}

fn run(args: Args, log: Log) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let explicit = args.config.as_os_str() != config::DEFAULT_PATH;
    let mut config = Config::load(&args.config, explicit)?;
    if let Some(socket) = &args.socket {
        config.server.socket.clone_from(socket);
    }
    log.apply(config.log.level.as_deref());
    let gid = config
        .server
        .group
        .as_deref()
        .map(|g| config::resolve_group(g, config.paths.group_file.as_deref()))
        .transpose()?;
    let (rig, warnings) = Rig::new(&config);
    for w in &warnings {
        tracing::warn!("{}", error_line(w));
    }
    // Before serving: stop any device a crashed rigd left mastering the bus, then
    // re-adopt or give back what the journal says it held.
    for r in rig.recover().iter() {
        tracing::info!("recovered {}", recovered_line(r));
    }
    // GPUs that keep their driver: channels through the RM ([channels] serve).
    for w in &rig.serve_configured() {
        tracing::warn!("{}", error_line(w));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let bound = service::socket::listen(&config.server.socket, gid)?;
        bound.listener.set_nonblocking(true)?;
        let listener = tokio::net::UnixListener::from_std(bound.listener.try_clone()?)?;
        tracing::info!(socket = %bound.origin, "serving");
        // Before READY=1: systemd may send SIGHUP as soon as it has it, and SIGHUP's
        // default action ends the process.
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
        // Not under systemd, notify() is a no-op.
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
        let rig = Arc::new(rig);
        // Devices an earlier rigd's lease holders still have: settled once they exit.
        rig.watch_outlived();
        let unbind_wait = std::time::Duration::from_secs(config.take.unbind_timeout_s);
        let health = supervise(&rig, Health::with_unbind_wait(unbind_wait))?;
        let _metrics = match config
            .metrics
            .listen
            .as_deref()
            .and_then(config::MetricsListen::parse)
        {
            Some(listen) => Some(service::metrics::serve(Arc::clone(&rig), listen, gid).await?),
            None => None,
        };
        let reloads = tokio::spawn(reloads(Arc::clone(&rig), hup, (args, explicit), log));
        let served = service::serve(Arc::clone(&rig), listener, shutdown_signal(), &health).await;
        reloads.abort();
        rig.shutdown();
        served?;
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Stopping,
            sd_notify::NotifyState::Status("Stopping"),
        ]);
        tracing::info!("stopped");
        drop(bound);
        Ok(())
    })
}

/// Under systemd: `STATUS=` lines, and the watchdog if the unit asks for one
/// (`WatchdogSec=`): the runtime beats, a thread pings while rigd is healthy.
fn supervise(rig: &Arc<Rig>, health: Health) -> std::io::Result<Health> {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return Ok(health);
    }
    tokio::spawn(watchdog::status_lines(Arc::clone(rig), health.clone()));
    let pools = Arc::clone(rig);
    health.probe(
        watchdog::PIN_LIMIT,
        Arc::new(move |now| {
            let (pool, running) = pools.dma().oldest_pin(now)?;
            Some((format!("pinning a block of DMA pool {pool}"), running))
        }),
    );
    if let Some(interval) = watchdog::start_monitor(&health)? {
        tokio::spawn(watchdog::beat(
            health.clone(),
            watchdog::beat_every(interval),
        ));
        tracing::info!(
            "watchdog: pinging every {} ms while healthy",
            (interval / 4).as_millis()
        );
    }
    Ok(health)
}

/// Re-reads the config on each SIGHUP. A config that does not parse, or whose groups
/// do not resolve, is refused with one line and the running one stays.
async fn reloads(
    rig: Arc<Rig>,
    mut hup: tokio::signal::unix::Signal,
    (args, explicit): (Args, bool),
    log: Log,
) {
    while hup.recv().await.is_some() {
        let _ = sd_notify::notify(&[
            sd_notify::NotifyState::Reloading,
            sd_notify::NotifyState::monotonic_usec_now()
                .unwrap_or(sd_notify::NotifyState::Status("reloading")),
        ]);
        let loaded = Config::load(&args.config, explicit).map_err(|e| error_line(&e));
        let done = loaded.and_then(|mut c| {
            if let Some(socket) = &args.socket {
                c.server.socket.clone_from(socket);
            }
            let r = rig.reload(&c).map_err(|e| error_line(&e))?;
            Ok((c, r))
        });
        match done {
            Ok((c, r)) => {
                log.apply(c.log.level.as_deref());
                tracing::info!(
                    "reloaded {}: roles, quotas, limits and log level in force",
                    args.config.display()
                );
                for section in r.need_restart {
                    tracing::warn!(
                        "reload: [{section}] changed; that takes effect when rigd restarts"
                    );
                }
            }
            Err(line) => {
                tracing::error!(
                    "reload of {} refused, the running configuration stays: {line}",
                    args.config.display()
                );
            }
        }
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without handlers the default action (exit) still stops us.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Whether rigd's text log is in colour: on a terminal, unless `NO_COLOR` is set to
/// anything but the empty string (no-color.org).
fn in_colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(std::ffi::OsStr::is_empty)
}

#[cfg(test)]
mod colour_tests {
    use std::ffi::OsStr;

    use super::in_colour;

    #[test]
    fn colour_only_on_a_terminal_and_never_under_no_color() {
        assert!(in_colour(true, None));
        assert!(
            in_colour(true, Some(OsStr::new(""))),
            "an empty NO_COLOR is unset"
        );
        assert!(!in_colour(true, Some(OsStr::new("1"))));
        assert!(!in_colour(false, None));
    }
}
