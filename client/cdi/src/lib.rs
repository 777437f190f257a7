//! Container Device Interface (CDI) specs for devices rig holds: what a CDI-aware engine
//! (podman, containerd, CRI-O, Docker with CDI; the kubelet through `cdi_devices`) adds
//! to a container that asks for `rig.dev/gpu=0000:01:00.0`. One spec file per held
//! device, written atomically; `rigctl cdi generate` and rig-device-plugin write the
//! same files from [`spec_for`].
//!
//! The spec version is [`CDI_VERSION`], 0.5.0: the newest that Debian 12's CDI library
//! accepts (golang-github-container-orchestrated-devices-container-device-interface-dev
//! 0.5.2: `specs-go/config.go` `CurrentVersion = "0.5.0"`, `pkg/cdi/spec.go`
//! `validSpecVersions` 0.1.0–0.5.0); Debian's podman 4.3.1 carries its own vendored
//! copy of the same 0.5 line (docs/k8s.md says how that was checked). So no field
//! newer than 0.5.0 is written (no spec `annotations`, no
//! `intelRdt`, no `additionalGIDs`). Names follow that library's rules
//! (`pkg/cdi/qualified-device.go`): vendor `[A-Za-z][A-Za-z0-9_.-]*`, class
//! `[A-Za-z][A-Za-z0-9_-]*`, device `[A-Za-z0-9][A-Za-z0-9_.:-]*`, each ending
//! alphanumeric; a PCI address is a valid device name as it is.
//!
//! What a spec gives the container (docs/k8s.md says why): the VFIO group node and
//! `/dev/vfio/vfio` (vfio mode) or the `resourceN` files (sysfs mode), the directory of
//! rigd's socket (both sockets: gRPC and the `.fd` side socket, and a rigd restart
//! keeps them reachable), `RIG_SOCKET`, `RIG_DEVICE` and `RIG_DEVICE_MODE`, and two
//! hooks running `rigctl cdi hook`: `createRuntime` refuses to start the container on a
//! device rig does not hold or that someone else leases, `poststop` waits for rigd to
//! have reclaimed and reset the device after the container's lease ended. The lease
//! itself is what ties the device to the container's life: it lives as long as the
//! session's side connection (docs/lease.md), which dies with the container's processes.
//!
//! A crate of its own so that rigctl, which writes these specs too, does not build the
//! device plugin's gRPC server. Not here: talking to rigd for the facts (callers pass
//! [`SpecDevice`]), the kubelet (rig-device-plugin), the hooks' own logic (rigctl's
//! `cli/cdi.rs`).

#![deny(unsafe_code)]

use std::{
    fs,
    io::{self, Write},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    str::FromStr,
};

use serde::{Deserialize, Serialize};

use rig_client::{Device, HeldDevice, Mode};

/// The CDI spec version written: the newest Debian 12's CDI library and podman accept.
pub const CDI_VERSION: &str = "0.5.0";

/// Where CDI specs for dynamically held devices go (the CDI library's second default
/// directory, after /etc/cdi, and the one for generated specs).
pub const DEFAULT_CDI_DIR: &str = "/var/run/cdi";

/// The kind (and Kubernetes resource name) of whole GPUs.
pub const GPU_KIND: &str = "rig.dev/gpu";

/// Every spec file rig writes starts with this, so stale ones can be told from others'.
const FILE_PREFIX: &str = "rig-";

/// A CDI spec (specs-go/config.go of CDI 0.5.0; the JSON names are the schema's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spec {
    #[serde(rename = "cdiVersion")]
    pub version: String,
    pub kind: String,
    pub devices: Vec<SpecDeviceEntry>,
    #[serde(
        rename = "containerEdits",
        default,
        skip_serializing_if = "ContainerEdits::is_empty"
    )]
    pub container_edits: ContainerEdits,
}

/// One device of a spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpecDeviceEntry {
    pub name: String,
    #[serde(rename = "containerEdits")]
    pub container_edits: ContainerEdits,
}

/// What the engine changes in the container's OCI spec.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerEdits {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    #[serde(rename = "deviceNodes", default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<DeviceNode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<Hook>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<Mount>,
}

impl ContainerEdits {
    fn is_empty(&self) -> bool {
        self.env.is_empty()
            && self.device_nodes.is_empty()
            && self.hooks.is_empty()
            && self.mounts.is_empty()
    }
}

/// A device node; type, major and minor are left to the engine, which reads them from
/// the host path when the container is made (the node's numbers are the host's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceNode {
    pub path: String,
    #[serde(rename = "hostPath", default, skip_serializing_if = "Option::is_none")]
    pub host_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
}

/// A bind mount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    #[serde(rename = "hostPath")]
    pub host_path: String,
    #[serde(rename = "containerPath")]
    pub container_path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub options: Vec<String>,
}

/// An OCI hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    #[serde(rename = "hookName")]
    pub hook_name: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u32>,
}

/// A kind that CDI or Kubernetes would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("`{0}` is not a CDI kind: it must be vendor/class (e.g. rig.dev/gpu)")]
    NoSlash(String),
    #[error(
        "`{0}`: a CDI vendor starts with a letter, ends with a letter or digit, and holds only letters, digits, `_`, `-` and `.`"
    )]
    Vendor(String),
    #[error(
        "`{0}`: a CDI class starts with a letter, ends with a letter or digit, and holds only letters, digits, `_` and `-`"
    )]
    Class(String),
    #[error("`{0}` is not a device rule: NAME=gpu, NAME=class:0xCCSS or NAME=id:VVVV:DDDD")]
    Rule(String),
}

fn name_ok(s: &str, extra: &[u8]) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || extra.contains(c))
}

/// Checks a kind (`vendor/class`) as the CDI library does; it is also a valid
/// Kubernetes extended resource name (a DNS subdomain and a name).
///
/// # Errors
/// The [`NameError`] saying which part is wrong.
pub fn check_kind(kind: &str) -> Result<(), NameError> {
    let (vendor, class) = kind
        .split_once('/')
        .ok_or_else(|| NameError::NoSlash(kind.to_owned()))?;
    if !name_ok(vendor, b"_-.") || !vendor.contains('.') {
        return Err(NameError::Vendor(kind.to_owned()));
    }
    if !name_ok(class, b"_-") {
        return Err(NameError::Class(kind.to_owned()));
    }
    Ok(())
}

/// Which held devices a kind (a Kubernetes resource) names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matcher {
    /// GPUs and accelerators: class 0x03xx and 0x12xx.
    Gpu,
    /// A base class and subclass: `class:0x00ff`.
    Class(u16),
    /// A vendor and device id: `id:1234:11e8`.
    Id(u16, u16),
}

impl Matcher {
    /// Whether `d` is one of these.
    pub fn matches(self, d: &Device) -> bool {
        let class = u16::try_from(d.class_code >> 8).unwrap_or(u16::MAX);
        match self {
            Self::Gpu => matches!(class >> 8, 0x03 | 0x12),
            Self::Class(c) => class == c,
            Self::Id(v, p) => d.vendor_id == v && d.device_id == p,
        }
    }
}

/// A kind and the devices it names: `rig.dev/gpu=gpu`, `rig.dev/edu=id:1234:11e8`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub kind: String,
    pub matcher: Matcher,
}

impl FromStr for Rule {
    type Err = NameError;

    fn from_str(s: &str) -> Result<Self, NameError> {
        let bad = || NameError::Rule(s.to_owned());
        let (kind, what) = s.split_once('=').ok_or_else(bad)?;
        check_kind(kind)?;
        let hex = |t: &str| u16::from_str_radix(t.trim_start_matches("0x"), 16).map_err(|_| bad());
        let matcher = match what.split(':').collect::<Vec<_>>().as_slice() {
            ["gpu"] => Matcher::Gpu,
            ["class", c] => Matcher::Class(hex(c)?),
            ["id", v, d] => Matcher::Id(hex(v)?, hex(d)?),
            _ => return Err(bad()),
        };
        Ok(Self {
            kind: kind.to_owned(),
            matcher,
        })
    }
}

/// The rule a device falls under: the first that matches.
pub fn rule_for<'a>(rules: &'a [Rule], d: &Device) -> Option<&'a Rule> {
    rules.iter().find(|r| r.matcher.matches(d))
}

/// Where things are on the host, for every spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// rigd's socket; its directory is mounted (the `.fd` side socket sits beside it).
    pub socket: PathBuf,
    /// The rigctl the hooks run (an absolute path on the host); no hooks when `None`.
    pub rigctl: Option<PathBuf>,
    /// The host's /dev (a test points it elsewhere); nodes keep /dev in the container.
    pub dev: PathBuf,
    /// The host's sysfs root, for the resource files of a sysfs-mode device.
    pub sysfs: PathBuf,
}

/// The facts of one held device a spec needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecDevice {
    pub bdf: String,
    pub mode: Mode,
    /// The IOMMU group (vfio mode); `None` when the kernel shows none.
    pub iommu_group: Option<String>,
    /// Memory BARs with a size (sysfs mode's resource files).
    pub memory_bars: Vec<u8>,
}

impl SpecDevice {
    /// From what `status` and `show` say; `None` while the device's mode is not known
    /// (another operation holds it).
    pub fn of(held: &HeldDevice, device: &Device) -> Option<Self> {
        Some(Self {
            bdf: held.bdf.clone(),
            mode: held.mode?,
            iommu_group: device.sysfs.iommu_group.clone(),
            memory_bars: device
                .bars
                .iter()
                .filter(|b| b.kind == rig_client::BarKind::Memory && b.size > 0)
                .map(|b| b.index)
                .collect(),
        })
    }
}

/// The fully qualified CDI name: `rig.dev/gpu=0000:01:00.0`.
pub fn device_name(kind: &str, bdf: &str) -> String {
    format!("{kind}={bdf}")
}

/// The file a device's spec lives in: `rig-rig.dev_gpu-0000-01-00.0.json`.
pub fn file_name(kind: &str, bdf: &str) -> String {
    format!(
        "{FILE_PREFIX}{}-{}.json",
        kind.replace('/', "_"),
        bdf.replace(':', "-")
    )
}

/// The spec of one held device under `kind`.
pub fn spec_for(kind: &str, d: &SpecDevice, host: &Host) -> Spec {
    let socket_dir = host
        .socket
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_owned);
    let mut edits = ContainerEdits {
        env: vec![
            format!("RIG_SOCKET={}", host.socket.display()),
            format!("RIG_DEVICE={}", d.bdf),
            format!("RIG_DEVICE_MODE={}", d.mode.as_str()),
        ],
        ..ContainerEdits::default()
    };
    match d.mode {
        Mode::Vfio => {
            let nodes = d
                .iommu_group
                .iter()
                .map(String::as_str)
                .chain(["vfio"])
                .map(|n| DeviceNode {
                    path: format!("/dev/vfio/{n}"),
                    host_path: Some(host.dev.join("vfio").join(n).display().to_string()),
                    permissions: Some("rw".into()),
                });
            edits.device_nodes.extend(nodes);
        }
        Mode::Sysfs => {
            for bar in &d.memory_bars {
                let rel = format!("bus/pci/devices/{}/resource{bar}", d.bdf);
                edits.mounts.push(Mount {
                    host_path: host.sysfs.join(&rel).display().to_string(),
                    container_path: format!("/sys/{rel}"),
                    options: vec!["bind".into(), "rw".into()],
                });
            }
        }
    }
    edits.mounts.push(Mount {
        host_path: socket_dir.display().to_string(),
        container_path: socket_dir.display().to_string(),
        options: vec!["rbind".into(), "rw".into()],
    });
    if let Some(rigctl) = &host.rigctl {
        let hook = |name: &str, step: &str, timeout: u32| Hook {
            hook_name: name.into(),
            path: rigctl.display().to_string(),
            args: vec![
                "rigctl".into(),
                "--socket".into(),
                host.socket.display().to_string(),
                "cdi".into(),
                "hook".into(),
                step.into(),
                d.bdf.clone(),
            ],
            timeout: Some(timeout),
        };
        edits
            .hooks
            .push(hook("createRuntime", "create-runtime", 10));
        edits.hooks.push(hook("poststop", "poststop", 30));
    }
    Spec {
        version: CDI_VERSION.into(),
        kind: kind.into(),
        devices: vec![SpecDeviceEntry {
            name: d.bdf.clone(),
            container_edits: edits,
        }],
        container_edits: ContainerEdits::default(),
    }
}

/// The spec of every device rigd holds now that a rule names, as rig-device-plugin
/// writes them (what `rigctl cdi generate` writes); devices whose mode is not known yet
/// (another operation holds them) are left out.
///
/// # Errors
/// rigd's errors, from Status or a device's decode.
pub async fn held_specs(
    client: &mut rig_client::Client,
    rules: &[Rule],
    host: &Host,
) -> Result<Vec<Spec>, rig_client::ClientError> {
    let mut specs = Vec::new();
    for held in client.status().await?.devices {
        let device = client.device(&held.bdf).await?;
        let (Some(rule), Some(d)) = (rule_for(rules, &device), SpecDevice::of(&held, &device))
        else {
            continue;
        };
        specs.push(spec_for(&rule.kind, &d, host));
    }
    Ok(specs)
}

/// Writes `spec` into `dir` as its device's file, atomically (a temp file renamed over
/// it, mode 0644): an engine reading the directory sees the old spec or the new one.
/// Unchanged content is not rewritten (engines watch the directory). Returns the path.
///
/// # Errors
/// The directory cannot be made, or the file written or renamed.
pub fn write_spec(dir: &Path, spec: &Spec) -> io::Result<PathBuf> {
    let name = spec
        .devices
        .first()
        .map(|d| file_name(&spec.kind, &d.name))
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a spec without devices"))?;
    fs::create_dir_all(dir)?;
    let path = dir.join(&name);
    let mut text = serde_json::to_vec_pretty(spec).map_err(io::Error::other)?;
    text.push(b'\n');
    if fs::read(&path).is_ok_and(|old| old == text) {
        return Ok(path);
    }
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.set_permissions(fs::Permissions::from_mode(0o644))?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &path)?;
    Ok(path)
}

/// Removes rig's spec files in `dir` that are not in `keep` (file names): devices no
/// longer held. Others' files are left alone. Returns the paths removed.
///
/// # Errors
/// The directory cannot be read, or a file removed.
pub fn remove_stale(dir: &Path, keep: &[String]) -> io::Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for e in entries {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(FILE_PREFIX) && name.ends_with(".json") && !keep.contains(&name) {
            fs::remove_file(e.path())?;
            removed.push(e.path());
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> Host {
        Host {
            socket: "/run/rig/rigd.sock".into(),
            rigctl: Some("/usr/bin/rigctl".into()),
            dev: "/dev".into(),
            sysfs: "/sys".into(),
        }
    }

    #[test]
    fn kinds_follow_the_cdi_librarys_rules() {
        check_kind("rig.dev/gpu").expect("rig.dev/gpu");
        check_kind("example.com/edu_dma-1").expect("underscores and dashes");
        assert_eq!(
            check_kind("gpu"),
            Err(NameError::NoSlash("gpu".into())),
            "no vendor"
        );
        assert!(matches!(
            check_kind("rig.dev/a.b"),
            Err(NameError::Class(_))
        ));
        assert!(matches!(check_kind("rig/gpu"), Err(NameError::Vendor(_))));
        assert!(matches!(
            check_kind("1rig.dev/gpu"),
            Err(NameError::Vendor(_))
        ));
        assert!(matches!(
            check_kind("rig.dev/gpu-"),
            Err(NameError::Class(_))
        ));
    }

    #[test]
    fn rules_parse_and_refuse_junk() {
        let r: Rule = "rig.dev/edu=id:1234:11e8".parse().expect("id rule");
        assert_eq!(r.matcher, Matcher::Id(0x1234, 0x11e8));
        let r: Rule = "rig.dev/other=class:0x00ff".parse().expect("class rule");
        assert_eq!(r.matcher, Matcher::Class(0x00ff));
        let r: Rule = "rig.dev/gpu=gpu".parse().expect("gpu rule");
        assert_eq!(r.matcher, Matcher::Gpu);
        for bad in [
            "rig.dev/gpu",
            "rig.dev/gpu=tpu",
            "rig.dev/gpu=id:zz:1",
            "x=gpu",
        ] {
            bad.parse::<Rule>().expect_err(bad);
        }
    }

    #[test]
    fn a_vfio_spec_has_the_group_node_the_socket_dir_env_and_both_hooks() {
        let d = SpecDevice {
            bdf: "0000:01:00.0".into(),
            mode: Mode::Vfio,
            iommu_group: Some("9".into()),
            memory_bars: vec![0],
        };
        let s = spec_for(GPU_KIND, &d, &host());
        assert_eq!(s.version, "0.5.0");
        assert_eq!(s.devices[0].name, "0000:01:00.0");
        let e = &s.devices[0].container_edits;
        let nodes: Vec<_> = e.device_nodes.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(nodes, ["/dev/vfio/9", "/dev/vfio/vfio"]);
        assert_eq!(e.mounts.len(), 1);
        assert_eq!(e.mounts[0].container_path, "/run/rig");
        assert!(e.env.contains(&"RIG_DEVICE=0000:01:00.0".to_owned()));
        let hooks: Vec<_> = e.hooks.iter().map(|h| h.hook_name.as_str()).collect();
        assert_eq!(hooks, ["createRuntime", "poststop"]);
        assert_eq!(
            e.hooks[1].args.last().map(String::as_str),
            Some("0000:01:00.0")
        );
        let json = serde_json::to_value(&s).expect("json");
        assert_eq!(json["cdiVersion"], "0.5.0");
        assert!(
            json.get("containerEdits").is_none(),
            "no empty global edits"
        );
        assert_eq!(
            json["devices"][0]["containerEdits"]["deviceNodes"][0]["hostPath"],
            "/dev/vfio/9"
        );
    }

    #[test]
    fn a_sysfs_spec_mounts_the_resource_files_and_no_vfio_nodes() {
        let d = SpecDevice {
            bdf: "0000:01:00.0".into(),
            mode: Mode::Sysfs,
            iommu_group: None,
            memory_bars: vec![0, 2],
        };
        let mut h = host();
        h.rigctl = None;
        let s = spec_for("rig.dev/edu", &d, &h);
        let e = &s.devices[0].container_edits;
        assert!(e.device_nodes.is_empty());
        assert!(e.hooks.is_empty());
        let mounts: Vec<_> = e.mounts.iter().map(|m| m.container_path.as_str()).collect();
        assert_eq!(
            mounts,
            [
                "/sys/bus/pci/devices/0000:01:00.0/resource0",
                "/sys/bus/pci/devices/0000:01:00.0/resource2",
                "/run/rig"
            ]
        );
    }

    #[test]
    fn specs_are_written_atomically_and_stale_ones_removed_but_not_others() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = SpecDevice {
            bdf: "0000:01:00.0".into(),
            mode: Mode::Vfio,
            iommu_group: Some("9".into()),
            memory_bars: vec![],
        };
        let s = spec_for(GPU_KIND, &d, &host());
        let p = write_spec(dir.path(), &s).expect("write");
        assert_eq!(
            p.file_name().and_then(|n| n.to_str()),
            Some("rig-rig.dev_gpu-0000-01-00.0.json")
        );
        let back: Spec = serde_json::from_slice(&fs::read(&p).expect("read")).expect("parse");
        assert_eq!(back, s);
        fs::write(dir.path().join("vendor.json"), "{}").expect("another's spec");
        let removed = remove_stale(dir.path(), &[]).expect("clean");
        assert_eq!(removed, [p]);
        assert!(dir.path().join("vendor.json").exists());
    }
}
