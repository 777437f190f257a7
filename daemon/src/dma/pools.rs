//! Every pool by device name, every session, and the quotas between them.
//!
//! A lease is checked here (size, the session's claim, the uid's quotas), then lent by
//! its [`Pool`]. Quota is reserved under the sessions lock, the pool is asked without
//! it, and the lease is recorded after: a session that ended meanwhile gets its lease
//! released at once.

use std::{
    collections::{BTreeMap, HashMap},
    os::fd::OwnedFd,
    path::Path,
    sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock},
};

use rig_sys::scm::PeerCred;
use tokio::sync::watch;

use super::{
    BLOCK_SIZE, Backing, ClientUse, DeviceAddr, DeviceMap, DmaError, DmaStatus, LeaseId,
    MAX_LEASE_BLOCKS, Pool, PoolMode, PoolSpec, SessionId,
    hugepages::Hugepages,
    session::{self, Session, Token},
};
use crate::config;

/// What opening a session gives its opener.
#[derive(Debug)]
pub struct SessionTicket {
    pub id: SessionId,
    /// `true` once claimed; closed when the session goes.
    pub settled: watch::Receiver<bool>,
    pub token: Token,
    pub mode: PoolMode,
    /// Bytes the opener's uid may still lease from this pool.
    pub quota_left: u64,
}

/// Sessions one uid may have opened and not yet claimed.
pub const MAX_PENDING: usize = 16;

/// A granted lease.
#[derive(Debug)]
pub struct Grant {
    pub lease: LeaseId,
    pub bytes: u64,
    pub addr: Option<DeviceAddr>,
    /// One descriptor per block, in device-address order.
    pub fds: Vec<OwnedFd>,
}

#[derive(Debug, Default)]
struct Sessions {
    map: HashMap<SessionId, Session>,
    next_session: u64,
    next_lease: u64,
    /// Bytes held per uid, and per (uid, pool).
    by_uid: HashMap<u32, u64>,
    by_uid_pool: HashMap<(u32, String), u64>,
}

impl Sessions {
    fn charge(&mut self, uid: u32, pool: &str, bytes: u64) {
        *self.by_uid.entry(uid).or_default() += bytes;
        *self.by_uid_pool.entry((uid, pool.to_owned())).or_default() += bytes;
    }

    fn refund(&mut self, uid: u32, pool: &str, bytes: u64) {
        if let Some(b) = self.by_uid.get_mut(&uid) {
            *b = b.saturating_sub(bytes);
        }
        if let Some(b) = self.by_uid_pool.get_mut(&(uid, pool.to_owned())) {
            *b = b.saturating_sub(bytes);
        }
    }

    fn held(&self, uid: u32, pool: &str) -> (u64, u64) {
        (
            self.by_uid.get(&uid).copied().unwrap_or(0),
            self.by_uid_pool
                .get(&(uid, pool.to_owned()))
                .copied()
                .unwrap_or(0),
        )
    }
}

/// A lease checked and charged: its pool, who leases, its handle, and the session's
/// own device map (gpu pools).
type Reserved = (Arc<Pool>, PeerCred, LeaseId, Option<Arc<dyn DeviceMap>>);

/// The daemon's DMA state.
#[derive(Debug)]
pub struct Pools {
    config: config::Dma,
    /// `config.quota`, or what a reload set since.
    quota: RwLock<config::DmaQuota>,
    hugepages: Hugepages,
    pools: RwLock<BTreeMap<String, Arc<Pool>>>,
    sessions: Mutex<Sessions>,
    /// Pages rigd added to vm.nr_hugepages, given back when it stops.
    reserved: Mutex<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Pools {
    /// The quotas in force.
    pub fn quota(&self) -> config::DmaQuota {
        self.quota
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// New quotas for the leases after (a reload); what is leased stays.
    pub fn set_quota(&self, quota: config::DmaQuota) {
        *self.quota.write().unwrap_or_else(PoisonError::into_inner) = quota;
    }

    /// No pools yet; `sysfs` is where the hugepage counters are read.
    pub fn new(config: &config::Dma, sysfs: &Path) -> Self {
        Self {
            config: config.clone(),
            quota: RwLock::new(config.quota.clone()),
            hugepages: Hugepages::new(sysfs),
            pools: RwLock::new(BTreeMap::new()),
            sessions: Mutex::new(Sessions::default()),
            reserved: Mutex::new(0),
        }
    }

    /// Checks the `[dma]` config and starts its host pools (pinning continues in the
    /// background).
    ///
    /// # Errors
    /// [`DmaError::Config`], and as [`Pools::create`].
    pub fn start(&self) -> Result<(), DmaError> {
        raise_nofile();
        let blocks = self.configured_blocks()?;
        // One check for all host pools, so the error counts every missing page.
        let all = u64::from(blocks) * self.config.host_pools.len() as u64;
        self.ensure_hugepages(all)?;
        for name in &self.config.host_pools {
            let spec = self.configured_spec(PoolMode::Host)?;
            self.insert(name, spec)?;
        }
        Ok(())
    }

    fn ensure_hugepages(&self, pages: u64) -> Result<(), DmaError> {
        let added = self
            .hugepages
            .ensure(pages, self.config.reserve_hugepages)?;
        *lock(&self.reserved) += added;
        Ok(())
    }

    fn configured_blocks(&self) -> Result<u32, DmaError> {
        let bytes = self.config.pool_bytes;
        if bytes == 0 || !bytes.is_multiple_of(BLOCK_SIZE) {
            return Err(DmaError::Config {
                key: "pool_bytes",
                why: format!("{bytes} is not a non-zero multiple of 2 MiB ({BLOCK_SIZE})"),
            });
        }
        u32::try_from(bytes / BLOCK_SIZE).map_err(|_| DmaError::Config {
            key: "pool_bytes",
            why: format!("{bytes} is too large"),
        })
    }

    /// Creates a pool of the configured size for a device (what take calls once a
    /// device is held).
    ///
    /// # Errors
    /// As [`Pools::create`].
    pub fn create_configured(&self, name: &str, mode: PoolMode) -> Result<Arc<Pool>, DmaError> {
        let spec = self.configured_spec(mode)?;
        self.create(name, spec)
    }

    fn configured_spec(&self, mode: PoolMode) -> Result<PoolSpec, DmaError> {
        let threads = match self.config.pin_threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        Ok(PoolSpec {
            mode,
            blocks: self.configured_blocks()?,
            backing: Backing::Huge2M,
            pin_threads: threads,
        })
    }

    /// Creates a pool named `name`, after making sure the kernel has the hugepages it
    /// needs (raising vm.nr_hugepages when the config allows).
    ///
    /// # Errors
    /// [`DmaError::PoolExists`], [`DmaError::Hugepages`] (too few pages: says how many
    /// are missing), and as [`Pool::start`].
    pub fn create(&self, name: &str, spec: PoolSpec) -> Result<Arc<Pool>, DmaError> {
        if spec.backing == Backing::Huge2M {
            self.ensure_hugepages(u64::from(spec.blocks))?;
        }
        self.insert(name, spec)
    }

    fn insert(&self, name: &str, spec: PoolSpec) -> Result<Arc<Pool>, DmaError> {
        let mut pools = self.pools.write().unwrap_or_else(PoisonError::into_inner);
        if pools.contains_key(name) {
            return Err(DmaError::PoolExists {
                name: name.to_owned(),
            });
        }
        let pool = Arc::new(Pool::start(name, spec)?);
        pools.insert(name.to_owned(), Arc::clone(&pool));
        Ok(pool)
    }

    /// Ends every session on the pool (reclaiming their leases), then drops it.
    ///
    /// # Errors
    /// [`DmaError::NoPool`].
    pub fn remove(&self, name: &str) -> Result<(), DmaError> {
        let ids: Vec<SessionId> = lock(&self.sessions)
            .map
            .iter()
            .filter(|(_, s)| s.pool == name)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.close_session(id);
        }
        let pool = self
            .pools
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name)
            .ok_or_else(|| DmaError::NoPool {
                name: name.to_owned(),
            })?;
        drop(pool);
        Ok(())
    }

    /// The device `name` was reset: its quarantined blocks can go. Returns how many.
    ///
    /// # Errors
    /// [`DmaError::NoPool`].
    pub fn device_reset(&self, name: &str) -> Result<u32, DmaError> {
        Ok(self.pool(name)?.device_reset())
    }

    /// The pool named `name`.
    ///
    /// # Errors
    /// [`DmaError::NoPool`].
    pub fn pool(&self, name: &str) -> Result<Arc<Pool>, DmaError> {
        self.pools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(name)
            .cloned()
            .ok_or_else(|| DmaError::NoPool {
                name: name.to_owned(),
            })
    }

    /// The pool a session leases from.
    ///
    /// # Errors
    /// [`DmaError::BadSession`], [`DmaError::NoPool`].
    pub fn session_pool(&self, id: SessionId) -> Result<Arc<Pool>, DmaError> {
        let name = lock(&self.sessions)
            .map
            .get(&id)
            .map(|s| s.pool.clone())
            .ok_or(DmaError::BadSession {
                session: id,
                why: "no such session",
            })?;
        self.pool(&name)
    }

    /// Opens an unclaimed session on pool `name` for `peer`.
    ///
    /// # Errors
    /// [`DmaError::NoPool`], [`DmaError::Token`].
    pub fn open_session(&self, name: &str, peer: PeerCred) -> Result<SessionTicket, DmaError> {
        let pool = self.pool(name)?;
        let token = session::new_token()?;
        let (tx, _) = watch::channel(false);
        let (settled, settled_rx) = watch::channel(false);
        let mut s = lock(&self.sessions);
        let pending = s
            .map
            .values()
            .filter(|v| v.peer.uid == peer.uid && !v.claimed)
            .count();
        if pending >= MAX_PENDING {
            return Err(DmaError::TooManyPending {
                uid: peer.uid,
                limit: MAX_PENDING,
            });
        }
        s.next_session += 1;
        let id = SessionId(s.next_session);
        let (uid_held, pool_held) = s.held(peer.uid, name);
        let q = &self.quota();
        let quota_left = q
            .per_uid_bytes
            .saturating_sub(uid_held)
            .min(q.per_device_bytes.saturating_sub(pool_held));
        s.map.insert(
            id,
            Session {
                peer,
                pool: name.to_owned(),
                token,
                claimed: false,
                leases: BTreeMap::new(),
                ended: tx,
                settled,
                device_map: None,
            },
        );
        Ok(SessionTicket {
            id,
            settled: settled_rx,
            token,
            mode: pool.mode().clone(),
            quota_left,
        })
    }

    /// Drops a session nobody claimed; true when it did. A claimed session stays.
    pub fn expire_unclaimed(&self, id: SessionId) -> bool {
        let mut s = lock(&self.sessions);
        if s.map.get(&id).is_some_and(|v| !v.claimed) {
            s.map.remove(&id);
            return true;
        }
        false
    }

    /// Claims a session from the side socket: right token, same uid and pid as its
    /// opener, once.
    ///
    /// # Errors
    /// [`DmaError::BadSession`].
    pub fn claim(
        &self,
        id: SessionId,
        token: &[u8],
        peer: PeerCred,
    ) -> Result<watch::Receiver<bool>, DmaError> {
        let bad = |why| DmaError::BadSession { session: id, why };
        let mut s = lock(&self.sessions);
        let session = s.map.get_mut(&id).ok_or(bad("no such session"))?;
        if !session::same_token(&session.token, token) {
            return Err(bad("wrong token"));
        }
        if !session::same_opener(&session.peer, &peer) {
            return Err(bad(
                "claimed by another process than the one that opened it",
            ));
        }
        if session.claimed {
            return Err(bad("already claimed"));
        }
        session.claimed = true;
        session.settled.send_replace(true);
        Ok(session.ended.subscribe())
    }

    /// Leases `bytes` (whole blocks) to a claimed session.
    ///
    /// # Errors
    /// [`DmaError::ZeroSize`], [`DmaError::Misaligned`], [`DmaError::Oversized`],
    /// [`DmaError::Quota`], [`DmaError::BadSession`], and the pool's errors.
    pub fn lease(&self, id: SessionId, bytes: u64) -> Result<Grant, DmaError> {
        let blocks = blocks_of(bytes)?;
        let (pool, peer, lease, map) = self.reserve(id, bytes, blocks)?;
        let lent = match pool.lease_into(lease, blocks, map.as_ref()) {
            Ok(l) => l,
            Err(e) => {
                lock(&self.sessions).refund(peer.uid, pool.name(), bytes);
                return Err(e);
            }
        };
        let mut s = lock(&self.sessions);
        match s.map.get_mut(&id) {
            Some(session) => {
                session.leases.insert(lease, bytes);
            }
            None => {
                // The session ended while the pool was lending: take it back.
                s.refund(peer.uid, pool.name(), bytes);
                drop(s);
                let _ = pool.release(lease);
                return Err(DmaError::BadSession {
                    session: id,
                    why: "ended during the lease",
                });
            }
        }
        Ok(Grant {
            lease,
            bytes,
            addr: lent.addr,
            fds: lent.fds,
        })
    }

    /// Checks a lease against the session and quotas, charges it, and names it.
    fn reserve(&self, id: SessionId, bytes: u64, blocks: u32) -> Result<Reserved, DmaError> {
        let mut s = lock(&self.sessions);
        let session = s.map.get(&id).ok_or(DmaError::BadSession {
            session: id,
            why: "no such session",
        })?;
        if !session.claimed {
            return Err(DmaError::BadSession {
                session: id,
                why: "not claimed on the side socket",
            });
        }
        let (peer, name) = (session.peer, session.pool.clone());
        let map = session.device_map.clone();
        let pool = self.pool(&name)?;
        if matches!(pool.mode(), PoolMode::Gpu(_)) && map.is_none() {
            return Err(DmaError::NoDeviceMap { session: id });
        }
        if blocks > pool.target_blocks() {
            return Err(DmaError::Oversized {
                bytes,
                limit: u64::from(pool.target_blocks()) * BLOCK_SIZE,
                what: "this device's pool holds",
            });
        }
        let (uid_held, pool_held) = s.held(peer.uid, &name);
        let q = &self.quota();
        let over = |held: u64, limit: u64, scope: String| DmaError::Quota {
            uid: peer.uid,
            scope,
            held,
            bytes,
            limit,
        };
        if uid_held.saturating_add(bytes) > q.per_uid_bytes {
            return Err(over(uid_held, q.per_uid_bytes, "across devices".into()));
        }
        if pool_held.saturating_add(bytes) > q.per_device_bytes {
            return Err(over(pool_held, q.per_device_bytes, format!("on {name}")));
        }
        s.charge(peer.uid, &name, bytes);
        s.next_lease += 1;
        Ok((pool, peer, LeaseId(s.next_lease), map))
    }

    /// Gives a claimed session its own device address space, once: its leases map
    /// there from now on. Who opened and claimed it is checked by the caller.
    ///
    /// # Errors
    /// [`DmaError::BadSession`] for a session unknown, unclaimed or already given one.
    pub fn attach_device_map(
        &self,
        id: SessionId,
        map: Arc<dyn DeviceMap>,
    ) -> Result<(), DmaError> {
        let bad = |why| DmaError::BadSession { session: id, why };
        let mut s = lock(&self.sessions);
        let session = s.map.get_mut(&id).ok_or(bad("no such session"))?;
        if !session.claimed {
            return Err(bad("not claimed on the side socket"));
        }
        if session.device_map.is_some() {
            return Err(bad("already has its GPU address space"));
        }
        session.device_map = Some(map);
        Ok(())
    }

    /// The pool and peer of a session, for the layers that serve it beside its leases.
    ///
    /// # Errors
    /// [`DmaError::BadSession`].
    pub fn session_peer(&self, id: SessionId) -> Result<(String, PeerCred), DmaError> {
        let s = lock(&self.sessions);
        let session = s.map.get(&id).ok_or(DmaError::BadSession {
            session: id,
            why: "no such session",
        })?;
        Ok((session.pool.clone(), session.peer))
    }

    /// Releases one of the session's leases.
    ///
    /// # Errors
    /// [`DmaError::UnknownLease`] for a handle that is not this session's;
    /// [`DmaError::BadSession`].
    pub fn release(&self, id: SessionId, lease: LeaseId) -> Result<(), DmaError> {
        let mut s = lock(&self.sessions);
        let session = s.map.get_mut(&id).ok_or(DmaError::BadSession {
            session: id,
            why: "no such session",
        })?;
        let bytes = session
            .leases
            .remove(&lease)
            .ok_or(DmaError::UnknownLease { lease })?;
        let (uid, name) = (session.peer.uid, session.pool.clone());
        s.refund(uid, &name, bytes);
        drop(s);
        self.pool(&name)?.release(lease)?;
        Ok(())
    }

    /// A lease of a claimed session: its pool, device address and length.
    ///
    /// # Errors
    /// [`DmaError::BadSession`], [`DmaError::UnknownLease`], [`DmaError::NoPool`].
    pub fn session_lease(
        &self,
        id: SessionId,
        lease: LeaseId,
    ) -> Result<(Arc<Pool>, Option<DeviceAddr>, u64), DmaError> {
        let s = lock(&self.sessions);
        let session = s.map.get(&id).ok_or(DmaError::BadSession {
            session: id,
            why: "no such session",
        })?;
        if !session.leases.contains_key(&lease) {
            return Err(DmaError::UnknownLease { lease });
        }
        let name = session.pool.clone();
        drop(s);
        let pool = self.pool(&name)?;
        let (addr, bytes) = pool
            .lease_addr(lease)
            .ok_or(DmaError::UnknownLease { lease })?;
        Ok((pool, addr, bytes))
    }

    /// Takes `lease` out of its session without giving its blocks back: the device may
    /// still write them (a lent queue it did not delete). The pool keeps them until it
    /// goes, after the device has stopped mastering the bus. Returns whether it was the
    /// session's.
    pub fn withhold(&self, id: SessionId, lease: LeaseId) -> bool {
        let mut s = lock(&self.sessions);
        let Some(session) = s.map.get_mut(&id) else {
            return false;
        };
        let Some(bytes) = session.leases.remove(&lease) else {
            return false;
        };
        let (uid, name) = (session.peer.uid, session.pool.clone());
        s.refund(uid, &name, bytes);
        tracing::warn!(session = %id, lease = lease.0, pool = %name, "a lease stays with rigd: its device may still write it");
        true
    }

    /// Ends a session and reclaims all its leases; returns how many. Closing an
    /// ended or unknown session does nothing.
    pub fn close_session(&self, id: SessionId) -> usize {
        let Some(session) = lock(&self.sessions).map.remove(&id) else {
            return 0;
        };
        let bytes = session.bytes();
        lock(&self.sessions).refund(session.peer.uid, &session.pool, bytes);
        let n = session.leases.len();
        if let Ok(pool) = self.pool(&session.pool) {
            for lease in session.leases.keys() {
                if let Err(e) = pool.release(*lease) {
                    tracing::warn!(session = %id, "{e}");
                }
            }
        }
        session.ended.send_replace(true);
        n
    }

    /// The pool whose oldest block pin under way has run longest at `now`, and how
    /// long (the watchdog's probe of the pinning threads).
    pub fn oldest_pin(&self, now: std::time::Instant) -> Option<(String, std::time::Duration)> {
        self.pools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter_map(|p| Some((p.name().to_owned(), p.oldest_pin(now)?)))
            .max_by_key(|(_, d)| *d)
    }

    /// Pools and sessions; `viewer` sees every session when `None` (root), else only
    /// its own uid's.
    pub fn status(&self, viewer: Option<u32>) -> DmaStatus {
        let pools = self
            .pools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .map(|p| p.status())
            .collect();
        let s = lock(&self.sessions);
        let mut clients: Vec<ClientUse> = s
            .map
            .iter()
            .filter(|(_, v)| viewer.is_none_or(|uid| v.peer.uid == uid))
            .map(|(id, v)| ClientUse {
                session: *id,
                uid: v.peer.uid,
                pid: v.peer.pid,
                device: v.pool.clone(),
                leases: u32::try_from(v.leases.len()).unwrap_or(u32::MAX),
                bytes: v.bytes(),
                claimed: v.claimed,
                // GPU memory is `gpumem`'s, shared events `events`': the service joins
                // them in.
                gpu_memory_allocations: 0,
                gpu_memory_bytes: 0,
                events_exported: 0,
                events_imported: 0,
            })
            .collect();
        clients.sort_by_key(|c| c.session);
        let quota = self.quota();
        DmaStatus {
            pools,
            clients,
            quota_per_uid_bytes: quota.per_uid_bytes,
            quota_per_device_bytes: quota.per_device_bytes,
            gpu_memory: Vec::new(),
        }
    }

    /// Ends every session and drops every pool, then gives back the hugepages rigd
    /// added to vm.nr_hugepages.
    pub fn shutdown(&self) {
        let ids: Vec<SessionId> = lock(&self.sessions).map.keys().copied().collect();
        for id in ids {
            self.close_session(id);
        }
        std::mem::take(&mut *self.pools.write().unwrap_or_else(PoisonError::into_inner));
        let added = std::mem::take(&mut *lock(&self.reserved));
        if let Err(e) = self.hugepages.give_back(added) {
            tracing::warn!("{e}");
        }
    }
}

impl Drop for Pools {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Raises the soft descriptor limit to the hard one: each DMA session holds two
/// sockets and each block a memfd, so a thousand clients pass systemd's default 1024.
fn raise_nofile() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!("Failed to raise RLIMIT_NOFILE from {soft} to {hard}: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("Failed to read RLIMIT_NOFILE: {e}"),
    }
}

/// Blocks in a lease of `bytes`.
fn blocks_of(bytes: u64) -> Result<u32, DmaError> {
    if bytes == 0 {
        return Err(DmaError::ZeroSize);
    }
    if !bytes.is_multiple_of(BLOCK_SIZE) {
        return Err(DmaError::Misaligned {
            bytes,
            block: BLOCK_SIZE,
        });
    }
    let blocks = bytes / BLOCK_SIZE;
    if blocks > u64::from(MAX_LEASE_BLOCKS) {
        return Err(DmaError::Oversized {
            bytes,
            limit: u64::from(MAX_LEASE_BLOCKS) * BLOCK_SIZE,
            what: "one lease may hold",
        });
    }
    Ok(u32::try_from(blocks).expect("at most MAX_LEASE_BLOCKS"))
}

#[cfg(test)]
mod tests;
