//! Who may do what: the roles from `[roles]`, and the one table from each RPC and
//! side-socket request to the role it needs.
//!
//! Two roles, by group (docs/roles.md): *clients* inspect, open DMA sessions, and hold
//! queues and channels within their quotas; *admins* take, give back, reset, resize,
//! touch registers and bus mastering, and lease devices whole. Root is an admin, and an
//! admin is also a client. With no client groups configured, anyone the socket lets in
//! (`server.group`) is a client.
//!
//! Flow: `service::gate` asks [`Policy::require`] for every gRPC call before any handler
//! runs, with the call's path looked up in [`RPCS`] (a path not in it needs the admin
//! role: a new RPC is closed until it is listed); `service::dma::side` asks it for every
//! side-socket request ([`SIDE`]). Two finer checks live here too and are asked by
//! `rig`, which knows the device: whole-device leases ([`Policy::may_lease`]: an admin,
//! or a `[lease]` rule naming the device and the caller) and rings in GPU memory
//! ([`Policy::may_use_gpu_rings`]).
//!
//! Groups: a caller's primary gid (SO_PEERCRED) and its supplementary groups, not the
//! group database: a process's groups are what the kernel checks on the socket file
//! (setgroups, `newgrp`, a user added to a group who has not logged in again all differ
//! from getgrouplist). The supplementary groups are the connection's SO_PEERGROUPS
//! where the caller passes them (`*_with`: the gRPC gate and the side socket read them
//! at accept, `service::peer`): the groups the kernel captured at connect(2), so a pid
//! reused by another process cannot lend them. Without them (a kernel before 4.13, or a
//! check that knows only the credentials) they are read from `/proc/<pid>/status`
//! (`Groups:`), only when the primary gid does not decide, and kept [`GROUPS_FRESH`]
//! per (pid, uid, gid): a client's unary call must not pay a procfs read each time
//! (docs/BENCHMARKS.md). On that path a process's new groups (setgroups) count within
//! that long, and a pid reused by a process of the same uid and gid within it gets the
//! old one's groups. A peer outside rigd's pid namespace (pid 0) then has only its
//! primary gid.
//!
//! State: a `Policy` is immutable; `Rig` swaps in a new one on reload. Not here: the
//! socket's own mode and group (`service::socket`), audit lines (`service::audit`).

use std::{
    collections::HashMap,
    fmt,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use rig_sys::scm::PeerCred;

use crate::{
    config::{self, Config, ConfigError, LeaseRule},
    error::{Class, Classify, Reason},
    pci::Bdf,
};

/// A role a caller may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Client,
    Admin,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// The role, checked before the request runs.
    Role(Role),
    /// A whole-device lease: the client role to ask, then (once the device is known)
    /// the admin role or a `[lease]` rule naming the device and the caller.
    LeaseWhole,
}

impl Need {
    /// Whether the request is a privileged action (one audit line each).
    pub fn privileged(self) -> bool {
        matches!(self, Self::Role(Role::Admin) | Self::LeaseWhole)
    }

    /// The role checked before the request runs.
    pub fn gate(self) -> Role {
        match self {
            Self::Role(r) => r,
            Self::LeaseWhole => Role::Client,
        }
    }
}

const CLIENT: Need = Need::Role(Role::Client);
const ADMIN: Need = Need::Role(Role::Admin);

/// Every gRPC method rigd serves, by path, and what it needs. A test checks that it
/// lists every method of every service in proto/ and nothing else.
pub const RPCS: &[(&str, Need)] = &[
    ("/rig.v1.Rig/Version", CLIENT),
    ("/rig.v1.Rig/ListDevices", CLIENT),
    ("/rig.v1.Rig/GetDevice", CLIENT),
    ("/rig.v1.Rig/Status", CLIENT),
    ("/rig.v1.Rig/Detach", ADMIN),
    ("/rig.v1.Rig/Attach", ADMIN),
    ("/rig.v1.Rig/Reset", ADMIN),
    ("/rig.v1.Rig/Resize", ADMIN),
    ("/rig.v1.Rig/ReadBar", ADMIN),
    ("/rig.v1.Rig/WriteBar", ADMIN),
    ("/rig.v1.Rig/SetBusMaster", ADMIN),
    ("/rig.v1.Queues/Status", CLIENT),
    ("/rig.v1.Dma/OpenSession", CLIENT),
    ("/rig.v1.Dma/Status", CLIENT),
    ("/rig.v1.Dma/Channels", CLIENT),
    ("/rig.v1.Topo/Get", CLIENT),
    (
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        CLIENT,
    ),
    (
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        CLIENT,
    ),
];

/// Every side-socket request (`SessionRequest.body`, by field name) and what it needs.
/// A test checks it against the oneof in proto/rig/v1/dma.proto.
pub const SIDE: &[(&str, Need)] = &[
    ("claim", CLIENT),
    ("lease", CLIENT),
    ("release", CLIENT),
    ("channel_open", CLIENT),
    ("channel_close", CLIENT),
    ("open_queue", CLIENT),
    ("close_queue", CLIENT),
    ("lease_device", Need::LeaseWhole),
    // The holder ends its own lease (only its session's): no more than it had to lease.
    ("give_back_device", CLIENT),
    ("gpu_mem_alloc", CLIENT),
    ("gpu_mem_free", CLIENT),
    ("event_export", CLIENT),
    ("event_import", CLIENT),
    ("event_close", CLIENT),
];

/// What the gRPC method at `path` needs: [`RPCS`], or the admin role for a path not
/// listed (fail closed).
pub fn rpc_need(path: &str) -> Need {
    RPCS.iter()
        .find(|(p, _)| *p == path)
        .map_or(ADMIN, |(_, n)| *n)
}

/// What the side-socket request `field` needs ([`SIDE`]; admin when not listed).
pub fn side_need(field: &str) -> Need {
    SIDE.iter()
        .find(|(p, _)| *p == field)
        .map_or(ADMIN, |(_, n)| *n)
}

/// The short name of a gRPC path for people: `/rig.v1.Rig/Detach` → `Rig.Detach`.
pub fn method_name(path: &str) -> String {
    let tail = path.trim_start_matches('/');
    let (service, method) = tail.split_once('/').unwrap_or((tail, ""));
    let service = service.rsplit('.').next().unwrap_or(service);
    format!("{service}.{method}")
}

/// A refusal: the caller lacks the role the action needs.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{action} needs the {role} role, which {} (uid {uid} {})", granted(*.role, .admins, .clients), role_phrase(*.has))]
pub struct Refused {
    pub action: String,
    pub role: Role,
    pub uid: u32,
    /// The role the caller has, if any.
    pub has: Option<Role>,
    /// The groups that grant the admin role.
    pub admins: Vec<String>,
    /// The groups that grant the client role; `None`: anyone who may connect.
    pub clients: Option<Vec<String>>,
}

impl Classify for Refused {
    /// `NOT_ADMIN` when the admin role was needed, `NOT_CLIENT` for the client role.
    fn class(&self) -> Class {
        match self.role {
            Role::Admin => Reason::NotAdmin.into(),
            Role::Client => Reason::NotClient.into(),
        }
    }
}

fn groups_phrase(groups: &[String]) -> String {
    let named: Vec<_> = groups.iter().map(|g| format!("`{g}`")).collect();
    match named.len() {
        1 => format!("group {}", named[0]),
        _ => format!("groups {}", named.join(", ")),
    }
}

fn granted(role: Role, admins: &[String], clients: &Option<Vec<String>>) -> String {
    let mut groups = admins.to_vec();
    match (role, clients) {
        (Role::Client, None) => return "everyone who may connect has".to_owned(),
        (Role::Client, Some(c)) => groups.extend(c.iter().cloned()),
        (Role::Admin, _) => {}
    }
    if groups.is_empty() {
        return match role {
            Role::Admin => "only root has (no admin group in [roles] admins)".to_owned(),
            Role::Client => "only root has (no group in [roles] clients or admins)".to_owned(),
        };
    }
    format!("root and members of {} have", groups_phrase(&groups))
}

fn role_phrase(role: Option<Role>) -> String {
    match role {
        Some(r) => format!("has the {r} role"),
        None => "has no role".to_owned(),
    }
}

impl Refused {
    /// The groups that would grant the role, comma-separated (for ErrorInfo metadata).
    pub fn granting_groups(&self) -> String {
        let mut g = self.admins.clone();
        if self.role == Role::Client {
            g.extend(self.clients.iter().flatten().cloned());
        }
        g.join(",")
    }
}

/// A group by name, resolved to its id.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Group {
    name: String,
    gid: u32,
}

/// Why a policy could not be built strictly (a reload refuses a config with these).
#[derive(Debug, thiserror::Error)]
#[error("{what}")]
pub struct PolicyError {
    what: String,
    #[source]
    source: ConfigError,
}

/// How long a caller's supplementary groups, once read, are used without reading
/// /proc again.
// TIMEOUT: 1 s bounds how late a setgroups is seen, and turns a busy client's calls
// into one procfs read a second.
pub const GROUPS_FRESH: Duration = Duration::from_secs(1);

/// The most callers whose groups are kept; past it the cache starts afresh.
const GROUPS_KEPT: usize = 4096;

/// A caller as the cache knows it: pid, uid, gid.
type Caller = (i32, u32, u32);

/// Supplementary groups read recently, by caller, with when they were read.
#[derive(Debug, Default)]
struct GroupsCache(Mutex<HashMap<Caller, (Instant, Vec<u32>)>>);

impl GroupsCache {
    fn get(&self, c: PeerCred, proc_root: &Path) -> Vec<u32> {
        let key = (c.pid, c.uid, c.gid);
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, groups)) = map.get(&key)
            && at.elapsed() < GROUPS_FRESH
        {
            return groups.clone();
        }
        let groups = read_groups(proc_root, c.pid);
        if map.len() >= GROUPS_KEPT {
            map.clear();
        }
        map.insert(key, (Instant::now(), groups.clone()));
        groups
    }
}

/// The roles and the finer rules, groups resolved.
#[derive(Debug, Default)]
pub struct Policy {
    admins: Vec<Group>,
    /// `None`: anyone who may connect is a client.
    clients: Option<Vec<Group>>,
    lease_rules: Vec<(LeaseRule, Vec<u32>)>,
    gpu_rings: Option<Group>,
    proc_root: PathBuf,
    /// Cleared with the policy on reload.
    cache: GroupsCache,
}

impl Policy {
    /// Builds the policy of `config`. A group missing from the group file grants
    /// nothing and comes back as a warning (at start rigd goes on without it).
    pub fn new(config: &Config) -> (Self, Vec<PolicyError>) {
        let file = config.paths.group_file.as_deref();
        let mut problems = Vec::new();
        let mut resolve = |what: &str, name: &str| match config::resolve_group(name, file) {
            Ok(gid) => Some(Group {
                name: name.to_owned(),
                gid,
            }),
            Err(source) => {
                problems.push(PolicyError {
                    what: what.to_owned(),
                    source,
                });
                None
            }
        };
        let admins = config
            .server
            .admin_group
            .iter()
            .chain(&config.roles.admins)
            .filter_map(|g| resolve("Group of [roles] admins grants nothing", g))
            .collect();
        // Configured but unresolvable client groups leave the role to admins: closed,
        // not open to everyone.
        let clients = (!config.roles.clients.is_empty()).then(|| {
            config
                .roles
                .clients
                .iter()
                .filter_map(|g| resolve("Group of [roles] clients grants nothing", g))
                .collect()
        });
        let lease_rules = config
            .lease
            .allow
            .iter()
            .map(|r| {
                let gids = r
                    .groups
                    .iter()
                    .filter_map(|g| resolve("Group of a [lease] rule allows nobody", g))
                    .map(|g| g.gid)
                    .collect();
                (r.clone(), gids)
            })
            .collect();
        let gpu_rings = config.channels.gpu_rings_group.as_deref().and_then(|g| {
            resolve(
                "Only root's channels may have rings in GPU memory (channels.gpu_rings_group)",
                g,
            )
        });
        let policy = Self {
            admins,
            clients,
            lease_rules,
            gpu_rings,
            proc_root: config.paths.proc.clone(),
            cache: GroupsCache::default(),
        };
        (policy, problems)
    }

    /// As [`Policy::new`], refusing a config with any group that does not resolve.
    ///
    /// # Errors
    /// The first [`PolicyError`].
    pub fn strict(config: &Config) -> Result<Self, PolicyError> {
        let (policy, mut problems) = Self::new(config);
        match problems.drain(..).next() {
            Some(e) => Err(e),
            None => Ok(policy),
        }
    }

    /// procfs, where callers' groups are read.
    pub fn proc_root(&self) -> &Path {
        &self.proc_root
    }

    /// The role of `c`, if any.
    pub fn role_of(&self, c: PeerCred) -> Option<Role> {
        self.role_of_with(c, None)
    }

    /// As [`Policy::role_of`], with the connection's SO_PEERGROUPS where known.
    pub fn role_of_with(&self, c: PeerCred, groups: Option<&[u32]>) -> Option<Role> {
        let mut groups = Groups::new(c, self, groups);
        self.role_with(c, &mut groups)
    }

    fn role_with(&self, c: PeerCred, groups: &mut Groups<'_>) -> Option<Role> {
        if c.uid == 0 || self.admins.iter().any(|g| groups.has(g.gid)) {
            return Some(Role::Admin);
        }
        match &self.clients {
            None => Some(Role::Client),
            Some(cs) => cs.iter().any(|g| groups.has(g.gid)).then_some(Role::Client),
        }
    }

    /// Refuses `c` the `action` unless it has the `role` (an admin has both).
    ///
    /// # Errors
    /// [`Refused`], naming the role and the groups that grant it.
    pub fn require(&self, role: Role, c: PeerCred, action: &str) -> Result<Role, Refused> {
        self.require_with(role, c, None, action)
    }

    /// As [`Policy::require`], with the connection's supplementary groups
    /// (SO_PEERGROUPS) where the socket gave them; `None` reads /proc.
    ///
    /// # Errors
    /// As [`Policy::require`].
    pub fn require_with(
        &self,
        role: Role,
        c: PeerCred,
        groups: Option<&[u32]>,
        action: &str,
    ) -> Result<Role, Refused> {
        let mut groups = Groups::new(c, self, groups);
        // The common case decides without reading /proc: root, or a client call when
        // everyone who may connect is a client.
        if c.uid == 0 {
            return Ok(Role::Admin);
        }
        if role == Role::Client && self.clients.is_none() {
            return Ok(Role::Client);
        }
        let has = self.role_with(c, &mut groups);
        match has {
            Some(h) if h >= role => Ok(h),
            _ => Err(self.refusal(action, role, c.uid, has)),
        }
    }

    fn refusal(&self, action: &str, role: Role, uid: u32, has: Option<Role>) -> Refused {
        Refused {
            action: action.to_owned(),
            role,
            uid,
            has,
            admins: self.admins.iter().map(|g| g.name.clone()).collect(),
            clients: self
                .clients
                .as_ref()
                .map(|cs| cs.iter().map(|g| g.name.clone()).collect()),
        }
    }

    /// Whether `c` may lease `bdf` whole: an admin, or a `[lease]` rule naming the
    /// device and the caller's uid or one of its groups.
    pub fn may_lease(&self, c: PeerCred, bdf: Bdf) -> bool {
        let mut groups = Groups::new(c, self, None);
        if self.role_with(c, &mut groups) == Some(Role::Admin) {
            return true;
        }
        self.lease_rules.iter().any(|(rule, gids)| {
            rule.names(bdf) && (rule.uids.contains(&c.uid) || gids.iter().any(|g| groups.has(*g)))
        })
    }

    /// Whether `c`'s channels may have their rings in GPU memory: root, or a member of
    /// `[channels] gpu_rings_group`.
    pub fn may_use_gpu_rings(&self, c: PeerCred) -> bool {
        let mut groups = Groups::new(c, self, None);
        c.uid == 0 || self.gpu_rings.as_ref().is_some_and(|g| groups.has(g.gid))
    }

    /// `[channels] gpu_rings_group`'s name, for refusals.
    pub fn gpu_rings_group(&self) -> Option<&str> {
        self.gpu_rings.as_ref().map(|g| g.name.as_str())
    }

    /// The admin groups' names.
    pub fn admin_groups(&self) -> Vec<String> {
        self.admins.iter().map(|g| g.name.clone()).collect()
    }
}

/// A caller's groups: the connection's (SO_PEERGROUPS) when known, else looked up in
/// /proc at most once and only when asked.
#[derive(Debug)]
struct Groups<'a> {
    cred: PeerCred,
    policy: &'a Policy,
    known: Option<&'a [u32]>,
    supplementary: Option<Vec<u32>>,
}

impl<'a> Groups<'a> {
    fn new(cred: PeerCred, policy: &'a Policy, known: Option<&'a [u32]>) -> Self {
        Self {
            cred,
            policy,
            known,
            supplementary: None,
        }
    }

    fn has(&mut self, gid: u32) -> bool {
        if self.cred.gid == gid {
            return true;
        }
        if let Some(known) = self.known {
            return known.contains(&gid);
        }
        let (cred, policy) = (self.cred, self.policy);
        self.supplementary
            .get_or_insert_with(|| policy.cache.get(cred, &policy.proc_root))
            .contains(&gid)
    }
}

/// The supplementary groups of process `pid` (`Groups:` of /proc/<pid>/status); none
/// when they cannot be read (pid 0: a peer outside rigd's pid namespace; it exited).
pub fn read_groups(proc_root: &Path, pid: i32) -> Vec<u32> {
    if pid <= 0 {
        return Vec::new();
    }
    let Ok(text) = std::fs::read_to_string(proc_root.join(format!("{pid}/status"))) else {
        return Vec::new();
    };
    parse_groups(&text)
}

/// The ids of the `Groups:` line of a /proc status file (`parse_*`: no I/O).
pub fn parse_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|g| g.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
