//! `rigctl mmio read | write` and `rigctl master`: a held device's registers and bus
//! mastering, through rigd (root or the admin group).

use std::io::Write;

use clap::{Args, Subcommand};
use rig_client::{Client, RegAddr, regs::parse_u64};
use serde::Serialize;

use crate::BoxError;

#[derive(Debug, Subcommand)]
pub enum MmioCmd {
    /// Read registers of a held device's memory BAR.
    Read {
        bdf: String,
        /// BAR and byte offset, e.g. bar0:0x80.
        at: RegAddr,
        #[command(flatten)]
        width: WidthArg,
        /// Consecutive registers to read (1 to 4096).
        #[arg(long, default_value_t = 1)]
        count: u32,
    },
    /// Write one register of a held device's memory BAR.
    Write {
        bdf: String,
        /// BAR and byte offset, e.g. bar0:0x80.
        at: RegAddr,
        /// Decimal or 0x hexadecimal.
        #[arg(value_parser = value)]
        value: u64,
        #[command(flatten)]
        width: WidthArg,
    },
}

#[derive(Debug, Args)]
pub struct WidthArg {
    /// Bits per access: 8, 16, 32 or 64.
    #[arg(long, default_value_t = 32, value_parser = width)]
    width: u32,
}

fn width(s: &str) -> Result<u32, String> {
    match s {
        "8" | "16" | "32" | "64" => Ok(s.parse().expect("a listed width")),
        _ => Err(format!("`{s}` is not 8, 16, 32 or 64")),
    }
}

fn value(s: &str) -> Result<u64, String> {
    parse_u64(s).ok_or_else(|| format!("`{s}` is not a number (decimal or 0x hexadecimal)"))
}

#[derive(Serialize)]
struct Read<'a> {
    bdf: &'a str,
    bar: u32,
    offset: u64,
    width: u32,
    values: Vec<u64>,
}

pub async fn mmio(client: &mut Client, cmd: MmioCmd, json: bool) -> Result<(), BoxError> {
    let mut out = crate::out::stdout();
    match cmd {
        MmioCmd::Read {
            bdf,
            at,
            width,
            count,
        } => {
            let values = client.read_bar(&bdf, at, width.width, count).await?;
            if json {
                let r = Read {
                    bdf: &bdf,
                    bar: at.bar,
                    offset: at.offset,
                    width: width.width,
                    values,
                };
                serde_json::to_writer_pretty(&mut out, &r)?;
                writeln!(out)?;
            } else {
                let digits = usize::try_from(width.width / 4).expect("at most 16");
                let step = u64::from(width.width / 8);
                for (i, v) in (0u64..).zip(&values) {
                    let reg = RegAddr {
                        bar: at.bar,
                        offset: at.offset + i * step,
                    };
                    writeln!(out, "{reg} = {v:#0w$x}", w = digits + 2)?;
                }
            }
        }
        MmioCmd::Write {
            bdf,
            at,
            value,
            width,
        } => {
            client.write_bar(&bdf, at, width.width, value).await?;
            // Quiet on success, as a write tool is; --json says what was written.
            if json {
                let w = serde_json::json!({
                    "bdf": bdf,
                    "bar": at.bar,
                    "offset": at.offset,
                    "width": width.width,
                    "value": value,
                });
                writeln!(out, "{w}")?;
            }
        }
    }
    Ok(())
}

/// `rigctl master BDF on|off`.
pub async fn master(client: &mut Client, bdf: &str, on: bool, json: bool) -> Result<(), BoxError> {
    let was_on = client.set_bus_master(bdf, on).await?;
    let mut out = crate::out::stdout();
    if json {
        writeln!(
            out,
            "{}",
            serde_json::json!({ "bdf": bdf, "on": on, "was_on": was_on })
        )?;
    } else {
        let word = |b: bool| if b { "on" } else { "off" };
        writeln!(
            out,
            "{bdf}: bus mastering {} (was {})",
            word(on),
            word(was_on)
        )?;
    }
    Ok(())
}
