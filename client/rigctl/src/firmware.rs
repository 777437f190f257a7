//! `rigctl firmware`: inspect firmware files and plan what a GPU needs. Local file work: it
//! calls rig-firmware directly and never talks to rigd.
//!
//! Exit codes: inspect fails (1) when any file could not be read; plan fails (1) when a
//! required file is missing or unreadable. Errors go to stderr as one line per file, with
//! their causes joined by ": ".

use std::error::Error;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use comfy_table::{Table, presets};
use rig_firmware::chip::{PCI_VENDOR_ID_ATI, PCI_VENDOR_ID_NVIDIA};
use rig_firmware::{Firmware, IpVersion, NvChip, Plan, Report, Target};

type BoxError = Box<dyn Error + Send + Sync>;

/// Where `--device` looks up vendor and device ids.
const SYSFS_PCI_DEVICES: &str = "/sys/bus/pci/devices";

/// Firmware files: what they hold, and what a GPU needs.
#[derive(Debug, clap::Subcommand)]
pub enum FirmwareCmd {
    /// Format, version, sections or components (offset, size, SHA-256), signatures and CRC
    /// of each file. Reads .zst and .xz files transparently.
    Inspect {
        /// Firmware files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// The files a chip needs under the firmware directory, which are present, their
    /// versions and which GSP signature applies.
    Plan {
        /// NVIDIA chip name (GA102, AD104, GH100, GB202, …).
        #[arg(long)]
        chip: Option<String>,
        /// PCI address of an installed GPU (0000:41:00.0 or 41:00.0); its device id picks the
        /// NVIDIA chip. AMD GPUs also need --ip.
        #[arg(long)]
        device: Option<String>,
        /// Firmware root.
        #[arg(long, default_value = "/lib/firmware")]
        firmware_dir: PathBuf,
        /// AMD IP version, repeated: --ip mp0=13.0.10 --ip gc=11.0.0 --ip sdma=6.0.0 …
        #[arg(long = "ip")]
        ips: Vec<String>,
    },
}

/// Runs a `rigctl firmware` command; `json` (rigctl's `--json`): inspect prints a JSON
/// array of reports, plan the plan as JSON (schemas: docs/firmware.md).
///
/// # Errors
/// Bad arguments (unknown chip, malformed --ip, unreadable --device), a missing firmware
/// directory, or a failure to write to stdout.
pub fn run(cmd: FirmwareCmd, json: bool) -> Result<ExitCode, BoxError> {
    let mut out = crate::out::stdout();
    match cmd {
        FirmwareCmd::Inspect { files } => inspect(&mut out, &files, json),
        FirmwareCmd::Plan {
            chip,
            device,
            firmware_dir,
            ips,
        } => {
            let target = target(
                chip.as_deref(),
                device.as_deref(),
                &ips,
                Path::new(SYSFS_PCI_DEVICES),
            )?;
            let plan = rig_firmware::plan(&target, &firmware_dir)?;
            print_plan(&mut out, &plan, json)?;
            Ok(if plan.complete {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

fn inspect(out: &mut impl Write, files: &[PathBuf], json: bool) -> Result<ExitCode, BoxError> {
    let mut failed = false;
    let mut values = Vec::new();
    for path in files {
        let report = Firmware::open(path).and_then(|fw| fw.report());
        match report {
            Ok(r) if json => values.push(serde_json::to_value(&r)?),
            Ok(r) => print_report(out, &r)?,
            Err(e) => {
                failed = true;
                let msg = rig_client::error_line(&e);
                crate::out::errln!("rigctl: {msg}");
                if json {
                    values.push(
                        serde_json::json!({ "path": path.display().to_string(), "error": msg }),
                    );
                }
            }
        }
    }
    if json {
        serde_json::to_writer_pretty(&mut *out, &values)?;
        writeln!(out)?;
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(presets::UTF8_FULL_CONDENSED);
    t.set_header(header.iter().copied());
    t
}

fn print_report(out: &mut impl Write, r: &Report) -> Result<(), BoxError> {
    writeln!(out, "{}", r.path)?;
    writeln!(out, "  format:  {}", r.description)?;
    writeln!(out, "  version: {}", r.version.as_deref().unwrap_or("-"))?;
    let stored = match r.compression {
        rig_firmware::Compression::None => String::new(),
        c => format!(" ({c:?}, {} bytes on disk)", r.file_size).to_lowercase(),
    };
    writeln!(out, "  size:    {} bytes{stored}", r.data_size)?;
    if let Some(crc) = r.crc {
        let verdict = if crc.matches {
            "matches"
        } else {
            "does not match (amdgpu does not check it)"
        };
        writeln!(
            out,
            "  crc32:   stored {:#010x}, payload {:#010x}: {verdict}",
            crc.stored, crc.computed
        )?;
    }
    if !r.details.is_empty() {
        let d: Vec<String> = r.details.iter().map(|(k, v)| format!("{k}={v}")).collect();
        writeln!(out, "  header:  {}", d.join(" "))?;
    }
    let mut t = table(&["name", "kind", "offset", "size", "version", "sha256"]);
    for p in &r.parts {
        t.add_row(vec![
            p.name.clone(),
            p.kind.to_owned(),
            format!("{:#x}", p.offset),
            p.size.to_string(),
            p.version.clone().unwrap_or_default(),
            p.sha256.clone(),
        ]);
    }
    writeln!(out, "{t}")?;
    if !r.signatures.is_empty() {
        let mut t = table(&[
            "signature family",
            "location",
            "offset",
            "size",
            "count",
            "each",
        ]);
        for s in &r.signatures {
            t.add_row(vec![
                s.family.clone(),
                s.location.clone(),
                format!("{:#x}", s.offset),
                s.size.to_string(),
                s.count.to_string(),
                s.signature_size.to_string(),
            ]);
        }
        writeln!(out, "{t}")?;
    }
    writeln!(out)?;
    Ok(())
}

/// `0000:41:00.0` from `41:00.0`; anything else is returned as given (sysfs decides).
fn full_bdf(bdf: &str) -> String {
    if bdf.matches(':').count() == 1 {
        format!("0000:{bdf}")
    } else {
        bdf.to_owned()
    }
}

fn read_id(dir: &Path, attr: &str) -> Result<u16, BoxError> {
    let path = dir.join(attr);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let t = text.trim();
    let hex = t.strip_prefix("0x").unwrap_or(t);
    Ok(u16::from_str_radix(hex, 16).map_err(|e| format!("{} holds {t:?}: {e}", path.display()))?)
}

fn parse_ips(ips: &[String]) -> Result<Vec<IpVersion>, BoxError> {
    Ok(ips
        .iter()
        .map(|s| s.parse())
        .collect::<Result<Vec<IpVersion>, _>>()?)
}

/// The plan target from the arguments; `pci_devices` is `/sys/bus/pci/devices` (read-only).
fn target(
    chip: Option<&str>,
    device: Option<&str>,
    ips: &[String],
    pci_devices: &Path,
) -> Result<Target, BoxError> {
    let ips = parse_ips(ips)?;
    match (chip, device) {
        (Some(_), Some(_)) => Err("give --chip or --device, not both".into()),
        (Some(name), None) => match name.parse::<NvChip>() {
            Ok(chip) => Ok(Target::Nvidia(chip)),
            Err(_) if !ips.is_empty() => Ok(Target::Amd(ips)),
            Err(e) => Err(e.into()),
        },
        (None, Some(bdf)) => {
            let dir = pci_devices.join(full_bdf(bdf));
            let vendor = read_id(&dir, "vendor")?;
            let device = read_id(&dir, "device")?;
            match vendor {
                PCI_VENDOR_ID_NVIDIA => NvChip::from_device_id(device).map(Target::Nvidia).ok_or_else(|| {
                    format!("{bdf}: NVIDIA device id {device:#06x} is not a GSP-booted GPU rig knows").into()
                }),
                PCI_VENDOR_ID_ATI if !ips.is_empty() => Ok(Target::Amd(ips)),
                PCI_VENDOR_ID_ATI => Err(format!(
                    "{bdf} is an AMD GPU ({vendor:04x}:{device:04x}): give its IP versions with --ip \
                     (e.g. --ip mp0=13.0.10 --ip gc=11.0.0); they will come from the discovery table later"
                )
                .into()),
                _ => Err(format!("{bdf}: vendor {vendor:#06x} is neither NVIDIA nor AMD").into()),
            }
        }
        (None, None) if !ips.is_empty() => Ok(Target::Amd(ips)),
        (None, None) => Err("give --chip NAME, --device BDF, or AMD IP versions with --ip".into()),
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn print_plan(out: &mut impl Write, p: &Plan, json: bool) -> Result<(), BoxError> {
    if json {
        serde_json::to_writer_pretty(&mut *out, p)?;
        writeln!(out)?;
        return Ok(());
    }
    let arch = p.arch.map(|a| format!(" ({a:?})")).unwrap_or_default();
    let sig = p
        .signature_family
        .map(|f| format!(", GSP signature family {f}"))
        .unwrap_or_default();
    writeln!(out, "{}{arch}{sig}, under {}", p.target, p.firmware_dir)?;
    let mut t = table(&[
        "release",
        "role",
        "path",
        "needed",
        "present",
        "version",
        "signature",
        "note",
    ]);
    for it in &p.items {
        let note = match (&it.error, &it.detail) {
            (Some(e), _) => format!("error: {e}"),
            (None, Some(d)) => d.clone(),
            (None, None) => String::new(),
        };
        t.add_row(vec![
            it.release.clone().unwrap_or_default(),
            it.role.clone(),
            it.path.clone(),
            yes_no(it.required).to_owned(),
            yes_no(it.present).to_owned(),
            it.version.clone().unwrap_or_default(),
            it.signature.clone().unwrap_or_default(),
            note,
        ]);
    }
    writeln!(out, "{t}")?;
    writeln!(
        out,
        "{}",
        if p.complete {
            "complete: every required file is present and readable"
        } else {
            "incomplete: a required file is missing or unreadable"
        }
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;

    fn fake_device(root: &Path, bdf: &str, vendor: &str, device: &str) {
        let dir = root.join(bdf);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("vendor"), format!("{vendor}\n")).unwrap();
        std::fs::write(dir.join("device"), format!("{device}\n")).unwrap();
    }

    #[test]
    fn device_of_an_h200_plans_gh100() {
        let sys = tempfile::tempdir().unwrap();
        fake_device(sys.path(), "0000:41:00.0", "0x10de", "0x2335");
        let t = target(None, Some("41:00.0"), &[], sys.path()).unwrap();
        assert_eq!(t, Target::Nvidia(NvChip::GH100));
    }

    #[test]
    fn amd_device_without_ips_is_refused_with_a_hint() {
        let sys = tempfile::tempdir().unwrap();
        fake_device(sys.path(), "0000:03:00.0", "0x1002", "0x744c");
        let err = target(None, Some("0000:03:00.0"), &[], sys.path()).unwrap_err();
        assert!(err.to_string().contains("--ip"), "{err}");
        let ips = vec!["mp0=13.0.0".to_owned()];
        assert!(matches!(
            target(None, Some("03:00.0"), &ips, sys.path()).unwrap(),
            Target::Amd(_)
        ));
    }

    #[test]
    fn chip_names_and_ips_pick_the_target() {
        let none = Path::new("/nonexistent");
        assert_eq!(
            target(Some("ga102"), None, &[], none).unwrap(),
            Target::Nvidia(NvChip::GA102)
        );
        let ips = vec!["gc=11.0.0".to_owned()];
        assert!(matches!(target(None, None, &ips, none).unwrap(), Target::Amd(v) if v.len() == 1));
        let err = target(Some("navi31"), None, &[], none).unwrap_err();
        assert!(err.to_string().contains("unknown NVIDIA chip"), "{err}");
        let err = target(None, None, &[], none).unwrap_err();
        assert!(err.to_string().contains("--chip"), "{err}");
        let err = target(None, None, &["gc11".to_owned()], none).unwrap_err();
        assert!(err.to_string().contains("NAME=MAJOR.MINOR.REV"), "{err}");
    }

    #[test]
    fn inspect_prints_a_table_and_json_and_fails_on_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("gsp-1.0.bin");
        std::fs::write(
            &good,
            rig_firmware::fixture::gsp_elf(5000, "1.0", &["ga10x"]),
        )
        .unwrap();
        let bad = dir.path().join("junk.bin");
        std::fs::write(&bad, b"not firmware").unwrap();

        let mut out = Vec::new();
        let code = inspect(&mut out, std::slice::from_ref(&good), false).unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(".fwimage") && text.contains("ga10x"),
            "{text}"
        );

        let mut out = Vec::new();
        let code = inspect(&mut out, &[good, bad], true).unwrap();
        assert_eq!(code, ExitCode::FAILURE);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v[0]["format"], "nvidia_gsp_elf");
        assert!(v[1]["error"].as_str().unwrap().contains("unrecognised"));
    }
}
