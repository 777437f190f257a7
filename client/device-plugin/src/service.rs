//! The DevicePlugin service of one resource (`rig.dev/gpu`, or a configured kind): what
//! the kubelet calls on this plugin's socket. Device IDs are PCI addresses.
//!
//! - ListAndWatch: the resource's devices from every new snapshot of `watch`, sent
//!   when their IDs, health or topology change;
//! - GetPreferredAllocation: [`prefer`] — devices sharing the most bridges (the same
//!   switch, then the same root port), then the same NUMA node;
//! - Allocate: refreshes each device's CDI spec and answers with its CDI name
//!   (`rig.dev/gpu=0000:01:00.0`), `RIG_DEVICES`, `RIG_DEVICE`, `RIG_SOCKET` and an
//!   annotation naming the devices; a device that is not healthy is refused;
//! - PreStartContainer: refuses to start a container on a device rig no longer holds,
//!   or that someone outside Kubernetes leases.

use std::{collections::HashMap, sync::Arc};

use rig_cdi as cdi;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::{
    pb::{self, device_plugin_server::DevicePlugin},
    watch::{DevState, Snapshot, Watcher},
};

/// The kubelet's health words (constants.go of the API).
const HEALTHY: &str = "Healthy";
const UNHEALTHY: &str = "Unhealthy";

/// The annotation Allocate puts on the container: the PCI addresses it was given.
pub const DEVICES_ANNOTATION: &str = "rig.dev/devices";

#[derive(Debug, Clone)]
pub struct Plugin {
    kind: String,
    watcher: Arc<Watcher>,
}

impl Plugin {
    pub fn new(kind: String, watcher: Arc<Watcher>) -> Self {
        Self { kind, watcher }
    }

    pub fn kind(&self) -> &str {
        &self.kind
    }

    fn mine<'a>(&self, s: &'a Snapshot) -> impl Iterator<Item = &'a DevState> {
        let kind = self.kind.clone();
        s.devices.values().filter(move |d| d.kind == kind)
    }

    fn list(&self, s: &Snapshot) -> pb::ListAndWatchResponse {
        pb::ListAndWatchResponse {
            devices: self
                .mine(s)
                .map(|d| pb::Device {
                    id: d.bdf.clone(),
                    health: if d.healthy { HEALTHY } else { UNHEALTHY }.into(),
                    topology: d.numa.map(|id| pb::TopologyInfo {
                        nodes: vec![pb::NumaNode { id }],
                    }),
                })
                .collect(),
        }
    }

    /// The device `id` of this resource, held and healthy.
    fn usable<'a>(&self, s: &'a Snapshot, id: &str) -> Result<&'a DevState, Status> {
        let d = s
            .devices
            .get(id)
            .filter(|d| d.kind == self.kind)
            .ok_or_else(|| {
                Status::not_found(format!("{}: no device {id} in this resource", self.kind))
            })?;
        if d.healthy {
            Ok(d)
        } else {
            Err(Status::failed_precondition(format!(
                "{} {id} is Unhealthy: {}",
                self.kind, d.reason
            )))
        }
    }
}

/// How close two devices are: 2 for each bridge they share above them (same switch
/// beats same root port beats nothing), 1 more on the same NUMA node.
fn affinity(a: &DevState, b: &DevState) -> u32 {
    let shared = a
        .upstream
        .iter()
        .rev()
        .zip(b.upstream.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let numa = u32::from(a.numa.is_some() && a.numa == b.numa);
    u32::try_from(shared).unwrap_or(u32::MAX / 4) * 2 + numa
}

/// `size` devices from `available` including `must`: the closest set, grown greedily
/// from each possible first device (the must-include ones when given), the best total
/// affinity winning, ties to the lower addresses. Devices the snapshot does not know
/// are ranked last, as strangers to every other.
pub fn prefer(s: &Snapshot, available: &[String], must: &[String], size: usize) -> Vec<String> {
    let stranger = |id: &str| DevState {
        bdf: id.to_owned(),
        kind: String::new(),
        healthy: false,
        reason: String::new(),
        numa: None,
        upstream: Vec::new(),
        spec: None,
    };
    let mut pool: Vec<String> = available.to_vec();
    pool.sort();
    pool.dedup();
    let state: HashMap<&str, DevState> = pool
        .iter()
        .chain(must)
        .map(|id| {
            (
                id.as_str(),
                s.devices.get(id).cloned().unwrap_or_else(|| stranger(id)),
            )
        })
        .collect();
    let score = |set: &[String], c: &str| -> u32 {
        set.iter()
            .map(|x| affinity(&state[x.as_str()], &state[c]))
            .sum()
    };
    let grow = |mut set: Vec<String>| -> (u32, Vec<String>) {
        while set.len() < size {
            let best = pool
                .iter()
                .filter(|c| !set.contains(c))
                .max_by(|a, b| score(&set, a).cmp(&score(&set, b)).then_with(|| b.cmp(a)));
            match best {
                Some(b) => set.push(b.clone()),
                None => break,
            }
        }
        let total = set
            .iter()
            .enumerate()
            .flat_map(|(i, x)| set[i + 1..].iter().map(move |y| (x, y)))
            .map(|(x, y)| affinity(&state[x.as_str()], &state[y.as_str()]))
            .sum();
        (total, set)
    };
    let mut base: Vec<String> = Vec::new();
    for m in must {
        if !base.contains(m) {
            base.push(m.clone());
        }
    }
    if !base.is_empty() || size == 0 {
        return grow(base).1;
    }
    let mut best: Option<(u32, Vec<String>)> = None;
    for seed in &pool {
        let (total, set) = grow(vec![seed.clone()]);
        if best.as_ref().is_none_or(|(t, _)| total > *t) {
            best = Some((total, set));
        }
    }
    best.map(|(_, mut set)| {
        set.sort();
        set
    })
    .unwrap_or_default()
}

#[tonic::async_trait]
impl DevicePlugin for Plugin {
    async fn get_device_plugin_options(
        &self,
        _: Request<pb::Empty>,
    ) -> Result<Response<pb::DevicePluginOptions>, Status> {
        Ok(Response::new(pb::DevicePluginOptions {
            pre_start_required: true,
            get_preferred_allocation_available: true,
        }))
    }

    type ListAndWatchStream = ReceiverStream<Result<pb::ListAndWatchResponse, Status>>;

    async fn list_and_watch(
        &self,
        _: Request<pb::Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut snapshots = self.watcher.subscribe();
        let me = self.clone();
        tokio::spawn(async move {
            let mut last: Option<pb::ListAndWatchResponse> = None;
            loop {
                let list = me.list(&snapshots.borrow_and_update());
                if last.as_ref() != Some(&list) {
                    if tx.send(Ok(list.clone())).await.is_err() {
                        return;
                    }
                    last = Some(list);
                }
                tokio::select! {
                    changed = snapshots.changed() => if changed.is_err() { return },
                    () = tx.closed() => return,
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn get_preferred_allocation(
        &self,
        r: Request<pb::PreferredAllocationRequest>,
    ) -> Result<Response<pb::PreferredAllocationResponse>, Status> {
        let s = self.watcher.snapshot();
        let container_responses = r
            .into_inner()
            .container_requests
            .into_iter()
            .map(|c| pb::ContainerPreferredAllocationResponse {
                device_i_ds: prefer(
                    &s,
                    &c.available_device_i_ds,
                    &c.must_include_device_i_ds,
                    usize::try_from(c.allocation_size).unwrap_or(0),
                ),
            })
            .collect();
        Ok(Response::new(pb::PreferredAllocationResponse {
            container_responses,
        }))
    }

    async fn allocate(
        &self,
        r: Request<pb::AllocateRequest>,
    ) -> Result<Response<pb::AllocateResponse>, Status> {
        let s = self.watcher.snapshot();
        let socket = self.watcher.socket().display().to_string();
        let mut container_responses = Vec::new();
        for c in r.into_inner().container_requests {
            let mut cdi_devices = Vec::new();
            for id in &c.devices_ids {
                let d = self.usable(&s, id)?;
                self.watcher
                    .write_spec(d)
                    .map_err(Status::failed_precondition)?;
                cdi_devices.push(pb::CdiDevice {
                    name: cdi::device_name(&self.kind, id),
                });
            }
            self.watcher.allocated(&c.devices_ids);
            let list = c.devices_ids.join(",");
            eprintln!(
                "rig-device-plugin: {}: allocated {list} to a container",
                self.kind
            );
            let mut envs = HashMap::from([
                ("RIG_SOCKET".to_owned(), socket.clone()),
                ("RIG_DEVICES".to_owned(), list.clone()),
            ]);
            if let Some(first) = c.devices_ids.first() {
                envs.insert("RIG_DEVICE".into(), first.clone());
            }
            container_responses.push(pb::ContainerAllocateResponse {
                envs,
                mounts: Vec::new(),
                devices: Vec::new(),
                annotations: HashMap::from([(DEVICES_ANNOTATION.to_owned(), list)]),
                cdi_devices,
            });
        }
        Ok(Response::new(pb::AllocateResponse {
            container_responses,
        }))
    }

    async fn pre_start_container(
        &self,
        r: Request<pb::PreStartContainerRequest>,
    ) -> Result<Response<pb::PreStartContainerResponse>, Status> {
        let s = self.watcher.snapshot();
        for id in &r.into_inner().devices_ids {
            self.usable(&s, id)?;
        }
        Ok(Response::new(pb::PreStartContainerResponse {}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(bdf: &str, numa: i64, upstream: &[&str]) -> (String, DevState) {
        (
            bdf.to_owned(),
            DevState {
                bdf: bdf.to_owned(),
                kind: "rig.dev/gpu".into(),
                healthy: true,
                reason: String::new(),
                numa: Some(numa),
                upstream: upstream.iter().map(|s| (*s).to_owned()).collect(),
                spec: None,
            },
        )
    }

    /// Two GPUs under one switch on NUMA 0, one under another root port on NUMA 0, one
    /// on NUMA 1.
    fn snapshot() -> Snapshot {
        Snapshot {
            rigd_up: true,
            devices: [
                dev(
                    "0000:03:00.0",
                    0,
                    &["0000:02:00.0", "0000:01:00.0", "0000:00:01.0"],
                ),
                dev(
                    "0000:04:00.0",
                    0,
                    &["0000:02:01.0", "0000:01:00.0", "0000:00:01.0"],
                ),
                dev("0000:41:00.0", 0, &["0000:40:01.0"]),
                dev("0000:81:00.0", 1, &["0000:80:01.0"]),
            ]
            .into_iter()
            .collect(),
        }
    }

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_pair_under_one_switch_is_preferred() {
        let s = snapshot();
        let all = ids(&[
            "0000:81:00.0",
            "0000:41:00.0",
            "0000:04:00.0",
            "0000:03:00.0",
        ]);
        assert_eq!(
            prefer(&s, &all, &[], 2),
            ids(&["0000:03:00.0", "0000:04:00.0"])
        );
        // Three: the switch pair and then the same NUMA node.
        assert_eq!(
            prefer(&s, &all, &[], 3),
            ids(&["0000:03:00.0", "0000:04:00.0", "0000:41:00.0"])
        );
    }

    #[test]
    fn must_include_comes_first_and_its_neighbour_next() {
        let s = snapshot();
        let all = ids(&[
            "0000:81:00.0",
            "0000:41:00.0",
            "0000:04:00.0",
            "0000:03:00.0",
        ]);
        let got = prefer(&s, &all, &ids(&["0000:04:00.0"]), 2);
        assert_eq!(got, ids(&["0000:04:00.0", "0000:03:00.0"]));
        let got = prefer(&s, &all, &ids(&["0000:81:00.0"]), 2);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], "0000:81:00.0");
    }

    #[test]
    fn unknown_ids_and_short_pools_do_not_panic() {
        let s = snapshot();
        let got = prefer(&s, &ids(&["0000:99:00.0", "0000:03:00.0"]), &[], 3);
        assert_eq!(got.len(), 2, "only two to give");
        assert!(prefer(&s, &[], &[], 1).is_empty());
    }
}
