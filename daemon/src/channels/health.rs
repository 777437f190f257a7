//! Whether a served GPU can still lend, and how long rigd's own reclaims take on it.
//!
//! Flow: the service's health task calls `ChannelHost::check_health` about once a
//! second on a blocking thread; that reads the RM's recovery action
//! (`Gpu::recovery_action`, a kernel-side read with no GSP RPC) and looks at the
//! reclaims in flight here. Every RM error `Served` sees passes through
//! [`GpuHealth::saw`], so a NV_ERR_RESET_REQUIRED on any of rigd's own calls marks the
//! GPU lost at once. Opens and attaches read [`GpuHealth::now`] (no RM call) and are
//! refused while the GPU is not [`Health::Serving`].
//!
//! State: the reason the GPU is lost, if it is, under one mutex; the reclaims in flight
//! (session, step, since when) under another. Neither is held across an RM call.
//!
//! Recovery: a lost GPU comes back by itself when the recovery action reads NONE again
//! (someone allowed to reset it did); a stalled one when its reclaim returns. The RM's
//! recovery action, Xid 154, and what the H100 did after a copy-engine fault are in
//! docs/hardware/nvidia-rm.md, "When the GPU needs a reset".
//!
//! Not here: containing one session's fault (`channels`), the watchdog and `STATUS=`
//! (`service::watchdog`), the metrics (`service::metrics`).

use std::{
    collections::BTreeMap,
    fmt,
    sync::{
        Mutex, MutexGuard, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant, SystemTime},
};

use crate::{
    dma::SessionId,
    nvrm::{NvrmError, layout::r580},
};

// TIMEOUT: a reclaim that had to preempt a kernel still running took 4 s on the H200
// (docs/BENCHMARKS.md, kill reclaim); the GSP gives up on an RPC after 45 s and then
// asks for a reset (Xid 119, Xid 154). 10 s says a reclaim's RM call is stuck well
// before that, so no new session is lent into a GPU that may be going.
pub const RECLAIM_BOUND: Duration = Duration::from_secs(10);

/// What a served GPU can do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// It lends.
    Serving,
    /// One of rigd's reclaims has waited on an RM call longer than [`RECLAIM_BOUND`]:
    /// nothing new is lent on the GPU until the call returns.
    Stalled {
        session: SessionId,
        step: &'static str,
        waited: Duration,
    },
    /// The GPU needs a reset, or is gone: nothing is lent until the RM says it works.
    Lost { why: String, since: SystemTime },
}

impl Health {
    /// One word for tables and metrics: `serving`, `stalled`, `lost`.
    pub fn word(&self) -> &'static str {
        match self {
            Self::Serving => "serving",
            Self::Stalled { .. } => "stalled",
            Self::Lost { .. } => "lost",
        }
    }
}

impl fmt::Display for Health {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Serving => f.write_str("serving"),
            Self::Stalled {
                session,
                step,
                waited,
            } => write!(
                f,
                "stalled: reclaiming session {session} has waited {} s on the RM to {step}",
                waited.as_secs()
            ),
            Self::Lost { why, .. } => write!(f, "lost: {why}"),
        }
    }
}

/// The name of a `NV2080_CTRL_GPU_RECOVERY_ACTION_*` value, as the RM's log spells it.
pub fn recovery_action_name(action: u32) -> &'static str {
    match action {
        r580::NV2080_CTRL_GPU_RECOVERY_ACTION_NONE => "None",
        r580::NV2080_CTRL_GPU_RECOVERY_ACTION_GPU_RESET => "GPU Reset Required",
        r580::NV2080_CTRL_GPU_RECOVERY_ACTION_NODE_REBOOT => "Node Reboot Required",
        r580::NV2080_CTRL_GPU_RECOVERY_ACTION_DRAIN_P2P => "Drain P2P",
        r580::NV2080_CTRL_GPU_RECOVERY_ACTION_DRAIN_AND_RESET => "Drain and Reset",
        _ => "an action rigd does not know",
    }
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    session: SessionId,
    step: &'static str,
    since: Instant,
}

/// One GPU's health and the reclaims in flight on it.
#[derive(Debug, Default)]
pub(super) struct GpuHealth {
    lost: Mutex<Option<(String, SystemTime)>>,
    next: AtomicU64,
    reclaims: Mutex<BTreeMap<u64, InFlight>>,
}

impl GpuHealth {
    fn lost_lock(&self) -> MutexGuard<'_, Option<(String, SystemTime)>> {
        self.lost.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reclaims_lock(&self) -> MutexGuard<'_, BTreeMap<u64, InFlight>> {
        self.reclaims.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Health now, from what was seen: no RM call.
    pub(super) fn now(&self) -> Health {
        if let Some((why, since)) = self.lost_lock().clone() {
            return Health::Lost { why, since };
        }
        let oldest = self
            .reclaims_lock()
            .values()
            .min_by_key(|r| r.since)
            .copied();
        match oldest {
            Some(r) if r.since.elapsed() >= RECLAIM_BOUND => Health::Stalled {
                session: r.session,
                step: r.step,
                waited: r.since.elapsed(),
            },
            _ => Health::Serving,
        }
    }

    /// Marks the GPU lost for `why` (kept: the first reason is the one that counts).
    pub(super) fn lose(&self, gpu: &str, why: String) {
        let mut lost = self.lost_lock();
        if lost.is_none() {
            tracing::error!(gpu, "the GPU is lost, nothing more is lent on it: {why}");
            *lost = Some((why, SystemTime::now()));
        }
    }

    /// Notes an RM error rigd got: one that says the GPU needs a reset marks it lost.
    pub(super) fn saw(&self, gpu: &str, e: &NvrmError) {
        if e.gpu_lost() {
            let status = e.status().map_or_else(String::new, |s| s.to_string());
            self.lose(
                gpu,
                format!("the RM answered {status} to rigd's call to {e}"),
            );
        }
    }

    /// Takes what the RM's recovery action says: NONE clears a loss, anything else is
    /// one. A read that fails with a lost GPU's status is one too; any other failure
    /// (a driver without the control) says nothing.
    pub(super) fn recovery_action(&self, gpu: &str, read: Result<u32, NvrmError>) {
        match read {
            Ok(r580::NV2080_CTRL_GPU_RECOVERY_ACTION_NONE) => {
                if let Some((why, since)) = self.lost_lock().take() {
                    let for_s = since.elapsed().map_or(0, |d| d.as_secs());
                    tracing::info!(
                        gpu,
                        "the GPU works again (recovery action None) after {for_s} s lost ({why}): lending again"
                    );
                }
            }
            Ok(action) => self.lose(
                gpu,
                format!(
                    "the RM's recovery action is {action} ({}): Xid 154",
                    recovery_action_name(action)
                ),
            ),
            Err(e) => {
                self.saw(gpu, &e);
                tracing::debug!(
                    gpu,
                    error = &e as &dyn std::error::Error,
                    "no recovery action"
                );
            }
        }
    }

    /// Starts timing a reclaim of `session`; the guard names its current step and ends
    /// it when dropped.
    pub(super) fn reclaim(&self, session: SessionId) -> Reclaim<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        self.reclaims_lock().insert(
            id,
            InFlight {
                session,
                step: "begin",
                since: now,
            },
        );
        Reclaim {
            health: self,
            id,
            started: now,
            slowest: (Duration::ZERO, "begin"),
        }
    }
}

/// A reclaim in flight: each RM step is named before it runs, so a stuck one shows
/// in [`GpuHealth::now`] and the slowest is logged with the outcome.
#[derive(Debug)]
pub(super) struct Reclaim<'a> {
    health: &'a GpuHealth,
    id: u64,
    started: Instant,
    slowest: (Duration, &'static str),
}

impl Reclaim<'_> {
    /// The next RM step begins.
    pub(super) fn step(&mut self, step: &'static str) {
        let now = Instant::now();
        if let Some(r) = self.health.reclaims_lock().get_mut(&self.id) {
            let took = now.duration_since(r.since);
            if took > self.slowest.0 {
                self.slowest = (took, r.step);
            }
            r.step = step;
            r.since = now;
        }
    }

    /// How long it has run, and its slowest step so far.
    pub(super) fn took(&mut self) -> (Duration, Duration, &'static str) {
        self.step("end");
        (self.started.elapsed(), self.slowest.0, self.slowest.1)
    }
}

impl Drop for Reclaim<'_> {
    fn drop(&mut self) {
        self.health.reclaims_lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{nvrm::NvrmError, sys::nvstatus::NvStatus};

    fn rm(status: NvStatus) -> NvrmError {
        NvrmError::Call {
            step: crate::nvrm::Step::AllocVaSpace,
            source: crate::nvrm::CallError::Rm(crate::sys::nvrm::RmError::Status {
                escape: "fake",
                status,
            }),
        }
    }

    #[test]
    fn a_reset_required_answer_loses_the_gpu_and_recovery_action_none_brings_it_back() {
        let h = GpuHealth::default();
        h.saw("g", &rm(NvStatus::InvalidArgument));
        assert_eq!(h.now(), Health::Serving, "an ordinary refusal says nothing");
        h.saw("g", &rm(NvStatus::ResetRequired));
        let Health::Lost { why, .. } = h.now() else {
            panic!("lost")
        };
        assert!(why.contains("NV_ERR_RESET_REQUIRED"), "{why}");
        h.recovery_action("g", Ok(r580::NV2080_CTRL_GPU_RECOVERY_ACTION_GPU_RESET));
        assert!(
            h.now().to_string().contains("NV_ERR_RESET_REQUIRED"),
            "the first reason stays"
        );
        h.recovery_action("g", Err(rm(NvStatus::NotSupported)));
        assert_eq!(h.now().word(), "lost", "a failed read changes nothing");
        h.recovery_action("g", Ok(r580::NV2080_CTRL_GPU_RECOVERY_ACTION_NONE));
        assert_eq!(h.now(), Health::Serving);
        h.recovery_action("g", Ok(r580::NV2080_CTRL_GPU_RECOVERY_ACTION_GPU_RESET));
        assert!(h.now().to_string().contains("GPU Reset Required"));
    }

    #[test]
    fn a_reclaim_is_stalled_only_past_the_bound_and_ends_with_its_guard() {
        let h = GpuHealth::default();
        let mut r = h.reclaim(SessionId(3));
        r.step("free a channel");
        assert_eq!(h.now(), Health::Serving, "under the bound");
        if let Some(f) = h.reclaims_lock().values_mut().next() {
            f.since = Instant::now()
                .checked_sub(RECLAIM_BOUND)
                .expect("a clock past 10 s");
        }
        match h.now() {
            Health::Stalled { session, step, .. } => {
                assert_eq!((session, step), (SessionId(3), "free a channel"));
            }
            other => panic!("{other:?}"),
        }
        let (_, slowest, step) = r.took();
        assert!(slowest >= RECLAIM_BOUND && step == "free a channel");
        drop(r);
        assert_eq!(h.now(), Health::Serving, "the call returned");
    }
}
