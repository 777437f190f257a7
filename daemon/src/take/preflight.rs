//! What must be true before anything is unbound (SPDK's "Active devices" check is the
//! model; tools that skip it hang: open-gpu-kernel-modules #1119, #1374).
//!
//! Reads only: sysfs, /proc/<pid>/fd, /proc/self/mountinfo, /proc/driver/nvidia.

use std::{
    fs,
    os::unix::fs::{FileTypeExt, MetadataExt},
    path::{Path, PathBuf},
};

use crate::pci::{Bdf, SysfsRoot};

/// A process that has one of the device's nodes open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    pub command: String,
    pub path: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({}) holds {}", self.pid, self.command, self.path)
    }
}

/// One reason not to detach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Concern {
    /// Processes hold the device's DRM, NVIDIA or KFD nodes: the unbind would wait for
    /// them, possibly forever.
    Held(Vec<Holder>),
    /// A filesystem on one of its disks is mounted (or the disk is in use by md/dm/swap).
    Mounted(Vec<String>),
    /// It drives the framebuffer the active console is on.
    Console(String),
    /// It is the boot VGA device.
    BootVga,
    /// Other members of its IOMMU group are bound to host drivers: VFIO would refuse the
    /// group. `--entire-group` takes them too.
    GroupBound(Vec<(Bdf, String)>),
}

impl Concern {
    /// Whether `--force` may override it: losing the console is the user's call; a
    /// holder or a mount would hang or corrupt, and a non-viable group cannot work.
    pub fn forceable(&self) -> bool {
        matches!(self, Self::Console(_) | Self::BootVga)
    }
}

impl std::fmt::Display for Concern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Held(h) => {
                let list: Vec<String> = h.iter().map(ToString::to_string).collect();
                write!(f, "in use: {}", list.join("; "))
            }
            Self::Mounted(m) => write!(f, "its disks are in use: {}", m.join("; ")),
            Self::Console(fb) => write!(f, "it drives the active console ({fb})"),
            Self::BootVga => f.write_str("it is the boot VGA device"),
            Self::GroupBound(g) => {
                let list: Vec<String> = g.iter().map(|(b, d)| format!("{b} ({d})")).collect();
                write!(
                    f,
                    "other members of its IOMMU group are bound to host drivers: {} (use --entire-group)",
                    list.join(", ")
                )
            }
        }
    }
}

/// Where the checks look; tests point these at temp dirs.
#[derive(Debug, Clone)]
pub struct Places {
    pub proc_root: PathBuf,
    pub dev_root: PathBuf,
}

impl Default for Places {
    fn default() -> Self {
        Self {
            proc_root: PathBuf::from("/proc"),
            dev_root: PathBuf::from("/dev"),
        }
    }
}

/// Runs every check for `bdf`, currently bound to `driver`.
pub fn check(
    root: &SysfsRoot,
    places: &Places,
    bdf: Bdf,
    driver: Option<&str>,
    entire_group: bool,
) -> Vec<Concern> {
    let mut out = Vec::new();
    let nodes = device_nodes(root, places, bdf, driver);
    let holders = holders(&places.proc_root, &nodes);
    if !holders.is_empty() {
        out.push(Concern::Held(holders));
    }
    let mounted = disks_in_use(root, places, bdf);
    if !mounted.is_empty() {
        out.push(Concern::Mounted(mounted));
    }
    if let Some(fb) = console_framebuffer(root, places, bdf) {
        out.push(Concern::Console(fb));
    }
    if root.read_attr(bdf, "boot_vga").ok().flatten().as_deref() == Some("1") {
        out.push(Concern::BootVga);
    }
    if !entire_group {
        let bound = group_members_bound(root, bdf);
        if !bound.is_empty() {
            out.push(Concern::GroupBound(bound));
        }
    }
    out
}

/// A device node: its path as shown to people, and its device number.
#[derive(Debug, Clone)]
struct Node {
    path: String,
    rdev: u64,
}

fn dev_number(text: &str) -> Option<u64> {
    let (maj, min) = text.trim().split_once(':')?;
    Some(libc_makedev(maj.parse().ok()?, min.parse().ok()?))
}

/// Linux's `makedev` (glibc's encoding of dev_t).
fn libc_makedev(major: u64, minor: u64) -> u64 {
    ((major & 0xffff_f000) << 32)
        | ((major & 0xfff) << 8)
        | ((minor & 0xffff_ff00) << 12)
        | (minor & 0xff)
}

/// The character devices that reach this function: DRM card/render nodes, the NVIDIA
/// minor node, and /dev/kfd for amdgpu (KFD is one node for every AMD GPU).
fn device_nodes(root: &SysfsRoot, places: &Places, bdf: Bdf, driver: Option<&str>) -> Vec<Node> {
    let mut nodes = Vec::new();
    if let Ok(entries) = fs::read_dir(root.device_dir(bdf).join("drm")) {
        // Since the DRM control minor went away (Linux 6.8), the kernel keeps a
        // `controlD<64+n>` symlink to `card<n>` for old userspace; it has no /dev node, so
        // only the real directories name a node.
        for e in entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(rdev) = fs::read_to_string(e.path().join("dev"))
                .ok()
                .and_then(|t| dev_number(&t))
            {
                nodes.push(Node {
                    path: format!("/dev/dri/{name}"),
                    rdev,
                });
            }
        }
    }
    if driver == Some("nvidia") {
        let info = places
            .proc_root
            .join(format!("driver/nvidia/gpus/{bdf}/information"));
        let minor = fs::read_to_string(info).ok().and_then(|t| {
            t.lines()
                .find_map(|l| {
                    l.strip_prefix("Device Minor:")
                        .map(|m| m.trim().parse::<u64>())
                })
                .and_then(Result::ok)
        });
        if let Some(m) = minor {
            // NVIDIA's character major is 195 (nv.c, NV_MAJOR_DEVICE_NUMBER).
            nodes.push(Node {
                path: format!("/dev/nvidia{m}"),
                rdev: libc_makedev(195, m),
            });
        }
    }
    if driver == Some("amdgpu")
        && let Ok(m) = fs::metadata(places.dev_root.join("kfd"))
        && m.file_type().is_char_device()
    {
        nodes.push(Node {
            path: "/dev/kfd".to_owned(),
            rdev: m.rdev(),
        });
    }
    nodes
}

/// Processes with an open fd on any of `nodes`, compared by device number so that
/// containers with their own /dev are caught too.
fn holders(proc_root: &Path, nodes: &[Node]) -> Vec<Holder> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let Ok(procs) = fs::read_dir(proc_root) else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            // metadata() follows the magic link to the open file's inode.
            let Ok(m) = fs::metadata(fd.path()) else {
                continue;
            };
            if !m.file_type().is_char_device() {
                continue;
            }
            if let Some(n) = nodes.iter().find(|n| n.rdev == m.rdev()) {
                let command = fs::read_to_string(p.path().join("comm"))
                    .map(|c| c.trim().to_owned())
                    .unwrap_or_else(|_| "?".to_owned());
                if !out
                    .iter()
                    .any(|h: &Holder| h.pid == pid && h.path == n.path)
                {
                    out.push(Holder {
                        pid,
                        command,
                        path: n.path.clone(),
                    });
                }
            }
        }
    }
    out.sort_by_key(|h| h.pid);
    out
}

/// Block devices below the function that are mounted, swapped on, or held by md/dm.
fn disks_in_use(root: &SysfsRoot, places: &Places, bdf: Bdf) -> Vec<String> {
    let Ok(dev_dir) = fs::canonicalize(root.device_dir(bdf)) else {
        return Vec::new();
    };
    let mut numbers: Vec<(String, u64)> = Vec::new();
    let mut in_use = Vec::new();
    let Ok(blocks) = fs::read_dir(root.path().join("block")) else {
        return Vec::new();
    };
    for b in blocks.flatten() {
        let Ok(real) = fs::canonicalize(b.path()) else {
            continue;
        };
        // NVMe multipath puts the namespace head (nvme0n1) under a virtual subsystem
        // (devices/virtual/nvme-subsystem/nvme-subsys0/nvme0n1) whose directory links
        // to its controllers (nvme-subsys0/nvme0 → the function's nvme/nvme0).
        let below = |p: &Path| fs::canonicalize(p).is_ok_and(|r| r.starts_with(&dev_dir));
        let via_subsystem = real.parent().is_some_and(|subsys| {
            fs::read_dir(subsys).is_ok_and(|entries| {
                entries
                    .flatten()
                    .any(|e| e.file_type().is_ok_and(|t| t.is_symlink()) && below(&e.path()))
            })
        });
        if !real.starts_with(&dev_dir) && !via_subsystem {
            continue;
        }
        let name = b.file_name().to_string_lossy().into_owned();
        let mut dirs = vec![(name.clone(), real.clone())];
        if let Ok(parts) = fs::read_dir(&real) {
            for p in parts.flatten() {
                let pn = p.file_name().to_string_lossy().into_owned();
                if pn.starts_with(&name) {
                    dirs.push((pn, p.path()));
                }
            }
        }
        for (n, d) in dirs {
            if let Some(rdev) = fs::read_to_string(d.join("dev"))
                .ok()
                .and_then(|t| dev_number(&t))
            {
                numbers.push((n.clone(), rdev));
            }
            if fs::read_dir(d.join("holders")).is_ok_and(|mut h| h.next().is_some()) {
                in_use.push(format!("/dev/{n} is held by md/dm"));
            }
        }
    }
    if numbers.is_empty() {
        return in_use;
    }
    let mountinfo = fs::read_to_string(places.proc_root.join("self/mountinfo")).unwrap_or_default();
    for line in mountinfo.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(majmin), Some(mnt)) = (f.get(2), f.get(4)) else {
            continue;
        };
        if let Some(n) = dev_number(majmin).and_then(|r| numbers.iter().find(|(_, x)| *x == r)) {
            in_use.push(format!("/dev/{} is mounted on {mnt}", n.0));
        }
    }
    let swaps = fs::read_to_string(places.proc_root.join("swaps")).unwrap_or_default();
    for (n, _) in &numbers {
        if swaps
            .lines()
            .any(|l| l.split_whitespace().next() == Some(&format!("/dev/{n}")))
        {
            in_use.push(format!("/dev/{n} is swap"));
        }
    }
    in_use
}

/// The fb device of this function when the framebuffer console is on it.
///
/// fbcon maps every console to fb0 unless booted with `fbcon=map:` (fbcon.c,
/// con2fb_map_boot), so the console is on this function when it owns fb0 — or the fb
/// that map names first — and a framebuffer console is bound.
fn console_framebuffer(root: &SysfsRoot, places: &Places, bdf: Bdf) -> Option<String> {
    let dev_dir = fs::canonicalize(root.device_dir(bdf)).ok()?;
    let console_fb = fs::read_to_string(places.proc_root.join("cmdline"))
        .ok()
        .and_then(|c| {
            c.split_whitespace()
                .find_map(|a| a.strip_prefix("fbcon=map:"))
                .and_then(|m| m.chars().next()?.to_digit(10))
        })
        .unwrap_or(0);
    let fb = format!("fb{console_fb}");
    let target =
        fs::canonicalize(root.path().join("class/graphics").join(&fb).join("device")).ok()?;
    if target != dev_dir {
        return None;
    }
    let consoles = fs::read_dir(root.path().join("class/vtconsole")).ok()?;
    let active = consoles.flatten().any(|c| {
        let bound = fs::read_to_string(c.path().join("bind")).is_ok_and(|b| b.trim() == "1");
        let name = fs::read_to_string(c.path().join("name")).unwrap_or_default();
        bound && name.contains("frame buffer")
    });
    active.then(|| format!("/dev/{fb}"))
}

/// Members of the IOMMU group (not bridges) bound to drivers VFIO does not accept.
pub fn group_members_bound(root: &SysfsRoot, bdf: Bdf) -> Vec<(Bdf, String)> {
    root.iommu_group_members(bdf)
        .into_iter()
        .filter(|m| *m != bdf)
        .filter(|m| {
            // Bridges stay with their driver (pcieport); VFIO tolerates them.
            root.read_config(*m)
                .map(|(c, _)| c.get(0x0e).is_none_or(|t| t & 0x7f != 1))
                .unwrap_or(true)
        })
        .filter_map(|m| {
            let d = root.link_name(m, "driver")?;
            (!matches!(d.as_str(), "vfio-pci" | "pci-stub")).then_some((m, d))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makedev_matches_glibc_for_small_and_large_numbers() {
        assert_eq!(libc_makedev(226, 0), 0xe200);
        assert_eq!(libc_makedev(226, 128), 0xe280);
        assert_eq!(libc_makedev(195, 255), 0xc3ff);
        assert_eq!(dev_number("259:1\n"), Some(libc_makedev(259, 1)));
        assert_eq!(dev_number("nope"), None);
    }

    #[test]
    fn drm_nodes_are_the_card_and_render_directories_not_the_control_compat_link() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = SysfsRoot::new(dir.path());
        let bdf: Bdf = "0000:00:03.0".parse().expect("bdf");
        let drm = root.device_dir(bdf).join("drm");
        for (name, dev) in [("card2", "226:2"), ("renderD128", "226:128")] {
            fs::create_dir_all(drm.join(name)).expect("node dir");
            fs::write(drm.join(name).join("dev"), format!("{dev}\n")).expect("dev");
        }
        std::os::unix::fs::symlink("card2", drm.join("controlD66")).expect("compat link");
        let mut paths: Vec<String> = device_nodes(&root, &Places::default(), bdf, None)
            .into_iter()
            .map(|n| n.path)
            .collect();
        paths.sort();
        assert_eq!(paths, ["/dev/dri/card2", "/dev/dri/renderD128"]);
    }

    #[test]
    fn holders_of_a_char_device_are_found_by_number() {
        // This very process holds /dev/null open: find it through /proc.
        let null = fs::metadata("/dev/null").expect("/dev/null");
        let _f = fs::File::open("/dev/null").expect("open");
        let nodes = [Node {
            path: "/dev/null".into(),
            rdev: null.rdev(),
        }];
        let h = holders(Path::new("/proc"), &nodes);
        let me = i32::try_from(std::process::id()).expect("pid fits");
        assert!(
            h.iter().any(|h| h.pid == me && h.path == "/dev/null"),
            "{h:?}"
        );
    }
}
