//! Unbinds on worker threads, so that a driver whose unbind never returns (a process
//! keeps the GPU) cannot wedge rigd: the caller stops waiting after its timeout, and
//! the thread stays behind in the kernel.
//!
//! Workers are kept between unbinds: spawning one per unbind cost ~1 ms in the
//! disposable machine's TCG guest, twice per detach+attach. A worker is idle once its
//! unbind returned; one stuck in the kernel is never idle again, so the next unbind
//! finds no idle worker and starts another.
//!
//! A stuck worker is accounted for: until its unbind returns, its device is in
//! [`stuck`] (what `Status` shows), and another unbind of that device is refused at
//! once ([`Unbind::Stuck`]) rather than given a second worker to strand beside the
//! first (the kernel would block it on the same device lock). `take` refuses a reset,
//! a resize or a give-back of that device the same way before its first step: the
//! worker holds the device's lock in the kernel (`device_release_driver`), and a sysfs
//! reset (`pci_reset_function`) would wait on it for as long as the holder lives (seen
//! in the disposable machine: tests/vm/guest/scenarios/unbind-stuck.sh). Entries are
//! kept per sysfs root, so tests on trees of their own do not see each other's.

use std::{
    io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError, mpsc},
    time::{Duration, Instant},
};

use crate::{pci::Bdf, sys::sysfs::PciSysfs};

/// One unbind, and where its result goes.
struct Job {
    sysfs: Arc<dyn PciSysfs>,
    bdf: Bdf,
    driver: String,
    done: mpsc::Sender<io::Result<()>>,
}

/// Idle workers, each by the sender of its queue.
static IDLE: Mutex<Vec<mpsc::Sender<Job>>> = Mutex::new(Vec::new());

fn idle() -> std::sync::MutexGuard<'static, Vec<mpsc::Sender<Job>>> {
    // The list stays valid whatever a holder did: it only pushes and pops.
    IDLE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An unbind that timed out and has not returned since: its worker is in the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub bdf: Bdf,
    pub driver: String,
    /// When its caller stopped waiting.
    pub since: Instant,
}

/// Stuck unbinds by (sysfs root, device). A worker removes its entry when its unbind
/// returns, under this lock, before it sends the result: a caller that times out
/// inserts under the same lock only if no result has arrived, so no entry outlives
/// its unbind.
static STUCK: Mutex<Vec<(PathBuf, Stuck)>> = Mutex::new(Vec::new());

fn stuck_list() -> std::sync::MutexGuard<'static, Vec<(PathBuf, Stuck)>> {
    STUCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The unbinds under the sysfs tree at `root` that timed out and are still in the
/// kernel, oldest first.
pub fn stuck(root: &Path) -> Vec<Stuck> {
    stuck_list()
        .iter()
        .filter(|(r, _)| r == root)
        .map(|(_, s)| s.clone())
        .collect()
}

/// Why an unbind gave no result.
#[derive(Debug)]
pub(super) enum Unbind {
    /// No worker could be started.
    Spawn(io::Error),
    /// It did not return within the timeout; its worker stays behind.
    TimedOut,
    /// An earlier unbind of this device is still in the kernel; none was started.
    Stuck(Stuck),
}

/// Unbinds `bdf` from `driver` on a worker, waiting at most `timeout` for it.
///
/// # Errors
/// [`Unbind`]; the unbind's own error is the inner `Result`.
pub(super) fn run(
    sysfs: &Arc<dyn PciSysfs>,
    bdf: Bdf,
    driver: &str,
    timeout: Duration,
) -> Result<io::Result<()>, Unbind> {
    let root = sysfs.root().path().to_owned();
    if let Some((_, s)) = stuck_list()
        .iter()
        .find(|(r, s)| *r == root && s.bdf == bdf)
    {
        return Err(Unbind::Stuck(s.clone()));
    }
    let (done, result) = mpsc::channel();
    let mut job = Job {
        sysfs: Arc::clone(sysfs),
        bdf,
        driver: driver.to_owned(),
        done,
    };
    loop {
        let Some(worker) = idle().pop() else {
            spawn(job).map_err(Unbind::Spawn)?;
            break;
        };
        // A worker whose thread is gone hands the job back; try the next one.
        match worker.send(job) {
            Ok(()) => break,
            Err(mpsc::SendError(j)) => job = j,
        }
    }
    if let Ok(r) = result.recv_timeout(timeout) {
        return Ok(r);
    }
    let mut list = stuck_list();
    // The worker sends under this lock: a result not here now comes after the entry.
    if let Ok(r) = result.try_recv() {
        return Ok(r);
    }
    list.push((
        root,
        Stuck {
            bdf,
            driver: driver.to_owned(),
            since: Instant::now(),
        },
    ));
    Err(Unbind::TimedOut)
}

fn spawn(first: Job) -> io::Result<()> {
    let (queue, jobs) = mpsc::channel::<Job>();
    let me = queue.clone();
    std::thread::Builder::new()
        .name("rig-unbind".into())
        .spawn(move || {
            for job in std::iter::once(first).chain(jobs) {
                let r = job.sysfs.unbind(job.bdf, &job.driver);
                // Idle again before the caller hears back, so that its next unbind
                // finds this worker.
                idle().push(me.clone());
                let root = job.sysfs.root().path();
                let mut list = stuck_list();
                list.retain(|(r, s)| !(r == root && s.bdf == job.bdf));
                let _ = job.done.send(r);
                drop(list);
            }
        })?;
    drop(queue);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        sys::sysfs::{FakeKernel, SysfsCall},
        testing::{FakeDevice, FakeSysfs},
    };

    #[test]
    fn a_stuck_unbind_times_out_and_the_next_one_still_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeSysfs::new(dir.path()).expect("fake sysfs");
        let a = FakeDevice::new("0000:03:00.0", 0x10de, 0x2335, 0x030200).with_driver("hangs");
        let b = FakeDevice::new("0000:04:00.0", 0x10de, 0x2335, 0x030200).with_driver("nvidia");
        fake.add(&a).expect("add");
        fake.add(&b).expect("add");
        let kernel = FakeKernel::new(fake.root(), &["nvidia", "hangs"]);
        kernel.script.lock().expect("script").unbind_hangs =
            Some(("hangs".into(), Duration::from_millis(500)));
        let calls = Arc::clone(&kernel.calls);
        let sysfs: Arc<dyn PciSysfs> = Arc::new(kernel);

        let stuck = run(&sysfs, a.bdf, "hangs", Duration::from_millis(20));
        let next = run(&sysfs, b.bdf, "nvidia", Duration::from_secs(5));
        let again = run(&sysfs, b.bdf, "nvidia", Duration::from_secs(5));

        assert!(matches!(stuck, Err(Unbind::TimedOut)), "{stuck:?}");
        assert!(matches!(next, Ok(Ok(()))), "{next:?}");
        assert_eq!(
            again.expect("a result").map_err(|e| e.raw_os_error()),
            Err(Some(libc::ENODEV)),
            "unbound already"
        );
        let calls = calls.lock().expect("calls");
        assert!(
            calls.contains(&SysfsCall::Unbind {
                bdf: b.bdf,
                driver: "nvidia".into()
            }),
            "{calls:?}"
        );
    }

    #[test]
    fn a_stuck_unbind_is_listed_and_refuses_a_second_worker_until_it_returns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = FakeSysfs::new(dir.path()).expect("fake sysfs");
        let a = FakeDevice::new("0000:03:00.0", 0x10de, 0x2335, 0x030200).with_driver("hangs");
        fake.add(&a).expect("add");
        let kernel = FakeKernel::new(fake.root(), &["hangs"]);
        kernel.script.lock().expect("script").unbind_hangs =
            Some(("hangs".into(), Duration::from_millis(400)));
        let calls = Arc::clone(&kernel.calls);
        let sysfs: Arc<dyn PciSysfs> = Arc::new(kernel);

        let first = run(&sysfs, a.bdf, "hangs", Duration::from_millis(20));
        let listed = stuck(fake.root());
        let second = run(&sysfs, a.bdf, "hangs", Duration::from_secs(5));
        let unbinds = |c: &[SysfsCall]| {
            c.iter()
                .filter(|c| matches!(c, SysfsCall::Unbind { .. }))
                .count()
        };
        let while_stuck = unbinds(&calls.lock().expect("calls"));
        std::thread::sleep(Duration::from_millis(600));
        let after = stuck(fake.root());

        assert!(matches!(first, Err(Unbind::TimedOut)), "{first:?}");
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!((listed[0].bdf, listed[0].driver.as_str()), (a.bdf, "hangs"));
        assert!(
            matches!(&second, Err(Unbind::Stuck(s)) if s.bdf == a.bdf),
            "{second:?}"
        );
        assert_eq!(while_stuck, 1, "no second unbind reached the kernel");
        assert!(after.is_empty(), "gone once the unbind returned: {after:?}");
        assert!(stuck(Path::new("/elsewhere")).is_empty());
    }
}
