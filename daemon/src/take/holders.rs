//! Which processes still hold a device rigd lent or held: the scan of `/proc` that a
//! lease's end runs before the device is reopened (`take::lease`), and that recovery
//! runs for a device whose VFIO group an earlier rigd's holder keeps busy
//! (`take::recover`). Each holder is named by pid, `comm` and real uid.
//!
//! What the kernel lets rigd tell apart (Linux 6.12; read in drivers/vfio/group.c,
//! vfio_main.c and the guest):
//! - A descriptor of rigd's own device file: kcmp(2) `KCMP_FILE` (`sys::kcmp`), exact.
//! - A descriptor of the device when rigd has no file of it (after a restart): every
//!   VFIO device file links to `anon_inode:[vfio-device]`, and 6.12's fdinfo has no
//!   device in it (the `vfio-device-syspath:` line came with Linux 6.18; where it is
//!   present it is used, exactly). Otherwise the descriptor is copied (pidfd_getfd(2),
//!   `sys::pidfd`), the first 64 bytes of config space are read through the copy and
//!   compared with the device's own in sysfs: vendor, device, revision and class,
//!   subsystem, and the BAR addresses. vfio-pci fills its virtual config from the
//!   hardware when the device is first opened; a holder that wrote other addresses
//!   into its virtual BARs is not matched. A descriptor that cannot be copied (EPERM
//!   from a seccomp filter, a kernel before 5.6) counts as a holder: the safe side.
//!   After a restart the naming is all that rests on this: whether the device is
//!   still held is the kernel's answer to opening its group.
//! - A mapping with no descriptor left (a child that mapped a BAR and closed its
//!   fds): `/proc/PID/maps` shows the same `anon_inode:[vfio-device]` for every
//!   device, with the region's offset (vfio-pci: region N at N << 40,
//!   `VFIO_PCI_OFFSET_SHIFT`). No exact per-device match exists, so a mapping counts
//!   when its offset and length fit a mappable region of this device and either the
//!   process is the lessee, or it holds no descriptor of any VFIO device (a process
//!   with descriptors of other devices, a VM's QEMU, is taken to map those). False
//!   positives: a mapping-only process of another device whose BAR is as large, found
//!   at this device's lease end too (both are named; the device stays out of use
//!   until it exits); the lessee mapping another device it leases with a BAR as large.
//!   Missed: a process that maps this device and keeps a descriptor of another one.
//!
//! In sysfs mode the device's `resourceN` files are found by path, descriptors and
//! mappings alike. A tree under a `proc_root` without `self` (tests' fake trees) is
//! read the same way, but no syscall is made on its pids: a VFIO descriptor there
//! is matched by its fdinfo line alone, or counted.
//!
//! Not here: what a holder stops (`take::lease`, `take::recover`), the waiting (`rig`).

use std::{
    fmt, fs, io,
    os::fd::{AsFd, AsRawFd},
    path::{Path, PathBuf},
};

use crate::vfio::RegionInfo;

/// A process that holds a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: i32,
    /// `/proc/PID/status`'s `Name:` (the kernel cuts it at 15 bytes).
    pub comm: String,
    /// The real uid.
    pub uid: u32,
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {} ({}, uid {})", self.pid, self.comm, self.uid)
    }
}

/// "pid 412 (rig-lease-client, uid 1001)", joined by ", ".
pub fn list(holders: &[Holder]) -> String {
    holders
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a VFIO scan looks for.
pub(super) struct VfioTarget<'a> {
    /// The device's directory under /sys/devices (fdinfo's `vfio-device-syspath:`).
    pub syspath: PathBuf,
    /// rigd's own device file, while it has one.
    pub ours: Option<&'a fs::File>,
    /// Where the device's regions lie in a device file of it.
    pub layout: &'a [RegionInfo],
    /// What /proc calls a VFIO device file.
    pub link: &'a str,
    /// The device's config header from sysfs, to match a copy of another's file.
    pub config: Option<&'a [u8]>,
    /// The process the device was lent to, when rigd knows it.
    pub lessee: Option<i32>,
    /// Reads the config header through a copied device file.
    pub config_through: &'a dyn Fn(&fs::File) -> io::Result<Vec<u8>>,
}

/// The pids under `proc_root`, but rigd's own; and whether it is a real procfs.
fn processes(proc_root: &Path) -> io::Result<(Vec<(i32, PathBuf)>, bool)> {
    let real = proc_root.join("self").exists();
    let me = std::process::id().cast_signed();
    let mut found = Vec::new();
    let entries = match fs::read_dir(proc_root) {
        Ok(e) => e,
        // A fake tree with no processes at all (tests): nothing holds anything.
        Err(e) if e.kind() == io::ErrorKind::NotFound && !real => return Ok((found, real)),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if real && pid == me {
            continue;
        }
        found.push((pid, entry.path()));
    }
    found.sort_unstable_by_key(|(p, _)| *p);
    Ok((found, real))
}

/// The name and real uid in `dir/status`; `None` once the process is gone.
fn identity(pid: i32, dir: &Path) -> Option<Holder> {
    let status = fs::read_to_string(dir.join("status")).ok()?;
    let mut comm = String::new();
    let mut uid = None;
    for line in status.lines() {
        if let Some(n) = line.strip_prefix("Name:") {
            n.trim().clone_into(&mut comm);
        } else if let Some(u) = line.strip_prefix("Uid:") {
            uid = u.split_whitespace().next().and_then(|u| u.parse().ok());
        }
    }
    Some(Holder {
        pid,
        comm,
        uid: uid?,
    })
}

/// A maps line's offset, length and path (which may hold spaces).
fn mapping(line: &str) -> Option<(u64, u64, &str)> {
    let mut f = line.splitn(6, ' ');
    let (start, end) = f.next()?.split_once('-')?;
    let len = u64::from_str_radix(end, 16)
        .ok()?
        .checked_sub(u64::from_str_radix(start, 16).ok()?)?;
    let offset = u64::from_str_radix(f.nth(1)?, 16).ok()?;
    let path = f.nth(2)?.trim_start();
    Some((offset, len, path))
}

/// Whether `offset..offset+len` of a device file lies inside a mappable region.
fn fits(layout: &[RegionInfo], offset: u64, len: u64) -> bool {
    layout.iter().any(|r| {
        r.mappable()
            && r.size > 0
            && offset >= r.offset
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= r.offset + r.size)
    })
}

/// The `vfio-device-syspath:` of an fdinfo (Linux 6.18 on), when it has one.
fn fdinfo_syspath(fdinfo: &str) -> Option<PathBuf> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix("vfio-device-syspath:"))
        .map(|p| PathBuf::from(p.trim()))
}

/// The config header fields that tell two functions apart: vendor and device,
/// revision and class, the BAR addresses (their flag bits masked: vfio-pci rewrites
/// those), subsystem.
fn same_function(a: &[u8], b: &[u8]) -> bool {
    if a.len() < 0x30 || b.len() < 0x30 {
        return false;
    }
    let dword = |c: &[u8], at: usize| u32::from_le_bytes([c[at], c[at + 1], c[at + 2], c[at + 3]]);
    [0x00, 0x08, 0x2c]
        .iter()
        .all(|&at| dword(a, at) == dword(b, at))
        && (0x10..0x28)
            .step_by(4)
            .all(|at| dword(a, at) & !0xf == dword(b, at) & !0xf)
}

/// Whether descriptor `fd` of `pid` (linking to a VFIO device file) is the target's.
fn descriptor_is(
    t: &VfioTarget<'_>,
    pid: i32,
    dir: &Path,
    fd: i32,
    real: bool,
) -> io::Result<bool> {
    if let Some(path) = fs::read_to_string(dir.join(format!("fdinfo/{fd}")))
        .ok()
        .as_deref()
        .and_then(fdinfo_syspath)
    {
        return Ok(path == t.syspath);
    }
    if !real {
        // A fake tree: no syscall on its pids; unidentified counts.
        return Ok(true);
    }
    if let Some(ours) = t.ours {
        return match crate::sys::kcmp::same_file(ours.as_fd(), pid, fd) {
            Ok(same) => Ok(same),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::EBADF)) => Ok(false),
            Err(e) => Err(e),
        };
    }
    let Some(config) = t.config else {
        return Ok(true);
    };
    let copy = crate::sys::pidfd::open(pid)
        .and_then(|p| crate::sys::pidfd::get_fd(p.as_fd(), fd))
        .map(fs::File::from);
    match copy {
        // A copy whose config cannot be read is not known to be this device's.
        Ok(f) => Ok((t.config_through)(&f).is_ok_and(|c| same_function(&c, config))),
        // Gone in between.
        Err(e) if matches!(e.raw_os_error(), Some(libc::ESRCH | libc::EBADF)) => Ok(false),
        // Cannot look: the safe side.
        Err(_) => Ok(true),
    }
}

/// Processes other than rigd that hold the VFIO device `t`: a descriptor of it, or a
/// mapping as the module head says.
///
/// # Errors
/// `proc_root` unreadable; kcmp(2) unavailable (`ENOSYS`: a kernel without
/// CONFIG_KCMP) or refused.
pub(super) fn vfio_holders(proc_root: &Path, t: &VfioTarget<'_>) -> io::Result<Vec<Holder>> {
    let (procs, real) = processes(proc_root)?;
    let mut found = Vec::new();
    for (pid, dir) in procs {
        // A process may exit or close descriptors while it is read: skip what went.
        let Ok(fds) = fs::read_dir(dir.join("fd")) else {
            continue;
        };
        let mut holds = false;
        let mut any_vfio = false;
        for fd in fds.flatten() {
            let Some(n) = fd.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            if fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == t.link) {
                any_vfio = true;
                if descriptor_is(t, pid, &dir, n, real)? {
                    holds = true;
                    break;
                }
            }
        }
        if !holds && (t.lessee == Some(pid) || !any_vfio) {
            holds = fs::read_to_string(dir.join("maps")).is_ok_and(|m| {
                m.lines()
                    .filter_map(mapping)
                    .any(|(off, len, path)| path == t.link && fits(t.layout, off, len))
            });
        }
        if holds && let Some(h) = identity(pid, &dir) {
            found.push(h);
        }
    }
    Ok(found)
}

/// Processes other than rigd with a descriptor or a mapping of one of the device's
/// `resourceN` files (sysfs mode: rigd opened them for the holder and kept none).
///
/// # Errors
/// `proc_root` unreadable.
pub(super) fn resource_holders(proc_root: &Path, device_dir: &Path) -> io::Result<Vec<Holder>> {
    // A fake tree (tests) has no processes to look at.
    if !proc_root.join("self").exists() {
        return Ok(Vec::new());
    }
    let Ok(dir) = fs::canonicalize(device_dir) else {
        return Ok(Vec::new());
    };
    let resource = |p: &Path| {
        p.parent() == Some(dir.as_path())
            && p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("resource"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut found = Vec::new();
    for (pid, entry) in processes(proc_root)?.0 {
        let by_fd = fs::read_dir(entry.join("fd")).is_ok_and(|fds| {
            fds.flatten()
                .any(|fd| fs::read_link(fd.path()).is_ok_and(|l| resource(&l)))
        });
        let by_map = || {
            fs::read_to_string(entry.join("maps")).is_ok_and(|m| {
                m.lines()
                    .filter_map(mapping)
                    .any(|(_, _, p)| resource(Path::new(p)))
            })
        };
        if (by_fd || by_map())
            && let Some(h) = identity(pid, &entry)
        {
            found.push(h);
        }
    }
    Ok(found)
}

/// rigd's own descriptor `file`, as /proc links it (`None` on a fake tree).
pub(super) fn own_link(proc_root: &Path, file: &fs::File) -> Option<PathBuf> {
    fs::read_link(proc_root.join(format!("self/fd/{}", file.as_raw_fd()))).ok()
}

#[cfg(test)]
mod tests {
    use std::process::{Child, Command, Stdio};

    use super::*;

    const LINK: &str = "anon_inode:[vfio-device]";

    fn bar0() -> Vec<RegionInfo> {
        vec![RegionInfo {
            index: 0,
            flags: vfio_bindings::bindings::vfio::VFIO_REGION_INFO_FLAG_MMAP,
            size: 1 << 20,
            offset: 0,
        }]
    }

    fn target<'a>(
        layout: &'a [RegionInfo],
        link: &'a str,
        ours: Option<&'a fs::File>,
        lessee: Option<i32>,
    ) -> VfioTarget<'a> {
        VfioTarget {
            syspath: "/sys/devices/pci0000:00/0000:00:04.0/0000:01:00.0".into(),
            ours,
            layout,
            link,
            config: None,
            lessee,
            config_through: &|_| Err(io::Error::from_raw_os_error(libc::ENOTTY)),
        }
    }

    /// A fake /proc entry: status, fds linking to `links`, fdinfo texts, maps.
    fn fake_proc(root: &Path, pid: i32, uid: u32, links: &[(&str, &str)], maps: &str) {
        let dir = root.join(pid.to_string());
        fs::create_dir_all(dir.join("fd")).expect("fd");
        fs::create_dir_all(dir.join("fdinfo")).expect("fdinfo");
        fs::write(
            dir.join("status"),
            format!("Name:\trig-lease-clien\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n"),
        )
        .expect("status");
        for (n, (link, info)) in links.iter().enumerate() {
            std::os::unix::fs::symlink(link, dir.join(format!("fd/{}", n + 3))).expect("link");
            fs::write(dir.join(format!("fdinfo/{}", n + 3)), info).expect("fdinfo");
        }
        fs::write(dir.join("maps"), maps).expect("maps");
    }

    #[test]
    fn a_mapping_with_no_descriptor_counts_when_it_fits_the_device_and_the_process_has_no_other() {
        let dir = tempfile::tempdir().expect("dir");
        let line = |off: u64, len: u64| {
            format!(
                "7f0000000000-{:x} rw-s {off:08x} 00:0e 1045   {LINK}\n",
                0x7f00_0000_0000u64 + len
            )
        };
        // The keep-map child: BAR0 mapped, no descriptor.
        fake_proc(dir.path(), 412, 1001, &[], &line(0, 1 << 20));
        // A VM: maps a BAR of its own device and keeps that device's descriptor.
        fake_proc(
            dir.path(),
            500,
            0,
            &[(
                LINK,
                "pos:\t0\nvfio-device-syspath: /sys/devices/pci0000:00/0000:00:06.0\n",
            )],
            &line(0, 1 << 20),
        );
        // A mapping of region 2, which this device does not have mappable.
        fake_proc(dir.path(), 600, 1001, &[], &line(2 << 40, 4096));
        // A mapping larger than this device's BAR0.
        fake_proc(dir.path(), 700, 1001, &[], &line(0, 2 << 20));
        let layout = bar0();

        let found = vfio_holders(dir.path(), &target(&layout, LINK, None, None)).expect("scan");

        assert_eq!(
            found,
            [Holder {
                pid: 412,
                comm: "rig-lease-clien".into(),
                uid: 1001
            }]
        );
        assert_eq!(list(&found), "pid 412 (rig-lease-clien, uid 1001)");
    }

    #[test]
    fn the_lessee_counts_by_its_mapping_even_with_descriptors_of_other_devices() {
        let dir = tempfile::tempdir().expect("dir");
        let other = "vfio-device-syspath: /sys/devices/pci0000:00/0000:00:06.0\n";
        let map = format!("7f0000000000-7f0000001000 rw-s 00000000 00:0e 1045 {LINK}\n");
        fake_proc(dir.path(), 412, 1001, &[(LINK, other)], &map);
        let layout = bar0();

        let as_lessee = vfio_holders(dir.path(), &target(&layout, LINK, None, Some(412)));
        let as_other = vfio_holders(dir.path(), &target(&layout, LINK, None, None));

        assert_eq!(as_lessee.expect("scan").len(), 1);
        assert!(
            as_other.expect("scan").is_empty(),
            "taken to map its own device"
        );
    }

    #[test]
    fn fdinfo_names_the_device_exactly_where_the_kernel_has_the_line() {
        let dir = tempfile::tempdir().expect("dir");
        let t = target(&[], LINK, None, None);
        let ours = format!("pos:\t0\nvfio-device-syspath: {}\n", t.syspath.display());
        fake_proc(dir.path(), 412, 1001, &[(LINK, ours.as_str())], "");
        fake_proc(
            dir.path(),
            413,
            1001,
            &[(
                LINK,
                "vfio-device-syspath: /sys/devices/pci0000:00/0000:00:06.0\n",
            )],
            "",
        );

        let found = vfio_holders(dir.path(), &t).expect("scan");

        assert_eq!(found.iter().map(|h| h.pid).collect::<Vec<_>>(), [412]);
    }

    /// The pids among `found` that a test started itself. Tests run on threads of one
    /// process: a child another test forks while this test's file is open holds a copy
    /// of it until its exec (CI once found one), so only a test's own children are judged.
    fn judged(found: &[Holder], ours: &[i32]) -> Vec<i32> {
        found
            .iter()
            .map(|h| h.pid)
            .filter(|p| ours.contains(p))
            .collect()
    }

    fn python_mapper(file: &fs::File, len: usize) -> Option<Child> {
        // Maps `len` bytes of its stdin, closes every descriptor, waits.
        let code = format!(
            "import mmap,os,sys,time\nm=mmap.mmap(0,{len})\nos.closerange(0,1024)\nwhile True: time.sleep(60)\n"
        );
        Command::new("python3")
            .args(["-c", &code])
            .stdin(file.try_clone().expect("dup"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()
    }

    #[test]
    fn a_real_child_that_mapped_the_file_and_closed_it_is_found_by_its_mapping() {
        let f = tempfile::tempfile().expect("file");
        f.set_len(1 << 20).expect("len");
        let link = own_link(Path::new("/proc"), &f).expect("own link");
        let link = link.to_str().expect("utf-8").to_owned();
        let Some(mut child) = python_mapper(&f, 1 << 20) else {
            eprintln!("no python3: skipped");
            return;
        };
        let pid = i32::try_from(child.id()).expect("pid");
        let layout = bar0();
        let t = target(&layout, &link, Some(&f), Some(pid));
        // Wait for the child to map and close.
        let mut found = Vec::new();
        for _ in 0..100 {
            found = vfio_holders(Path::new("/proc"), &t).expect("scan");
            let no_fd = fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| d.count() == 0);
            if !found.is_empty() && no_fd {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let fds = fs::read_dir(format!("/proc/{pid}/fd")).map(Iterator::count);
        child.kill().expect("kill");
        child.wait().expect("wait");

        assert_eq!(fds.expect("fds"), 0, "the child closed its descriptors");
        assert_eq!(judged(&found, &[pid]), [pid]);
        let after = vfio_holders(Path::new("/proc"), &t).expect("scan");
        assert!(judged(&after, &[pid]).is_empty(), "{after:?}");
    }

    #[test]
    fn a_process_holding_a_copy_of_the_file_is_found_and_one_without_it_is_not() {
        let f = tempfile::tempfile().expect("file");
        let link = own_link(Path::new("/proc"), &f).expect("own link");
        let link = link.to_str().expect("utf-8").to_owned();
        // rigd itself is left out: here the test process plays rigd, so a child that
        // inherits a copy plays the holder.
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(f.try_clone().expect("dup"))
            .spawn()
            .expect("sleep");
        let pid = i32::try_from(child.id()).expect("pid");
        let t = target(&[], &link, Some(&f), None);

        let found = vfio_holders(Path::new("/proc"), &t);
        child.kill().expect("kill");
        child.wait().expect("wait");
        let after = vfio_holders(Path::new("/proc"), &t).expect("scan");

        let found = found.expect("scan");
        assert_eq!(judged(&found, &[pid]), [pid]);
        assert!(found.iter().any(|h| h.pid == pid && h.comm == "sleep"));
        assert!(judged(&after, &[pid]).is_empty(), "{after:?}");
    }

    #[test]
    fn a_process_holding_a_resource_file_of_the_device_is_found() {
        let dir = tempfile::tempdir().expect("dir");
        let dev = dir.path().join("0000:00:06.0");
        fs::create_dir(&dev).expect("device dir");
        fs::write(dev.join("resource0"), b"").expect("resource0");
        fs::write(dev.join("config"), b"").expect("config");
        let bar = fs::File::open(dev.join("resource0")).expect("open");
        let config = fs::File::open(dev.join("config")).expect("open");
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(bar)
            .spawn()
            .expect("sleep");
        let mut other = Command::new("sleep")
            .arg("30")
            .stdin(config)
            .spawn()
            .expect("sleep");
        let pid = i32::try_from(child.id()).expect("pid");
        let other_pid = i32::try_from(other.id()).expect("pid");

        let found = resource_holders(Path::new("/proc"), &dev);
        for c in [&mut child, &mut other] {
            c.kill().expect("kill");
            c.wait().expect("wait");
        }

        let found = found.expect("scan");
        assert_eq!(
            judged(&found, &[pid, other_pid]),
            [pid],
            "config is not a BAR"
        );
    }

    #[test]
    fn a_fake_tree_with_no_proc_directory_has_no_holders() {
        let dir = tempfile::tempdir().expect("dir");
        let missing = dir.path().join("proc");
        let layout = bar0();
        assert!(
            vfio_holders(&missing, &target(&layout, LINK, None, None))
                .expect("scan")
                .is_empty()
        );
    }

    #[test]
    fn config_headers_match_on_ids_and_bar_addresses_not_on_flag_bits() {
        let mut a = vec![0u8; 64];
        a[0..4].copy_from_slice(&0x11e8_1234u32.to_le_bytes());
        a[0x10..0x14].copy_from_slice(&0xfe80_0000u32.to_le_bytes());
        let mut b = a.clone();
        b[0x10] |= 0x8; // prefetchable, as vfio-pci regenerates the flags
        let mut c = a.clone();
        c[0x10..0x14].copy_from_slice(&0xfe60_0000u32.to_le_bytes());
        assert!(same_function(&a, &b));
        assert!(
            !same_function(&a, &c),
            "the other edu: another BAR0 address"
        );
        assert!(!same_function(&a, &a[..16]));
    }
}
