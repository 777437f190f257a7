//! rigctl: rig's command line. Reaches rigd only through rig-client; local file work
//! (`rigctl firmware`) calls rig-firmware directly, CDI specs come from
//! rig-device-plugin's `cdi`, and one scrape of rigd's metrics endpoint (`metrics`,
//! plain HTTP beside the gRPC API) is rigctl's own.
//!
//! `--json` is global: every subcommand prints its result as one JSON document on
//! stdout (docs/rigctl-json.md), and an error as `{"error": …}` there too. The exit
//! status is `exit::Exit`'s table whatever the output; take-over steps are drawn by
//! `progress`. Everything written to stdout and stderr goes through `out`, where a
//! reader that left early (`| head`) ends rigctl as it ends lspci.

mod cdi;
mod dma;
mod docs;
mod exit;
mod filter;
mod firmware;
mod fmt;
mod list;
mod metrics;
mod out;
mod progress;
mod queues;
mod regs;
mod show;
#[expect(
    unsafe_code,
    reason = "resetting SIGPIPE to its default to end as lspci does"
)]
mod sys;
mod take;
mod topo;

use std::{error::Error, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use rig_client::{Client, DEFAULT_SOCKET};

/// Inspect and lend PCI GPUs through rigd.
#[derive(Debug, Parser)]
#[command(version, about, after_long_help = exit::TABLE)]
struct Args {
    /// rigd's socket.
    #[arg(long, global = true, env = "RIG_SOCKET", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Print the result, or the error, as JSON on stdout (docs/rigctl-json.md); no
    /// progress lines.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Every PCI function, GPUs first: one line each as `lspci -D -nn` prints it, then
    /// `driver=NAME rig=STATE` (STATE: - held:vfio held:sysfs, `:leased` added, busy
    /// served); or --table, or --json. -s and -d select as lspci's do.
    List(list::ListArgs),
    /// The full decode of one function.
    Show {
        /// Address: 0000:03:00.0 or 03:00.0.
        bdf: String,
        /// Also dump the config bytes rigd could read.
        #[arg(short = 'x', long)]
        hex: bool,
    },
    /// rigd's version and API.
    Version,
    /// DMA pools and what each client holds: a table, or --json.
    Dma,
    /// Channels lent on RM-served GPUs: owner, engine, ring, GP_GET/GP_PUT, errors.
    Channels,
    /// Hardware queues rigd lends, their owners and state: a table, or --json.
    Queues,
    /// Which GPUs reach each other (NVLink, PCIe P2P) as the RM reports it, in the
    /// style of `nvidia-smi topo -m`, or --json.
    Topo,
    /// Inspect vendor firmware files and plan what a chip needs (no daemon).
    #[command(subcommand)]
    Firmware(firmware::FirmwareCmd),
    #[command(flatten)]
    Take(take::TakeCmd),
    /// Read or write registers of a held device's BAR (root or the admin group).
    #[command(subcommand)]
    Mmio(regs::MmioCmd),
    /// CDI specs for held devices, and the hooks they run.
    #[command(subcommand)]
    Cdi(cdi::CdiCmd),
    /// Turn a held device's bus mastering on or off (root or the admin group).
    Master {
        bdf: String,
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Scrape rigd's metrics endpoint once (`[metrics] listen`): the Prometheus text,
    /// or with --json its samples.
    Metrics {
        /// unix:/PATH or HOST:PORT, as `[metrics] listen` says.
        #[arg(long, default_value = "unix:/run/rig/metrics.sock")]
        from: crate::metrics::Endpoint,
    },
    /// Write rigctl's man pages and bash, zsh and fish completions into DIR (for
    /// packagers: packaging/deb/build.sh).
    #[command(hide = true)]
    GenerateDocs { dir: PathBuf },
}

type BoxError = Box<dyn Error + Send + Sync>;

fn main() -> ExitCode {
    // Usage errors are clap's text on stderr with exit 2 (`Exit::Usage`); under --json
    // they are the error object on stdout, as every other error is. Help and --version
    // stay text.
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) => {
            use clap::error::ErrorKind as K;
            let help = matches!(
                e.kind(),
                K::DisplayHelp | K::DisplayVersion | K::DisplayHelpOnMissingArgumentOrSubcommand
            );
            if help || !wants_json(std::env::args_os()) {
                e.exit()
            }
            print_json_usage(&e);
            return ExitCode::from(exit::Exit::Usage.code());
        }
    };
    let json = args.json;
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            let code = exit::Exit::of(e.as_ref());
            if json {
                print_json_error(e.as_ref());
            } else {
                print_chain(e.as_ref());
            }
            ExitCode::from(code.code())
        }
    }
}

/// Whether `--json` is among the arguments (before a `--`), for an error clap raised
/// before it could say so.
fn wants_json(args: impl Iterator<Item = std::ffi::OsString>) -> bool {
    args.skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json")
}

/// A usage error under `--json`: the error object, `exit` 2 and `kind` "usage", clap's
/// first line as the message and its other lines as the causes.
fn print_json_usage(e: &clap::Error) {
    use std::io::Write;
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("usage error");
    let body = serde_json::json!({ "error": exit::ErrorJson {
        exit: exit::Exit::Usage.code(),
        kind: exit::Exit::Usage.as_str(),
        outcome: "failed",
        reason: None,
        device: None,
        step: None,
        code: None,
        message: first.strip_prefix("error: ").unwrap_or(first).to_owned(),
        causes: lines.map(str::to_owned).collect(),
    }});
    let mut out = std::io::stdout().lock();
    if serde_json::to_writer_pretty(&mut out, &body).is_err() || writeln!(out).is_err() {
        out::errln!("rigctl: {text}");
    }
}

/// `--json`'s error: `{"error": {...}}` on stdout, where the result would have been.
fn print_json_error(e: &(dyn Error + 'static)) {
    use std::io::Write;
    let body = serde_json::json!({ "error": exit::json_of(e) });
    let mut out = std::io::stdout().lock();
    if serde_json::to_writer_pretty(&mut out, &body).is_err() || writeln!(out).is_err() {
        // stdout is gone (a closed pipe): say it where a person may still see it.
        print_chain(e);
    }
}

/// Prints an error and its causes: one line, or numbered lines when it has causes.
fn print_chain(e: &(dyn Error + 'static)) {
    out::errln!("rigctl: {e}");
    let mut cause = e.source();
    let mut n = 1;
    while let Some(c) = cause {
        out::errln!("  {n}: {c}");
        n += 1;
        cause = c.source();
    }
}

fn run(args: Args) -> Result<ExitCode, BoxError> {
    let json = args.json;
    match args.cmd {
        Cmd::Firmware(cmd) => return firmware::run(cmd, json),
        Cmd::Metrics { from } => {
            use std::io::Write;
            let text = crate::metrics::scrape(&from)?;
            let mut out = out::stdout();
            if json {
                let samples = crate::metrics::parse(&text)?;
                serde_json::to_writer_pretty(&mut out, &serde_json::json!({ "samples": samples }))?;
                writeln!(out)?;
            } else {
                out.write_all(text.as_bytes())?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        Cmd::GenerateDocs { dir } => {
            let written = docs::write(&<Args as clap::CommandFactory>::command(), &dir)?;
            if json {
                let mut out = out::stdout();
                serde_json::to_writer_pretty(&mut out, &serde_json::json!({ "written": written }))?;
                use std::io::Write;
                writeln!(out)?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut client = Client::connect(&args.socket).await?;
        let mut out = out::stdout();
        match args.cmd {
            Cmd::List(list) => list::run(&mut client, list, json, &mut out).await?,
            Cmd::Show { bdf, hex } => {
                let device = client.device(&bdf).await?;
                show::print(&mut out, &device, json, hex)?;
            }
            Cmd::Version => {
                let v = client.version().await?;
                if json {
                    serde_json::to_writer_pretty(&mut out, &v)?;
                    use std::io::Write;
                    writeln!(out)?;
                } else {
                    use std::io::Write;
                    writeln!(
                        out,
                        "rigd {} (API {}), reading {}; rigctl {}",
                        v.daemon,
                        v.api,
                        v.sysfs_root,
                        env!("CARGO_PKG_VERSION")
                    )?;
                }
            }
            Cmd::Take(cmd) => take::run(&mut client, cmd, json).await?,
            Cmd::Mmio(cmd) => regs::mmio(&mut client, cmd, json).await?,
            Cmd::Master { bdf, state } => {
                regs::master(&mut client, &bdf, state == "on", json).await?;
            }
            Cmd::Dma => {
                let status = client.dma_status().await?;
                dma::print(&mut out, &status, json)?;
            }
            Cmd::Channels => {
                let chans = client.channels().await?;
                dma::print_channels(&mut out, &chans, json)?;
            }
            Cmd::Queues => {
                let queues = client.queues().await?;
                queues::print(&mut out, &queues, json)?;
            }
            Cmd::Topo => {
                let t = client.topology().await?;
                topo::print(&mut out, &t, json)?;
            }
            Cmd::Cdi(cmd) => cdi::run(&mut client, &args.socket, cmd, json).await?,
            Cmd::Firmware(_) | Cmd::GenerateDocs { .. } | Cmd::Metrics { .. } => {
                unreachable!("handled before connecting")
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
