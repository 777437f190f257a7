//! rigd: parse flags, set up tracing, load the config, build `Rig`, serve.

use std::{path::PathBuf, process::ExitCode, sync::Arc};

use clap::Parser;
use rigd::{
    config::{self, Config},
    rig::Rig,
    service::{
        self,
        status::{error_line, recovered_line},
        watchdog::{self, Health},
    },
};
use tracing_subscriber::EnvFilter;

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
    init_tracing(args.verbose);
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once: the subscriber writes to stderr, which is also what systemd logs.
            tracing::error!("{}", error_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let explicit = args.config.as_os_str() != config::DEFAULT_PATH;
    let mut config = Config::load(&args.config, explicit)?;
    if let Some(socket) = args.socket {
        config.server.socket = socket;
    }
    let gid = config
        .server
        .group
        .as_deref()
        .map(|g| config::resolve_group(g, &config.paths.group_file))
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
        // Not under systemd, notify() is a no-op.
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
        let rig = Arc::new(rig);
        let unbind_wait = std::time::Duration::from_secs(config.take.unbind_timeout_s);
        let health = supervise(&rig, Health::with_unbind_wait(unbind_wait))?;
        let served = service::serve(Arc::clone(&rig), listener, shutdown_signal(), &health).await;
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
    tokio::spawn(watchdog::status_lines(Arc::clone(rig)));
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
