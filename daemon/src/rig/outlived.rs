//! Devices whose holders outlived an earlier rigd (`take::Recovered::Waiting`): a
//! process with a lent VFIO device fd, or a mapping of it, from a lease that ended
//! with that rigd, keeps the device's group busy. `Rig` keeps them out of every
//! request (a detach or give-back fails with `HeldAcrossRestart`, naming the
//! holders, rather than calling the device another's or stranding an unbind in
//! vfio-pci's remove), and one thread a device watches the holders' pidfds: every
//! second it clears bus mastering again if the holder set it (rigd cannot revoke a
//! VFIO fd; it can only undo what the fd did to the command register), and when a
//! holder exits, every 30 s for a fork that inherited the fd, or every 5 s while it
//! knows no holder by name, it asks `take` to settle the device again from its
//! record. When that succeeds the device is held (or given back) as a start would
//! have done; `rigctl status` says so.
//!
//! Not killed: rigd does not signal a holder. Its unit has no CAP_KILL (another
//! user's process cannot be signalled without it), a holder is named by heuristics on
//! Linux 6.12 (`take::holders`: a wrong pid is possible), and what the holder can
//! still do is bounded: in vfio mode the IOMMU confines its DMA to the old container's
//! mappings, whose pages stay pinned while the container lives, and rigd turns bus
//! mastering off again each second; in sysfs mode it cannot set bus mastering at all.
//! The operator, whom the status line names the process to, decides.
//!
//! Not here: the scan (`take::holders`), what a settle does (`take::recover`).

use std::{
    collections::BTreeMap,
    os::fd::{AsFd, OwnedFd},
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::{Rig, RigError, lock};
use crate::{
    pci::Bdf,
    take::{self, Holder, Phase, TakeError},
};

/// How often the watch clears bus mastering again and polls.
const TICK: Duration = Duration::from_secs(1);
/// How often it settles again without a holder having exited: a fork that inherited
/// the fd; and, while it knows no holder by name, sooner.
const RETRY: Duration = Duration::from_secs(30);
const RETRY_UNNAMED: Duration = Duration::from_secs(5);

/// A device that outlived rigd's restart in another process's hands.
#[derive(Debug, Clone)]
pub enum Outlived {
    /// Still held; nothing is done to it but keeping bus mastering off.
    Waiting {
        holders: Vec<Holder>,
        /// The phase its record is in.
        from: Phase,
    },
    /// Its holders exited and the device was settled from its record.
    Settled {
        /// Who held it last.
        holders: Vec<Holder>,
        /// From rigd's start.
        after: Duration,
        outcome: Arc<take::Recovered>,
    },
}

impl Rig {
    /// Devices that outlived the restart in other processes' hands, waiting or settled.
    pub fn outlived(&self) -> BTreeMap<Bdf, Outlived> {
        lock(&self.outlived).clone()
    }

    /// Refuses a request on a device an earlier rigd's holder still has.
    pub(super) fn refuse_outlived(&self, bdf: Bdf) -> Result<(), RigError> {
        match lock(&self.outlived).get(&bdf) {
            Some(Outlived::Waiting { holders, .. }) => Err(TakeError::HeldAcrossRestart {
                bdf,
                holders: holders.clone(),
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// Records what recovery left waiting (called by `recover`).
    pub(super) fn note_outlived(&self, outcomes: &[take::Recovered]) {
        let mut table = lock(&self.outlived);
        for o in outcomes {
            if let take::Recovered::Waiting {
                bdf, from, holders, ..
            } = o
            {
                tracing::warn!(%bdf, holders = %take::holders::list(holders), "still held from a lease before rigd restarted; bus mastering off; waiting for the holders to exit");
                table.insert(
                    *bdf,
                    Outlived::Waiting {
                        holders: holders.clone(),
                        from: *from,
                    },
                );
            }
        }
    }

    /// Starts one watch a device that recovery left waiting; each ends when its device
    /// is settled or `Rig` is dropped.
    pub fn watch_outlived(self: &Arc<Self>) {
        let started = Instant::now();
        let waiting: Vec<Bdf> = lock(&self.outlived)
            .iter()
            .filter(|(_, o)| matches!(o, Outlived::Waiting { .. }))
            .map(|(b, _)| *b)
            .collect();
        for bdf in waiting {
            let rig = Arc::downgrade(self);
            let spawned = std::thread::Builder::new()
                .name("rig-outlived".into())
                .spawn(move || watch(&rig, bdf, started));
            if let Err(e) = spawned {
                tracing::error!(%bdf, error = &e as &dyn std::error::Error, "no watch for the holders of a device from before the restart; the next start settles it");
            }
        }
    }

    /// Settles `bdf` again; whether its watch is done.
    fn settle_outlived(&self, bdf: Bdf, started: Instant) -> bool {
        let done = self.with_slot(bdf, |slot| {
            let (t, outcome) = self.taker.recover_again(bdf);
            let mut table = lock(&self.outlived);
            let last = match table.get(&bdf) {
                Some(Outlived::Waiting { holders, .. }) => holders.clone(),
                _ => Vec::new(),
            };
            if let take::Recovered::Waiting { holders, from, .. } = outcome {
                table.insert(bdf, Outlived::Waiting { holders, from });
                return Ok(false);
            }
            let held = t.is_some();
            tracing::info!(%bdf, held, "settled from its record once the holders from before the restart exited");
            table.insert(
                bdf,
                Outlived::Settled {
                    holders: last,
                    after: started.elapsed(),
                    outcome: Arc::new(outcome),
                },
            );
            drop(table);
            if let Some(t) = t {
                if let Err(e) = self.create_pool(&t) {
                    tracing::warn!(%bdf, error = &e as &dyn std::error::Error, "no DMA pool for a device settled after its holders exited");
                }
                *slot = Some(t);
            }
            Ok(true)
        });
        // Busy: another request holds the slot (one that was refused); next tick.
        done.unwrap_or(false)
    }
}

/// Waits up to `timeout` for one of `pidfds` to become readable (its process exited).
fn any_exited(pidfds: &[OwnedFd], timeout: Duration) -> bool {
    if pidfds.is_empty() {
        std::thread::sleep(timeout);
        return false;
    }
    let mut fds: Vec<PollFd<'_>> = pidfds
        .iter()
        .map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN))
        .collect();
    let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
    poll(&mut fds, PollTimeout::from(ms)).is_ok_and(|n| n > 0)
}

fn watch(rig: &Weak<Rig>, bdf: Bdf, started: Instant) {
    let mut since_retry = Instant::now();
    let mut relit = 0u64;
    loop {
        let (pidfds, named) = {
            let Some(r) = rig.upgrade() else { return };
            let Some(Outlived::Waiting { holders, .. }) = lock(&r.outlived).get(&bdf).cloned()
            else {
                return;
            };
            let pidfds: Vec<OwnedFd> = holders
                .iter()
                .filter_map(|h| crate::sys::pidfd::open(h.pid).ok())
                .collect();
            (pidfds, holders.len())
        };
        // A holder already gone (no pidfd for it) counts as exited.
        let exited = pidfds.len() < named || any_exited(&pidfds, TICK);
        let Some(r) = rig.upgrade() else { return };
        match r.taker.set_bus_master(bdf, false) {
            Ok(true) => {
                relit += 1;
                if relit == 1 || relit.is_multiple_of(60) {
                    tracing::warn!(%bdf, times = relit, "bus mastering was on again (the holder from before the restart set it through its fd); cleared");
                }
            }
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(%bdf, error = &e as &dyn std::error::Error, "could not keep bus mastering off while waiting for the holders");
            }
        }
        let every = if named == 0 { RETRY_UNNAMED } else { RETRY };
        if (exited || since_retry.elapsed() >= every) && {
            since_retry = Instant::now();
            r.settle_outlived(bdf, started)
        } {
            return;
        }
    }
}
