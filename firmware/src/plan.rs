//! Which files under a firmware directory a GPU needs, which are there, their versions and,
//! for NVIDIA, whether the GSP-RM image carries the chip's signature.
//!
//! Flow: [`Target`] (an NVIDIA chip, or AMD IP versions) + a firmware root → [`plan`] →
//! [`Plan`] → `rigctl firmware plan`. It reads the directory and opens the files it finds (the
//! index only: headers and version strings), nothing else.
//!
//! Names: NVIDIA as nova-core and linux-firmware lay them out,
//! `nvidia/<chip>/gsp/<role>-<version>.bin` with roles gsp, bootloader, booter_load,
//! booter_unload (Turing to Ada) or gsp, bootloader, fmc (Hopper, Blackwell), plus `.tlv`
//! containers in the same directory and the driver package's `nvidia/<version>/gsp_*.bin`.
//! AMD as amdgpu builds them from IP versions: `psp_13_0_10_sos.bin`, `gc_11_0_0_pfp.bin`,
//! `sdma_6_0_0.bin`, `smu_13_0_10.bin`, `dcn_3_2_0_dmcub.bin`… Parts named by codename
//! (`navi10_*`, older than IP-discovery naming) are not planned.

use std::path::{Path, PathBuf};

use crate::chip::{IpVersion, NvArch, NvChip};
use crate::falcon::Ucode;
use crate::{Firmware, Image};

/// Versions looked for when a chip's directory holds none (nova-core, then nouveau).
pub const DEFAULT_NV_VERSIONS: [&str; 2] = ["570.144", "535.113.01"];

/// What to plan for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// An NVIDIA chip.
    Nvidia(NvChip),
    /// An AMD GPU, by its IP versions.
    Amd(Vec<IpVersion>),
}

/// One file a GPU needs (or may use).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PlanItem {
    /// What it is for (`gsp`, `booter_load`, `mp0 sos`, `gc pfp`, …).
    pub role: String,
    /// Path relative to the firmware root; alternatives joined by ` | ` when none is present.
    pub path: String,
    /// The firmware version it belongs to (NVIDIA), from its name.
    pub release: Option<String>,
    /// Needed to boot (false: optional or one of several variants).
    pub required: bool,
    /// Present under the root.
    pub present: bool,
    /// The version the file states.
    pub version: Option<String>,
    /// NVIDIA GSP-RM: the signature section the chip takes, and whether it is there.
    pub signature: Option<String>,
    /// A short note (format, components).
    pub detail: Option<String>,
    /// Why a present file could not be read.
    pub error: Option<String>,
}

/// The plan for one GPU.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// The chip name, or the AMD IP versions.
    pub target: String,
    /// `nvidia` or `amd`.
    pub vendor: &'static str,
    /// NVIDIA architecture.
    pub arch: Option<NvArch>,
    /// NVIDIA: the signature family the chip takes.
    pub signature_family: Option<&'static str>,
    /// The firmware root.
    pub firmware_dir: String,
    /// Files, grouped by release/IP.
    pub items: Vec<PlanItem>,
    /// Whether every required file is present and readable (for NVIDIA: in at least one
    /// release).
    pub complete: bool,
}

/// Errors of planning.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The firmware root is not a directory.
    #[error("firmware directory {path} does not exist or is not a directory")]
    Root {
        /// The path.
        path: PathBuf,
    },
    /// No IP versions were given for an AMD GPU.
    #[error("an AMD plan needs IP versions (e.g. --ip mp0=13.0.10 --ip gc=11.0.0)")]
    NoIps,
}

/// Plans the firmware of `target` under `root`.
///
/// # Errors
/// [`PlanError::Root`] when `root` is not a directory, [`PlanError::NoIps`].
pub fn plan(target: &Target, root: &Path) -> Result<Plan, PlanError> {
    if !root.is_dir() {
        return Err(PlanError::Root {
            path: root.to_path_buf(),
        });
    }
    match target {
        Target::Nvidia(chip) => Ok(plan_nvidia(*chip, root)),
        Target::Amd(ips) if ips.is_empty() => Err(PlanError::NoIps),
        Target::Amd(ips) => Ok(plan_amd(ips, root)),
    }
}

/// Looks for `rel` and its `.zst`/`.xz` variants; returns the present one.
fn find(root: &Path, rel: &str) -> Option<String> {
    [rel.to_owned(), format!("{rel}.zst"), format!("{rel}.xz")]
        .into_iter()
        .find(|r| root.join(r).is_file())
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

fn item(role: impl Into<String>, path: impl Into<String>, required: bool) -> PlanItem {
    PlanItem {
        role: role.into(),
        path: path.into(),
        release: None,
        required,
        present: false,
        version: None,
        signature: None,
        detail: None,
        error: None,
    }
}

/// Fills in what the file under `root` says, for `chip` if NVIDIA.
fn inspect(root: &Path, it: &mut PlanItem, chip: Option<NvChip>) {
    let fw = match Firmware::open(root.join(&it.path)) {
        Ok(fw) => fw,
        Err(e) => {
            it.error = Some(chain(&e));
            return;
        }
    };
    it.version = fw.version();
    it.detail = Some(match fw.image() {
        Image::Gsp(g) => format!("GSP-RM, .fwimage {} bytes", g.image.size()),
        Image::Fmc(_) => "FMC (image, hash, signature, publickey)".to_owned(),
        Image::Tlv(t) => format!("TLV, {} blocks", t.blocks.len()),
        Image::Falcon(f) => match &f.ucode {
            Ucode::Hs(hs) => format!(
                "HS ucode, {} signature(s) of {} bytes",
                hs.signature_count, hs.signature_size
            ),
            Ucode::Riscv(rv) => format!("RISC-V ucode, descriptor v{}", rv.version),
        },
        Image::Amd(a) => {
            let names: Vec<&str> = a.components.iter().map(|c| c.name.as_str()).collect();
            format!("{}: {}", a.family, names.join(" "))
        }
    });
    if let (Some(chip), Image::Gsp(_)) = (chip, fw.image()) {
        let fam = chip.signature_family().name();
        it.signature = Some(match fw.signature_for(chip) {
            Some(s) => format!("{} ({} bytes)", s.section, s.span.size()),
            None => {
                it.error = Some(format!("no .fwsignature_{fam} section for {chip}"));
                format!(".fwsignature_{fam} missing")
            }
        });
    }
}

/// Firmware versions present in a chip's gsp directory, newest first.
fn nv_releases(dir: &Path, roles: &[&str]) -> Vec<String> {
    let mut found: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = crate::amd::stem(&name).to_owned();
            roles.iter().find_map(|r| {
                stem.strip_prefix(r)
                    .and_then(|v| v.strip_prefix('-'))
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned)
            })
        })
        .collect();
    found.sort_by_key(|v| std::cmp::Reverse(version_key(v)));
    found.dedup();
    found
}

fn version_key(v: &str) -> Vec<u64> {
    v.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

fn plan_nvidia(chip: NvChip, root: &Path) -> Plan {
    let roles: &[(&str, bool)] = if chip.uses_fmc() {
        &[("gsp", true), ("bootloader", true), ("fmc", true)]
    } else {
        &[
            ("gsp", true),
            ("bootloader", true),
            ("booter_load", true),
            ("booter_unload", false),
        ]
    };
    let dir = format!("nvidia/{}/gsp", chip.dir());
    let names: Vec<&str> = roles.iter().map(|(r, _)| *r).collect();
    let mut releases = nv_releases(&root.join(&dir), &names);
    if releases.is_empty() {
        releases = DEFAULT_NV_VERSIONS
            .iter()
            .map(|v| (*v).to_owned())
            .collect();
    }
    let mut items = Vec::new();
    let mut complete = false;
    for rel in &releases {
        let mut all = true;
        for (role, required) in roles {
            let rel_path = format!("{dir}/{role}-{rel}.bin");
            let mut it = item(*role, rel_path.clone(), *required);
            it.release = Some(rel.clone());
            if let Some(p) = find(root, &rel_path) {
                it.path = p;
                it.present = true;
                inspect(root, &mut it, Some(chip));
            }
            all &= !*required || (it.present && it.error.is_none());
            items.push(it);
        }
        complete |= all;
    }
    // NVFW TLV containers next to the ELF files.
    let tlvs: Vec<String> = std::fs::read_dir(root.join(&dir))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tlv"))
        .collect();
    for name in tlvs {
        let mut it = item("tlv", format!("{dir}/{name}"), false);
        it.present = true;
        inspect(root, &mut it, Some(chip));
        items.push(it);
    }
    // The driver package's images: nvidia/<version>/gsp_{tu10x,ga10x}.bin.
    let mut driver: Vec<String> = std::fs::read_dir(root.join("nvidia"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains('.') && n.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
        .collect();
    driver.sort_by_key(|v| std::cmp::Reverse(version_key(v)));
    for ver in driver {
        let rel_path = format!("nvidia/{ver}/{}", chip.driver_gsp_image());
        if let Some(p) = find(root, &rel_path) {
            let mut it = item("driver gsp", p, false);
            it.release = Some(ver);
            it.present = true;
            inspect(root, &mut it, Some(chip));
            items.push(it);
        }
    }
    Plan {
        target: chip.name().to_owned(),
        vendor: "nvidia",
        arch: Some(chip.arch()),
        signature_family: Some(chip.signature_family().name()),
        firmware_dir: root.display().to_string(),
        items,
        complete,
    }
}

/// amdgpu file names for one IP: (role, alternatives, required).
fn amd_files(ip: &IpVersion) -> Vec<(String, Vec<String>, bool)> {
    let v = ip.underscored();
    let one = |role: &str, name: String, req: bool| (role.to_owned(), vec![name], req);
    match ip.ip.as_str() {
        "mp0" | "psp" => vec![
            (
                "sos | toc".into(),
                vec![format!("psp_{v}_sos.bin"), format!("psp_{v}_toc.bin")],
                true,
            ),
            one("ta", format!("psp_{v}_ta.bin"), false),
            one("asd", format!("psp_{v}_asd.bin"), false),
        ],
        "gc" if ip.major >= 11 => {
            let mut files: Vec<_> = ["pfp", "me", "mec", "rlc", "imu"]
                .iter()
                .map(|b| one(b, format!("gc_{v}_{b}.bin"), true))
                .collect();
            files.push((
                "mes".into(),
                vec![
                    format!("gc_{v}_mes_2.bin"),
                    format!("gc_{v}_uni_mes.bin"),
                    format!("gc_{v}_mes.bin"),
                ],
                true,
            ));
            files.push(one("mes1", format!("gc_{v}_mes1.bin"), false));
            files.push(one("toc", format!("gc_{v}_toc.bin"), false));
            files
        }
        "gc" if ip.major == 9 => vec![
            one("mec", format!("gc_{v}_mec.bin"), true),
            one("rlc", format!("gc_{v}_rlc.bin"), true),
            one("sjt_mec", format!("gc_{v}_sjt_mec.bin"), false),
        ],
        "gc" => {
            let mut files: Vec<_> = ["ce", "pfp", "me", "mec", "rlc"]
                .iter()
                .map(|b| one(b, format!("gc_{v}_{b}.bin"), true))
                .collect();
            files.push(one("mec2", format!("gc_{v}_mec2.bin"), false));
            files
        }
        "sdma" => vec![one("sdma", format!("sdma_{v}.bin"), true)],
        "mp1" | "smu" => vec![one("smu", format!("smu_{v}.bin"), false)],
        "vcn" => vec![one("vcn", format!("vcn_{v}.bin"), true)],
        "vpe" => vec![one("vpe", format!("vpe_{v}.bin"), true)],
        "isp" => vec![one("isp", format!("isp_{v}.bin"), false)],
        "dcn" => {
            let mut alts = vec![format!("dcn_{v}_dmcub.bin")];
            if ip.rev == 0 {
                alts.push(format!("dcn_{}_{}_dmcub.bin", ip.major, ip.minor));
            }
            vec![("dmcub".into(), alts, true)]
        }
        _ => Vec::new(),
    }
}

fn plan_amd(ips: &[IpVersion], root: &Path) -> Plan {
    let mut items = Vec::new();
    let mut complete = true;
    for ip in ips {
        let files = amd_files(ip);
        if files.is_empty() {
            let mut it = item(ip.ip.clone(), "-", false);
            it.release = Some(ip.to_string());
            it.error = Some(format!("no amdgpu file naming known for IP {}", ip.ip));
            items.push(it);
            continue;
        }
        for (role, alts, required) in files {
            let paths: Vec<String> = alts.iter().map(|a| format!("amdgpu/{a}")).collect();
            let mut it = item(format!("{} {role}", ip.ip), paths.join(" | "), required);
            it.release = Some(ip.to_string());
            if let Some(p) = paths.iter().find_map(|a| find(root, a)) {
                it.path = p;
                it.present = true;
                inspect(root, &mut it, None);
            }
            complete &= !required || (it.present && it.error.is_none());
            items.push(it);
        }
    }
    let target = ips
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ");
    Plan {
        target,
        vendor: "amd",
        arch: None,
        signature_family: None,
        firmware_dir: root.display().to_string(),
        items,
        complete,
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used)]
    use super::*;
    use crate::fixture;

    fn write(root: &Path, rel: &str, bytes: &[u8]) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }

    #[test]
    fn nvidia_plan_finds_release_files_and_checks_the_signature() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let g = "nvidia/ga102/gsp";
        write(
            root,
            &format!("{g}/gsp-535.113.01.bin"),
            &fixture::gsp_elf(100, "535.113.01", &["ga10x"]),
        );
        write(
            root,
            &format!("{g}/bootloader-535.113.01.bin"),
            &fixture::falcon_riscv(),
        );
        write(
            root,
            &format!("{g}/booter_load-535.113.01.bin"),
            &fixture::falcon_hs(2, 384),
        );
        let p = plan(&Target::Nvidia(NvChip::GA102), root).unwrap();
        assert!(p.complete);
        let gsp = p.items.iter().find(|i| i.role == "gsp").unwrap();
        assert_eq!(gsp.version.as_deref(), Some("535.113.01"));
        assert_eq!(
            gsp.signature.as_deref(),
            Some(".fwsignature_ga10x (16 bytes)")
        );
        let unload = p.items.iter().find(|i| i.role == "booter_unload").unwrap();
        assert!(!unload.present && !unload.required);
    }

    #[test]
    fn nvidia_plan_flags_a_missing_signature() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "nvidia/ad102/gsp/gsp-1.0.bin",
            &fixture::gsp_elf(100, "1.0", &["ga10x"]),
        );
        let p = plan(&Target::Nvidia(NvChip::AD102), root).unwrap();
        assert!(!p.complete);
        let gsp = p.items.iter().find(|i| i.role == "gsp").unwrap();
        assert!(gsp.error.as_deref().unwrap().contains("ad10x"));
    }

    #[test]
    fn nvidia_plan_without_files_lists_default_releases() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan(&Target::Nvidia(NvChip::GB202), dir.path()).unwrap();
        assert!(!p.complete);
        assert!(
            p.items
                .iter()
                .any(|i| i.path == "nvidia/gb202/gsp/fmc-570.144.bin")
        );
    }

    #[test]
    fn amd_plan_takes_one_of_the_alternatives() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "amdgpu/psp_13_0_4_toc.bin",
            &fixture::amd(1, 0, (13, 0), &[0, 0, 0], &[1; 16]),
        );
        let ips = vec!["mp0=13.0.4".parse().unwrap()];
        let p = plan(&Target::Amd(ips), root).unwrap();
        let toc = &p.items[0];
        assert_eq!(toc.path, "amdgpu/psp_13_0_4_toc.bin");
        assert!(toc.present && toc.error.is_none());
        assert!(p.complete);
        let asd = p.items.iter().find(|i| i.role == "mp0 asd").unwrap();
        assert_eq!(asd.path, "amdgpu/psp_13_0_4_asd.bin");
        assert!(!asd.present);
    }

    #[test]
    fn missing_root_and_empty_ips_are_errors() {
        assert!(matches!(
            plan(
                &Target::Nvidia(NvChip::GA102),
                Path::new("/nonexistent/rig")
            ),
            Err(PlanError::Root { .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            plan(&Target::Amd(vec![]), dir.path()),
            Err(PlanError::NoIps)
        ));
    }
}
