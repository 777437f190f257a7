//! `Rig`'s reload (SIGHUP, `systemctl reload rigd`): a new config's roles and finer
//! rules (`policy`), DMA and GPU memory quotas, queue limits and channels per session go into force for the requests after
//! it, without touching a client's session, lease, queue or channel. What needs a
//! restart (paths, the socket, pools, take-over, channels, metrics, audit) is named,
//! and the rest of the new config still applies; the log level is main.rs's.
//!
//! All or nothing: a config whose groups do not resolve is refused whole and the old
//! one stays (the caller has already refused one that does not parse). Lock order: the
//! running config, then each of the state's own locks, one at a time.

use std::sync::PoisonError;

use super::{Rig, lock};
use crate::{config::Config, policy::Policy};

/// Why a reload was refused.
#[derive(Debug, thiserror::Error)]
#[error("Refused the new configuration; the old one stays")]
pub struct ReloadError(#[source] pub crate::policy::PolicyError);

/// What a reload did.
#[derive(Debug, Default)]
pub struct Reloaded {
    /// Sections that changed and need a restart to take effect.
    pub need_restart: Vec<&'static str>,
}

impl Rig {
    /// Puts `new`'s policy, DMA and GPU memory quotas, queue limits and channels per
    /// session in force.
    ///
    /// # Errors
    /// [`ReloadError`] when a group of the new policy is not in the group file.
    pub fn reload(&self, new: &Config) -> Result<Reloaded, ReloadError> {
        let mut running = lock(&self.running);
        // Groups and callers' /proc are read where they were at start (paths need a
        // restart).
        let mut effective = new.clone();
        effective.paths = running.paths.clone();
        let policy = Policy::strict(&effective).map_err(ReloadError)?;
        let mut need_restart = Vec::new();
        let old = &*running;
        for (name, changed) in [
            (
                "server",
                old.server.socket != new.server.socket || old.server.group != new.server.group,
            ),
            ("paths", old.paths != new.paths),
            ("take", old.take != new.take),
            (
                "dma (but quota)",
                old.dma.pool_bytes != new.dma.pool_bytes
                    || old.dma.host_pools != new.dma.host_pools
                    || old.dma.reserve_hugepages != new.dma.reserve_hugepages
                    || old.dma.pin_threads != new.dma.pin_threads,
            ),
            ("channels (but gpu_rings_group, per_session)", {
                let mut a = old.channels.clone();
                a.gpu_rings_group.clone_from(&new.channels.gpu_rings_group);
                a.per_session = new.channels.per_session;
                a != new.channels
            }),
            ("lease.pool", old.lease.pool != new.lease.pool),
            ("audit", old.audit != new.audit),
            ("metrics", old.metrics != new.metrics),
        ] {
            if changed {
                need_restart.push(name);
            }
        }
        self.set_policy(policy);
        self.dma.set_quota(new.dma.quota.clone());
        self.set_queue_limits((&new.queue).into());
        for gpu in self
            .ledger
            .gpus
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            gpu.set_channels_per_session(new.channels.per_session);
            gpu.set_gpu_memory_quota((&new.gpu_memory).into());
        }
        // What is now in force; sections that need a restart keep their old values so
        // that the next reload still names them.
        running
            .server
            .admin_group
            .clone_from(&new.server.admin_group);
        running.roles = new.roles.clone();
        running.lease.allow.clone_from(&new.lease.allow);
        running
            .channels
            .gpu_rings_group
            .clone_from(&new.channels.gpu_rings_group);
        running.channels.per_session = new.channels.per_session;
        running.dma.quota = new.dma.quota.clone();
        running.gpu_memory = new.gpu_memory.clone();
        running.queue = new.queue.clone();
        running.log = new.log.clone();
        Ok(Reloaded { need_restart })
    }
}
