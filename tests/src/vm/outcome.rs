//! What one boot produced, read back from its run folder.
//!
//! Layout written by `tests/vm/boot.sh` (host) and `rig-vm-run` (guest):
//! `verdict` (key=value lines), `serial.log`, `qemu.stderr`, `ivshmem.bin`, and
//! `results/` with `devices.txt`, `dmesg.txt` and one folder per scenario holding `log`,
//! `status` (`rc= seconds= ok= failed= refused=`) and `files/`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// How the boot ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The guest wrote 0 to isa-debug-exit: every check passed.
    Pass,
    /// The guest wrote 1: some check failed.
    Fail,
    /// The boot ran past its limit (a hang).
    Timeout,
    /// The guest powered off or panicked without a verdict.
    NoVerdict,
    /// QEMU died or would not start.
    QemuAbort,
}

/// One check line of a scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub ok: bool,
    pub what: String,
}

/// One scenario's result.
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    pub name: String,
    /// Exit status of the scenario's shell (124: its own timeout; 126: refused).
    pub rc: i32,
    pub seconds: f64,
    pub checks: Vec<Check>,
    /// The guard refused it (a take-over scenario outside the guest).
    pub refused: bool,
    /// Its artefacts folder.
    pub files: PathBuf,
    /// Its whole output.
    pub log: String,
}

impl ScenarioResult {
    /// Ran, exited 0, passed at least one check and failed none.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.rc == 0 && !self.refused && self.checks.iter().all(|c| c.ok) && !self.checks.is_empty()
    }

    /// The checks that failed.
    pub fn failures(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.ok)
    }
}

/// One PCI function as the guest saw it at the start of the run (`devices.txt`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestDevice {
    pub bdf: String,
    pub vendor: u16,
    pub device: u16,
    pub class: u32,
    pub driver: Option<String>,
    pub iommu_group: Option<u32>,
    pub reset_methods: Vec<String>,
}

/// Everything one boot produced.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub dir: PathBuf,
    pub verdict: Verdict,
    pub qemu_rc: i32,
    pub seconds: f64,
    /// The `N passed, M failed` line, as counts of checks.
    pub passed: u32,
    pub failed: u32,
    /// This boot's nonce (`rig.guest=`).
    pub nonce: String,
    pub scenarios: BTreeMap<String, ScenarioResult>,
    pub devices: Vec<GuestDevice>,
}

/// Why a run folder could not be read.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    #[error("Failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("Bad line in {path}: {line:?}")]
    Parse { path: PathBuf, line: String },
}

impl Outcome {
    /// Reads a run folder. Missing guest results (a hang, a crash) give an outcome with no
    /// scenarios rather than an error: the verdict says what happened.
    ///
    /// # Errors
    /// [`OutcomeError`] if `verdict` is missing or a results file is malformed.
    pub fn load(dir: &Path) -> Result<Outcome, OutcomeError> {
        let verdict_path = dir.join("verdict");
        let kv = parse_key_values(&read(&verdict_path)?);
        let get = |k: &str| kv.get(k).map_or("", String::as_str);
        let verdict = match get("verdict") {
            "pass" => Verdict::Pass,
            "fail" => Verdict::Fail,
            "timeout" => Verdict::Timeout,
            "no-verdict" => Verdict::NoVerdict,
            "qemu-abort" => Verdict::QemuAbort,
            other => {
                return Err(OutcomeError::Parse {
                    path: verdict_path,
                    line: format!("verdict={other}"),
                });
            }
        };
        let (passed, failed) = parse_result_line(get("result")).unwrap_or((0, 0));
        let results = dir.join("results");
        let devices_path = results.join("devices.txt");
        let devices = match std::fs::read_to_string(&devices_path) {
            Ok(text) => parse_devices(&devices_path, &text)?,
            Err(_) => Vec::new(),
        };
        let mut scenarios = BTreeMap::new();
        for name in get("scenarios").split_ascii_whitespace() {
            if let Some(r) = load_scenario(&results, name)? {
                scenarios.insert(name.to_owned(), r);
            }
        }
        Ok(Outcome {
            dir: dir.to_owned(),
            verdict,
            qemu_rc: get("qemu_rc").parse().unwrap_or(-1),
            seconds: get("seconds").parse().unwrap_or(0.0),
            passed,
            failed,
            nonce: get("nonce").to_owned(),
            scenarios,
            devices,
        })
    }

    /// The serial console log of the boot.
    #[must_use]
    pub fn serial_log(&self) -> PathBuf {
        self.dir.join("serial.log")
    }

    /// A scenario's result, if it ran.
    #[must_use]
    pub fn scenario(&self, name: &str) -> Option<&ScenarioResult> {
        self.scenarios.get(name)
    }

    /// The first guest device with this vendor:device.
    #[must_use]
    pub fn device(&self, vendor: u16, device: u16) -> Option<&GuestDevice> {
        self.devices
            .iter()
            .find(|d| d.vendor == vendor && d.device == device)
    }

    /// Panics, with the failed checks, the scenario's log tail and where the serial log
    /// is, unless `name` ran and passed. For tests.
    ///
    /// # Panics
    /// When the scenario did not pass.
    #[track_caller]
    pub fn assert_passed(&self, name: &str) -> &ScenarioResult {
        match self.scenario(name) {
            Some(r) if r.passed() => r,
            Some(r) => panic!("{}", self.report(r)),
            None => panic!(
                "scenario {name} did not run: boot verdict {:?} after {:.1} s (QEMU exit {}); serial log: {}",
                self.verdict,
                self.seconds,
                self.qemu_rc,
                self.serial_log().display()
            ),
        }
    }

    fn report(&self, r: &ScenarioResult) -> String {
        let mut s = format!(
            "scenario {} failed (rc={}, refused={}); boot verdict {:?}\n",
            r.name, r.rc, r.refused, self.verdict
        );
        for c in r.failures() {
            let _ = writeln!(s, "  failed: {}", c.what);
        }
        let tail: Vec<&str> = r.log.lines().rev().take(30).collect();
        let _ = writeln!(s, "---- last lines of its log:");
        for line in tail.iter().rev() {
            let _ = writeln!(s, "{line}");
        }
        let _ = write!(
            s,
            "---- files: {}\n---- serial log: {}",
            r.files.display(),
            self.serial_log().display()
        );
        s
    }
}

fn read(path: &Path) -> Result<String, OutcomeError> {
    std::fs::read_to_string(path).map_err(|source| OutcomeError::Read {
        path: path.to_owned(),
        source,
    })
}

fn load_scenario(results: &Path, name: &str) -> Result<Option<ScenarioResult>, OutcomeError> {
    let dir = results.join(name);
    let status_path = dir.join("status");
    let Ok(status) = std::fs::read_to_string(&status_path) else {
        return Ok(None);
    };
    let kv = parse_key_values(&status.replace(' ', "\n"));
    let num = |k: &str| -> Result<i32, OutcomeError> {
        kv.get(k)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| OutcomeError::Parse {
                path: status_path.clone(),
                line: status.trim().to_owned(),
            })
    };
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    Ok(Some(ScenarioResult {
        name: name.to_owned(),
        rc: num("rc")?,
        seconds: kv
            .get("seconds")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0),
        checks: parse_checks(&log),
        refused: num("refused")? != 0,
        files: dir.join("files"),
        log,
    }))
}

/// `key=value` lines; later keys win; lines without `=` are skipped.
#[must_use]
pub fn parse_key_values(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// `N passed, M failed` → (N, M).
#[must_use]
pub fn parse_result_line(line: &str) -> Option<(u32, u32)> {
    let (p, rest) = line.trim().split_once(" passed, ")?;
    let f = rest.strip_suffix(" failed")?;
    Some((p.parse().ok()?, f.parse().ok()?))
}

/// `CHECK ok: …` / `CHECK FAIL: …` lines of a scenario log.
#[must_use]
pub fn parse_checks(log: &str) -> Vec<Check> {
    log.lines()
        .filter_map(|l| {
            if let Some(what) = l.strip_prefix("CHECK ok: ") {
                Some(Check {
                    ok: true,
                    what: what.to_owned(),
                })
            } else {
                l.strip_prefix("CHECK FAIL: ").map(|what| Check {
                    ok: false,
                    what: what.to_owned(),
                })
            }
        })
        .collect()
}

/// `devices.txt`: `bdf 0xVVVV 0xDDDD 0xCCCCCC driver group reset,methods` per line, with
/// `none` for no driver, group or reset method.
///
/// # Errors
/// [`OutcomeError::Parse`] on a line that does not have that shape.
pub fn parse_devices(path: &Path, text: &str) -> Result<Vec<GuestDevice>, OutcomeError> {
    let bad = |line: &str| OutcomeError::Parse {
        path: path.to_owned(),
        line: line.to_owned(),
    };
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    let none = |s: &str| (s != "none").then(|| s.to_owned());
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            let [bdf, vendor, device, class, driver, group, reset] = f[..] else {
                return Err(bad(line));
            };
            let id16 = |s: &str| hex(s).and_then(|v| u16::try_from(v).ok());
            Ok(GuestDevice {
                bdf: bdf.to_owned(),
                vendor: id16(vendor).ok_or_else(|| bad(line))?,
                device: id16(device).ok_or_else(|| bad(line))?,
                class: hex(class).ok_or_else(|| bad(line))?,
                driver: none(driver),
                iommu_group: none(group).and_then(|g| g.parse().ok()),
                reset_methods: none(reset)
                    .map(|r| r.split(',').map(str::to_owned).collect())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_parses_counts() {
        assert_eq!(parse_result_line("19 passed, 0 failed"), Some((19, 0)));
        assert_eq!(parse_result_line("0 passed, 1 failed\n"), Some((0, 1)));
        assert_eq!(parse_result_line("passed, failed"), None);
        assert_eq!(parse_result_line(""), None);
    }

    #[test]
    fn check_lines_are_collected_in_order() {
        let log = "noise\nCHECK ok: one\nCHECK FAIL: two (rc=1)\nCHECK okay: no\n";

        let checks = parse_checks(log);

        assert_eq!(
            checks,
            vec![
                Check {
                    ok: true,
                    what: "one".into()
                },
                Check {
                    ok: false,
                    what: "two (rc=1)".into()
                },
            ]
        );
    }

    #[test]
    fn devices_parse_with_none_fields() {
        let text = "0000:00:05.0 0x1b36 0x0010 0x010802 nvme 4 flr,bus\n\
                    0000:00:06.0 0x1234 0x11e8 0x00ff00 none none none\n";

        let devices = parse_devices(Path::new("d"), text).expect("valid");

        assert_eq!(devices[0].driver.as_deref(), Some("nvme"));
        assert_eq!(devices[0].iommu_group, Some(4));
        assert_eq!(devices[0].reset_methods, ["flr", "bus"]);
        assert_eq!(devices[1].vendor, 0x1234);
        assert_eq!(devices[1].driver, None);
        assert_eq!(devices[1].iommu_group, None);
        assert!(devices[1].reset_methods.is_empty());
    }

    #[test]
    fn a_short_device_line_is_an_error() {
        let err = parse_devices(Path::new("d"), "0000:00:05.0 0x1b36\n").expect_err("short");

        assert!(matches!(err, OutcomeError::Parse { .. }));
    }

    #[test]
    fn a_run_folder_loads_into_an_outcome() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path();
        std::fs::write(
            p.join("verdict"),
            "verdict=fail\nqemu_rc=3\nseconds=9.5\nresult=1 passed, 1 failed\nscenarios=a b\nnonce=00ff00ff00ff00ff\n",
        )
        .expect("write");
        std::fs::create_dir_all(p.join("results/a/files")).expect("mkdir");
        std::fs::write(
            p.join("results/a/status"),
            "rc=0 seconds=1.5 ok=1 failed=0 refused=0\n",
        )
        .expect("write");
        std::fs::write(p.join("results/a/log"), "CHECK ok: fine\n").expect("write");
        std::fs::create_dir_all(p.join("results/b")).expect("mkdir");
        std::fs::write(
            p.join("results/b/status"),
            "rc=126 seconds=0 ok=0 failed=1 refused=1\n",
        )
        .expect("write");
        std::fs::write(p.join("results/b/log"), "CHECK FAIL: b runs only inside\n").expect("write");

        let out = Outcome::load(p).expect("loads");

        assert_eq!(out.verdict, Verdict::Fail);
        assert_eq!((out.passed, out.failed), (1, 1));
        assert!(out.assert_passed("a").passed());
        let b = out.scenario("b").expect("b ran");
        assert!(b.refused && !b.passed());
    }

    #[test]
    fn a_hung_boot_has_no_scenarios_but_loads() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("verdict"),
            "verdict=timeout\nqemu_rc=124\nscenarios=a\n",
        )
        .expect("write");

        let out = Outcome::load(dir.path()).expect("loads");

        assert_eq!(out.verdict, Verdict::Timeout);
        assert!(out.scenario("a").is_none());
    }
}
