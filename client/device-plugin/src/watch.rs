//! Following rigd: what it holds, each device's health as the kubelet should see it,
//! and the CDI spec of every held device.
//!
//! rigd has no change stream, so its Status is polled (every `--poll-ms`, 20 ms by
//! default: a gRPC call on rigd's socket costs ~27 µs, docs/dma.md); a new
//! device's decode (class, NUMA node, the bridges above it) is fetched once. Health
//! ([`judge`]) is worked out afresh from each poll, never latched: a device that comes
//! back from a reset, a rigd restart or a give-back-and-take is Healthy again on the
//! next poll after rigd says so (the upstream plugins' devices "stuck unhealthy" until a
//! plugin restart is what this avoids). A device seen once stays listed, Unhealthy while
//! rigd does not hold it, so the kubelet does not lose track of pods that had it.
//! When rigd goes, every device is Unhealthy and the connection is retried with backoff
//! (100 ms doubling to 5 s).

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Duration,
};

use rig_cdi::{self as cdi, Rule, SpecDevice};
use rig_client::{Client, Device, HeldDevice, HeldState, error_line};
use tokio::sync::{Notify, watch};

/// One device as the plugin shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevState {
    pub bdf: String,
    pub kind: String,
    pub healthy: bool,
    /// Why it is (un)healthy, for the log.
    pub reason: String,
    pub numa: Option<i64>,
    /// Bridges from the parent up to the root port (sysfs `upstream`).
    pub upstream: Vec<String>,
    /// What its CDI spec needs, while rig holds it.
    pub spec: Option<SpecDevice>,
}

/// Everything the plugin knows, at one poll.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub rigd_up: bool,
    pub devices: BTreeMap<String, DevState>,
}

/// A device's health from rigd's view of it. `allocated`: the kubelet was given it in
/// an Allocate, so a lease on it is taken to be its container's.
pub fn judge(rigd_up: bool, held: Option<&HeldDevice>, allocated: bool) -> (bool, String) {
    if !rigd_up {
        return (false, "rigd is not reachable".into());
    }
    let Some(h) = held else {
        return (false, "rig does not hold it (given back, or gone)".into());
    };
    if h.state == HeldState::Busy {
        return (
            false,
            "an operation on it (a reset, a resize, a reclaim) is under way".into(),
        );
    }
    match &h.lease {
        Some(l) if !allocated => (
            false,
            format!(
                "leased whole outside Kubernetes, to uid {} (pid {}, session {})",
                l.uid, l.pid, l.session
            ),
        ),
        Some(l) => (
            true,
            format!(
                "leased by its container (pid {}, session {})",
                l.pid, l.session
            ),
        ),
        None => (true, "held by rig".into()),
    }
}

/// The bridges above a device, nearest first: its link budget's hops after its own
/// (docs/rigctl-json.md, LinkBudget), or sysfs's `upstream` when rigd had no hops.
fn upstream(d: &Device) -> Vec<String> {
    if d.link.hops.len() > 1 {
        d.link.hops[1..].iter().map(|h| h.bdf.clone()).collect()
    } else {
        d.sysfs.upstream.clone()
    }
}

/// Follows rigd; shared by every resource's service.
#[derive(Debug)]
pub struct Watcher {
    socket: PathBuf,
    rules: Vec<Rule>,
    host: cdi::Host,
    cdi_dir: PathBuf,
    tx: watch::Sender<Arc<Snapshot>>,
    allocated: Mutex<HashSet<String>>,
    /// Wakes the poll loop early (after an Allocate).
    wake: Notify,
}

impl Watcher {
    pub fn new(socket: PathBuf, rules: Vec<Rule>, host: cdi::Host, cdi_dir: PathBuf) -> Self {
        let (tx, _) = watch::channel(Arc::new(Snapshot::default()));
        Self {
            socket,
            rules,
            host,
            cdi_dir,
            tx,
            allocated: Mutex::new(HashSet::new()),
            wake: Notify::new(),
        }
    }

    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.tx.subscribe()
    }

    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.tx.borrow())
    }

    pub fn socket(&self) -> &std::path::Path {
        &self.socket
    }

    /// Marks devices allocated to a container, and polls rigd at once.
    pub fn allocated(&self, ids: &[String]) {
        let mut a = self
            .allocated
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        a.extend(ids.iter().cloned());
        drop(a);
        self.wake.notify_one();
    }

    fn is_allocated(&self, bdf: &str) -> bool {
        self.allocated
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .contains(bdf)
    }

    /// Writes (or refreshes) the CDI spec of a held device; its path.
    ///
    /// # Errors
    /// The device is not held (no spec), or the file could not be written.
    pub fn write_spec(&self, d: &DevState) -> Result<PathBuf, String> {
        let spec = d
            .spec
            .as_ref()
            .ok_or_else(|| format!("{}: {}", d.bdf, d.reason))?;
        cdi::write_spec(&self.cdi_dir, &cdi::spec_for(&d.kind, spec, &self.host)).map_err(|e| {
            format!(
                "{}: cannot write its CDI spec in {}: {e}",
                d.bdf,
                self.cdi_dir.display()
            )
        })
    }

    /// Polls rigd forever.
    pub async fn run(self: Arc<Self>, poll: Duration) {
        const FIRST_BACKOFF: Duration = Duration::from_millis(100);
        let mut client: Option<Client> = None;
        let mut details: HashMap<String, Device> = HashMap::new();
        let mut backoff = FIRST_BACKOFF;
        let mut up: Option<bool> = None;
        let mut written: HashMap<String, cdi::Spec> = HashMap::new();
        let mut busy: HashMap<String, u32> = HashMap::new();
        loop {
            let c = match client.as_mut() {
                Some(c) => c,
                None => match Client::connect(&self.socket).await {
                    Ok(c) => {
                        if up == Some(false) {
                            eprintln!(
                                "rig-device-plugin: rigd is back at {}; health follows it again",
                                self.socket.display()
                            );
                        }
                        details.clear();
                        backoff = FIRST_BACKOFF;
                        client.insert(c)
                    }
                    Err(e) => {
                        self.down(&mut up, &e);
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        continue;
                    }
                },
            };
            let status = match c.status().await {
                Ok(s) => s,
                Err(e) => {
                    client = None;
                    self.down(&mut up, &e);
                    continue;
                }
            };
            let mut lost = false;
            for h in &status.devices {
                if !details.contains_key(&h.bdf) {
                    match c.device(&h.bdf).await {
                        Ok(d) => {
                            details.insert(h.bdf.clone(), d);
                        }
                        Err(e) => {
                            eprintln!(
                                "rig-device-plugin: {}: cannot read its decode from rigd: {}",
                                h.bdf,
                                error_line(&e)
                            );
                            lost = true;
                        }
                    }
                }
            }
            if lost {
                client = None;
                continue;
            }
            up = Some(true);
            let next = self.compute(true, &status.devices, &details, &mut busy);
            self.sync_specs(&next, &mut written);
            self.publish(next);
            tokio::select! {
                () = tokio::time::sleep(poll) => {}
                () = self.wake.notified() => {}
            }
        }
    }

    fn down(&self, up: &mut Option<bool>, e: &rig_client::ClientError) {
        if *up != Some(false) {
            eprintln!(
                "rig-device-plugin: rigd gone at {}: {}; every device is reported Unhealthy until it is back (retrying with backoff)",
                self.socket.display(),
                error_line(e)
            );
        }
        *up = Some(false);
        let next = self.compute(false, &[], &HashMap::new(), &mut HashMap::new());
        self.publish(next);
    }

    /// The next snapshot: every device held now that a rule names, and every one
    /// listed before.
    fn compute(
        &self,
        rigd_up: bool,
        held: &[HeldDevice],
        details: &HashMap<String, Device>,
        busy: &mut HashMap<String, u32>,
    ) -> Snapshot {
        let prev = self.snapshot();
        busy.retain(|b, _| {
            held.iter()
                .any(|h| h.bdf == *b && h.state == HeldState::Busy)
        });
        let mut devices = BTreeMap::new();
        for h in held {
            let Some(d) = details.get(&h.bdf) else {
                continue;
            };
            let Some(rule) = cdi::rule_for(&self.rules, d) else {
                continue;
            };
            let old = prev.devices.get(&h.bdf);
            let (mut healthy, mut reason) = judge(rigd_up, Some(h), self.is_allocated(&h.bdf));
            if h.state == HeldState::Busy {
                // rigd's Status says busy whenever the device's lock is taken, by a reset
                // or by another client's Status at the same instant: one busy poll keeps
                // the previous health, two in a row (a real operation) make it Unhealthy.
                let n = busy.entry(h.bdf.clone()).or_insert(0);
                *n += 1;
                if let Some(o) = old.filter(|_| *n < 2) {
                    healthy = o.healthy;
                    reason.clone_from(&o.reason);
                }
            }
            // A busy device's mode is not shown: its spec stays what it was.
            let spec = SpecDevice::of(h, d).or_else(|| old.and_then(|o| o.spec.clone()));
            devices.insert(
                h.bdf.clone(),
                DevState {
                    bdf: h.bdf.clone(),
                    kind: rule.kind.clone(),
                    healthy,
                    reason,
                    numa: d.sysfs.numa_node.filter(|n| *n >= 0).map(i64::from),
                    upstream: upstream(d),
                    spec,
                },
            );
        }
        for (bdf, old) in &prev.devices {
            if devices.contains_key(bdf) {
                continue;
            }
            let (healthy, reason) = judge(rigd_up, None, false);
            devices.insert(
                bdf.clone(),
                DevState {
                    healthy,
                    reason,
                    spec: None,
                    ..old.clone()
                },
            );
        }
        Snapshot { rigd_up, devices }
    }

    /// Writes the spec of every held device whose spec changed, and (while rigd is up)
    /// removes rig's specs of devices no longer held.
    fn sync_specs(&self, s: &Snapshot, written: &mut HashMap<String, cdi::Spec>) {
        let mut keep = Vec::new();
        for d in s.devices.values() {
            let Some(sd) = &d.spec else {
                written.remove(&d.bdf);
                continue;
            };
            let spec = cdi::spec_for(&d.kind, sd, &self.host);
            keep.push(cdi::file_name(&d.kind, &d.bdf));
            if written.get(&d.bdf) == Some(&spec) {
                continue;
            }
            match cdi::write_spec(&self.cdi_dir, &spec) {
                Ok(p) => {
                    eprintln!(
                        "rig-device-plugin: {} {}: CDI spec {}",
                        d.kind,
                        d.bdf,
                        p.display()
                    );
                    written.insert(d.bdf.clone(), spec);
                }
                Err(e) => eprintln!(
                    "rig-device-plugin: {} {}: cannot write its CDI spec in {}: {e}",
                    d.kind,
                    d.bdf,
                    self.cdi_dir.display()
                ),
            }
        }
        if s.rigd_up {
            match cdi::remove_stale(&self.cdi_dir, &keep) {
                Ok(gone) => {
                    for p in gone {
                        eprintln!(
                            "rig-device-plugin: removed {}: rig no longer holds its device",
                            p.display()
                        );
                    }
                }
                Err(e) => eprintln!(
                    "rig-device-plugin: cannot clean {}: {e}",
                    self.cdi_dir.display()
                ),
            }
        }
    }

    /// Logs what changed, then publishes.
    fn publish(&self, next: Snapshot) {
        let prev = self.snapshot();
        if *prev == next {
            return;
        }
        for (bdf, d) in &next.devices {
            let old = prev.devices.get(bdf);
            if old.is_some_and(|o| o.healthy == d.healthy && o.reason == d.reason) {
                continue;
            }
            let was_held = old.is_some_and(|o| o.spec.is_some());
            if was_held && d.spec.is_none() && self.is_allocated(bdf) && next.rigd_up {
                eprintln!(
                    "rig-device-plugin: {} {bdf}: taken away while allocated to a container: {}; reported Unhealthy",
                    d.kind, d.reason
                );
            } else if d.healthy {
                eprintln!(
                    "rig-device-plugin: {} {bdf}: Healthy ({})",
                    d.kind, d.reason
                );
            } else {
                eprintln!(
                    "rig-device-plugin: {} {bdf}: Unhealthy ({})",
                    d.kind, d.reason
                );
            }
        }
        self.tx.send_replace(Arc::new(next));
    }
}

#[cfg(test)]
mod tests {
    use rig_client::LeaseHolder;

    use super::*;

    fn held(state: HeldState, lease: Option<LeaseHolder>) -> HeldDevice {
        HeldDevice {
            bdf: "0000:01:00.0".into(),
            mode: Some(rig_client::Mode::Vfio),
            original_driver: None,
            state,
            since_unix: 0,
            bars: Vec::new(),
            group_members: Vec::new(),
            overrode: Vec::new(),
            lease,
        }
    }

    #[test]
    fn health_follows_rigd_both_ways() {
        let lease = LeaseHolder {
            uid: 1000,
            pid: 42,
            since_unix: 0,
            session: rig_client::session::SessionId(7),
        };
        assert!(judge(true, Some(&held(HeldState::Held, None)), false).0);
        let (ok, why) = judge(true, Some(&held(HeldState::Busy, None)), false);
        assert!(!ok);
        assert!(why.contains("under way"), "{why}");
        let (ok, why) = judge(true, Some(&held(HeldState::Held, Some(lease))), false);
        assert!(!ok, "a lease the kubelet did not give out");
        assert!(why.contains("uid 1000 (pid 42, session 7)"), "{why}");
        assert!(judge(true, Some(&held(HeldState::Held, Some(lease))), true).0);
        assert!(!judge(true, None, true).0, "gone");
        assert!(
            !judge(false, Some(&held(HeldState::Held, None)), false).0,
            "rigd gone"
        );
        // Nothing latches: the same held device is healthy again on the next poll.
        assert!(judge(true, Some(&held(HeldState::Held, None)), false).0);
    }
}
