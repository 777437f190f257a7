//! `rigctl list`: every function rigd sees, GPUs first. By default one line per
//! function, as `lspci -D -nn` prints it, with what rig adds as two `key=value` fields
//! at the end (`driver=`, `rig=`), so that grep and awk read it as they read lspci;
//! `--table` draws the box table with links and BARs; `--json` prints the listing.
//! `-s` and `-d` select functions as lspci's do (`filter`), whatever the form.
//!
//! Flow: `main` calls [`run`], which asks rigd for the listing (`Rig.ListDevices`), and
//! for the lines also what rig holds (`Rig.Status`) and serves (`Dma.Status`: a pool in
//! GPU VA mode is an RM-served GPU's, named by its address); all three need only the
//! client role. Problems (functions rigd could not read) go to stderr as `rigctl: …`
//! lines after the device lines, to stdout in the table, and into `problems` in JSON;
//! a selection keeps them all, since what could not be read cannot be matched.
//!
//! Not here: the selection's syntax (`filter`); one function's full decode (`show`).

use std::{
    collections::BTreeMap,
    io::{self, Write},
};

use comfy_table::{ContentArrangement, Table, presets};
use rig_client::{Client, Device, HeldState, Listing, Status, dma::DmaStatus, session::Addressing};

use crate::{
    BoxError,
    filter::{Ids, Slot},
    fmt,
    out::errln,
};

/// `rigctl list`'s own flags.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Only GPUs and accelerators (class 0x03xx, 0x12xx).
    #[arg(long)]
    gpus: bool,
    /// Only functions at this address, as lspci -s: hexadecimal, a part left out or
    /// `*` matches any ("c5:" all of bus c5, "0.1" function 1 of device 0 on any bus,
    /// ".0" function 0 of each device).
    #[arg(
        short = 's',
        long,
        value_name = "[[[[DOMAIN]:]BUS]:][DEVICE][.[FUNC]]",
        value_parser = Slot::parse
    )]
    slot: Option<Slot>,
    /// Only functions with these ids, as lspci -d: hexadecimal, a part left out or `*`
    /// matches any; CLASS is base class and subclass (0302), `x` a digit that matches
    /// any (03xx).
    #[arg(
        short = 'd',
        long = "id",
        value_name = "[VENDOR]:[DEVICE][:CLASS[:PROG_IF]]",
        value_parser = Ids::parse
    )]
    ids: Option<Ids>,
    /// The box table: class, device and chip, driver, IOMMU group, link and its
    /// bottleneck, BARs (cells span lines; for a person, not for grep).
    #[arg(long)]
    table: bool,
}

/// Lists, selects and prints.
///
/// # Errors
/// rigd's errors for the calls it makes, and failures to write `out`.
pub async fn run(
    client: &mut Client,
    args: ListArgs,
    json: bool,
    out: &mut impl Write,
) -> Result<(), BoxError> {
    let mut listing = client.list_devices(args.gpus).await?;
    listing.devices.retain(|d| {
        args.slot.is_none_or(|s| s.matches(&d.bdf)) && args.ids.is_none_or(|i| i.matches(d))
    });
    if json {
        serde_json::to_writer_pretty(&mut *out, &listing)?;
        writeln!(out)?;
    } else if args.table {
        table(out, &listing)?;
    } else {
        let rig = states(&client.status().await?, &client.dma_status().await?);
        for d in &listing.devices {
            let state = rig.get(&d.bdf).map_or("-", String::as_str);
            writeln!(out, "{}", line(d, state))?;
        }
        out.flush()?;
        for p in &listing.problems {
            errln!("rigctl: {p}");
        }
    }
    Ok(())
}

/// What rig does with each function it holds or serves, as `rig=` says it:
/// `held:vfio`, `held:sysfs` (taken from its driver; `:leased` added while a client
/// leases it whole), `busy` (a detach, attach, reset or resize is under way),
/// `served` (it keeps its NVIDIA driver and rigd lends channels on it). A function
/// that is none of these is not in the map (`rig=-`).
pub fn states(status: &Status, dma: &DmaStatus) -> BTreeMap<String, String> {
    let mut m: BTreeMap<String, String> = dma
        .pools
        .iter()
        .filter(|p| p.addressing == Addressing::GpuVa)
        .map(|p| (p.name.clone(), "served".to_owned()))
        .collect();
    for h in &status.devices {
        let state = match (h.state, h.mode) {
            (HeldState::Held, Some(mode)) => {
                let leased = if h.lease.is_some() { ":leased" } else { "" };
                format!("held:{}{leased}", mode.as_str())
            }
            (HeldState::Busy, _) | (HeldState::Held, None) => "busy".to_owned(),
        };
        m.insert(h.bdf.clone(), state);
    }
    m
}

/// One function on one line: lspci's `-D -nn` line (address, class name and
/// `[class]`, vendor and device names and `[vendor:device]`, `(rev xx)` when not 0),
/// then ` driver=NAME rig=STATE`, `-` for none. The address is the first field and
/// `driver=`, `rig=` the last two, whatever the names hold.
pub fn line(d: &Device, rig: &str) -> String {
    let n = &d.names;
    let class = n
        .subclass
        .as_deref()
        .or(n.base_class.as_deref())
        .unwrap_or("Class");
    let ids = format!("[{:04x}:{:04x}]", d.vendor_id, d.device_id);
    let name = match (&n.vendor, &n.device) {
        (Some(v), Some(dev)) => format!("{v} {dev} {ids}"),
        (Some(v), None) => format!("{v} Device {ids}"),
        (None, _) => format!("Device {ids}"),
    };
    let mut s = format!("{} {class} [{:04x}]: {name}", d.bdf, d.class_code >> 8);
    if d.revision != 0 {
        s.push_str(&format!(" (rev {:02x})", d.revision));
    }
    let driver = d.sysfs.driver.as_deref().unwrap_or("-");
    s.push_str(&format!(" driver={driver} rig={rig}"));
    s
}

/// The box table: one row per function, cells of several lines.
fn table(out: &mut impl Write, listing: &Listing) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use rig_client::{HeldDevice, LeaseHolder, Mode, dma::PoolStatus};

    use super::*;
    use crate::filter::test_device;

    #[test]
    fn a_named_gpu_reads_as_lspci_dnn_then_driver_and_rig() {
        let mut d = test_device("0000:03:00.0", 0x10de, 0x2335, 0x03_00_00);
        d.revision = 0xa1;
        d.names.vendor = Some("NVIDIA Corporation".into());
        d.names.device = Some("GH100 [H200 SXM 141GB]".into());
        d.names.base_class = Some("Display controller".into());
        d.names.subclass = Some("VGA compatible controller".into());
        d.names.class = Some("VGA controller".into());
        d.sysfs.driver = Some("nvidia".into());
        assert_eq!(
            line(&d, "served"),
            "0000:03:00.0 VGA compatible controller [0300]: NVIDIA Corporation \
             GH100 [H200 SXM 141GB] [10de:2335] (rev a1) driver=nvidia rig=served"
        );
    }

    #[test]
    fn unknown_names_read_as_lspci_prints_them_and_absent_fields_as_a_dash() {
        let mut d = test_device("0000:41:00.0", 0x1234, 0x5678, 0x12_00_00);
        assert_eq!(
            line(&d, "-"),
            "0000:41:00.0 Class [1200]: Device [1234:5678] driver=- rig=-"
        );
        d.names.vendor = Some("Acme".into());
        d.names.base_class = Some("Processing accelerators".into());
        assert_eq!(
            line(&d, "held:vfio"),
            "0000:41:00.0 Processing accelerators [1200]: Acme Device [1234:5678] \
             driver=- rig=held:vfio"
        );
    }

    #[test]
    fn held_leased_busy_and_served_functions_are_named_by_their_state() {
        let held = |bdf: &str, state, mode, lease| HeldDevice {
            bdf: bdf.into(),
            mode,
            original_driver: Some("nvidia".into()),
            state,
            since_unix: 0,
            bars: Vec::new(),
            group_members: Vec::new(),
            overrode: Vec::new(),
            lease,
        };
        let lease = LeaseHolder {
            uid: 1000,
            pid: 42,
            since_unix: 0,
            session: rig_client::session::SessionId(1),
        };
        let status = Status {
            devices: vec![
                held("0000:03:00.0", HeldState::Held, Some(Mode::Vfio), None),
                held(
                    "0000:04:00.0",
                    HeldState::Held,
                    Some(Mode::Sysfs),
                    Some(lease),
                ),
                held("0000:05:00.0", HeldState::Busy, None, None),
            ],
            recovered: Vec::new(),
            stuck_unbinds: Vec::new(),
            served: Vec::new(),
        };
        let pool = |name: &str, addressing| PoolStatus {
            name: name.into(),
            addressing,
            block_bytes: 2 << 20,
            target_blocks: 1,
            free_blocks: 1,
            leased_blocks: 0,
            quarantined_blocks: 0,
            pinning_blocks: 0,
            pin_gib_per_s: None,
            problem: None,
        };
        let dma = DmaStatus {
            pools: vec![
                pool("host", Addressing::None),
                pool("0000:03:00.0", Addressing::Iova),
                pool("0000:06:00.0", Addressing::GpuVa),
            ],
            clients: Vec::new(),
            quota_per_uid_bytes: 0,
            quota_per_device_bytes: 0,
            gpu_memory: Vec::new(),
        };
        let m = states(&status, &dma);
        let want = [
            ("0000:03:00.0", "held:vfio"),
            ("0000:04:00.0", "held:sysfs:leased"),
            ("0000:05:00.0", "busy"),
            ("0000:06:00.0", "served"),
        ];
        assert_eq!(
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            want
        );
    }
}
