//! Unbinds on worker threads, so that a driver whose unbind never returns (a process
//! keeps the GPU) cannot wedge rigd: the caller stops waiting after its timeout, and
//! the thread stays behind in the kernel.
//!
//! Workers are kept between unbinds: spawning one per unbind cost ~1 ms in the
//! disposable machine's TCG guest, twice per detach+attach. A worker is idle once its
//! unbind returned; one stuck in the kernel is never idle again, so the next unbind
//! finds no idle worker and starts another.

use std::{
    io,
    sync::{Arc, Mutex, PoisonError, mpsc},
    time::Duration,
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

/// Why an unbind gave no result.
#[derive(Debug)]
pub(super) enum Unbind {
    /// No worker could be started.
    Spawn(io::Error),
    /// It did not return within the timeout; its worker stays behind.
    TimedOut,
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
    result.recv_timeout(timeout).map_err(|_| Unbind::TimedOut)
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
                let _ = job.done.send(r);
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
}
