//! rigctl: rig's command line. Reaches rigd only through rig-client; local file work
//! (`rigctl firmware`) calls rig-firmware directly.

mod cdi;
mod dma;
mod docs;
mod firmware;
mod fmt;
mod list;
mod queues;
mod regs;
mod show;
mod take;

use std::{error::Error, path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use rig_client::{Client, DEFAULT_SOCKET};

/// Inspect and lend PCI GPUs through rigd.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// rigd's socket.
    #[arg(long, global = true, env = "RIG_SOCKET", default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Every PCI function, GPUs first: a table, or --json.
    List {
        /// Only GPUs and accelerators (class 0x03xx, 0x12xx).
        #[arg(long)]
        gpus: bool,
        #[arg(long)]
        json: bool,
    },
    /// The full decode of one function.
    Show {
        /// Address: 0000:03:00.0 or 03:00.0.
        bdf: String,
        #[arg(long)]
        json: bool,
        /// Also dump the config bytes rigd could read.
        #[arg(short = 'x', long)]
        hex: bool,
    },
    /// rigd's version and API.
    Version {
        #[arg(long)]
        json: bool,
    },
    /// DMA pools and what each client holds: a table, or --json.
    Dma {
        #[arg(long)]
        json: bool,
    },
    /// Channels lent on RM-served GPUs: owner, engine, ring, GP_GET/GP_PUT, errors.
    Channels {
        #[arg(long)]
        json: bool,
    },
    /// Hardware queues rigd lends, their owners and state: a table, or --json.
    Queues {
        #[arg(long)]
        json: bool,
    },
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
        #[arg(long)]
        json: bool,
    },
    /// Write rigctl's man pages and bash, zsh and fish completions into DIR (for
    /// packagers: packaging/deb/build.sh).
    #[command(hide = true)]
    GenerateDocs { dir: PathBuf },
}

type BoxError = Box<dyn Error + Send + Sync>;

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            print_chain(e.as_ref());
            ExitCode::FAILURE
        }
    }
}

/// Prints an error and its causes: one line, or numbered lines when it has causes.
fn print_chain(e: &(dyn Error + 'static)) {
    eprintln!("rigctl: {e}");
    let mut cause = e.source();
    let mut n = 1;
    while let Some(c) = cause {
        eprintln!("  {n}: {c}");
        n += 1;
        cause = c.source();
    }
}

fn run(args: Args) -> Result<ExitCode, BoxError> {
    match args.cmd {
        Cmd::Firmware(cmd) => return firmware::run(cmd),
        Cmd::GenerateDocs { dir } => {
            docs::write(&<Args as clap::CommandFactory>::command(), &dir)?;
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut client = Client::connect(&args.socket).await?;
        let mut out = std::io::stdout().lock();
        match args.cmd {
            Cmd::List { gpus, json } => {
                let listing = client.list_devices(gpus).await?;
                list::print(&mut out, &listing, json)?;
            }
            Cmd::Show { bdf, json, hex } => {
                let device = client.device(&bdf).await?;
                show::print(&mut out, &device, json, hex)?;
            }
            Cmd::Version { json } => {
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
            Cmd::Take(cmd) => take::run(&mut client, cmd).await?,
            Cmd::Mmio(cmd) => regs::mmio(&mut client, cmd).await?,
            Cmd::Master { bdf, state, json } => {
                regs::master(&mut client, &bdf, state == "on", json).await?;
            }
            Cmd::Dma { json } => {
                let status = rig_client::dma::status(&args.socket).await?;
                dma::print(&mut out, &status, json)?;
            }
            Cmd::Channels { json } => {
                let chans = rig_client::dma::channels(&args.socket).await?;
                dma::print_channels(&mut out, &chans, json)?;
            }
            Cmd::Queues { json } => {
                let queues = rig_client::dma::queue_status(&args.socket).await?;
                queues::print(&mut out, &queues, json)?;
            }
            Cmd::Cdi(cmd) => cdi::run(&mut client, &args.socket, cmd).await?,
            Cmd::Firmware(_) | Cmd::GenerateDocs { .. } => {
                unreachable!("handled before connecting")
            }
        }
        Ok(ExitCode::SUCCESS)
    })
}
