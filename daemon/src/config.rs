//! rigd's configuration: `/etc/rig/rigd.toml`, read once at start, read-only afterwards.
//!
//! Every path in it can be pointed elsewhere, so tests run the daemon on a fake sysfs
//! tree and a socket in a temp dir. Unknown keys are errors that name line and column.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use crate::pci::{Bdf, BdfError};

/// The default config file.
pub const DEFAULT_PATH: &str = "/etc/rig/rigd.toml";

/// The whole file.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: Server,
    pub paths: Paths,
    pub take: Take,
    pub dma: Dma,
    pub channels: Channels,
    pub gpu_memory: GpuMemory,
    pub queue: Queue,
    pub lease: Lease,
    pub roles: Roles,
    pub audit: Audit,
    pub metrics: Metrics,
    pub log: Log,
}

/// Who has which role (`policy`, docs/roles.md): groups by name, primary or
/// supplementary groups of the caller's process. Root is always an admin; an admin is
/// also a client.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Roles {
    /// Members may inspect, open DMA sessions, and hold queues and channels within
    /// their quotas. Empty: everyone the socket lets in (`server.group`).
    pub clients: Vec<String>,
    /// Members may also take, give back, reset, resize, touch registers and bus
    /// mastering, and lease devices whole. (`server.admin_group`, the older spelling,
    /// is one more.)
    pub admins: Vec<String>,
}

/// Audit lines of privileged actions (`service::audit`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Audit {
    /// The journal's native socket; where it is missing, audit lines go to rigd's log.
    pub journal_socket: PathBuf,
}

impl Default for Audit {
    fn default() -> Self {
        Self {
            journal_socket: PathBuf::from("/run/systemd/journal/socket"),
        }
    }
}

/// Prometheus metrics (`service::metrics`), off unless `listen` is set.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Metrics {
    /// `unix:/run/rig/metrics.sock` (a socket of its own, 0660 with `server.group`'s
    /// group, else 0600) or `127.0.0.1:9464` (loopback only).
    pub listen: Option<String>,
}

/// rigd's log.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// A tracing filter: `info`, `debug`, `rigd::take=debug,info`. Unset: info. `-v`
    /// and `RUST_LOG` win over it. Re-read on reload (SIGHUP).
    pub level: Option<String>,
}

/// Whole-device leases (docs/lease.md): which callers besides root may lease a held
/// device whole — its VFIO device fd, or its `resourceN` files in sysfs mode — for as
/// long as their DMA session's side connection lives. No rule: nobody but root.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Lease {
    /// A caller may lease a device when one rule names the device (or `"*"`) and the
    /// caller's uid or one of its groups.
    pub allow: Vec<LeaseRule>,
    /// What happens to the device's DMA pool when a lease ends.
    pub pool: LeasePool,
}

/// One `[[lease.allow]]` table.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LeaseRule {
    /// PCI addresses ("0000:00:06.0"), or `"*"` for every held device.
    pub devices: Vec<String>,
    /// Users, by uid.
    pub uids: Vec<u32>,
    /// Groups, by name (primary or supplementary groups of the caller's process).
    pub groups: Vec<String>,
}

/// What a lease's end does with the device's DMA pool.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LeasePool {
    /// The pool and the other sessions on it stay; only the holder's own leases go
    /// (with its session).
    #[default]
    Keep,
    /// Every session on the device ends and the pool is made afresh (new blocks, new
    /// IOVA space): nothing the holder's device could have reached is lent again.
    Clear,
}

/// GPUs served through their own kernel driver (NVIDIA's RM): rigd makes channels and
/// lends them to clients (docs/channels.md). Each served GPU gets a DMA pool of
/// `[dma] pool_bytes` whose leases map into each session's own GPU address space.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Channels {
    /// PCI addresses ("0000:00:06.0") of RM-driven GPUs to serve, or `["all"]` for
    /// every GPU the RM drives. Empty: none.
    pub serve: Vec<String>,
    /// Channels one session may have open.
    pub per_session: usize,
    /// The largest ring one channel may have, in entries (8 bytes of pinned host
    /// memory each): a power of two up to 2^31.
    pub max_ring_entries: u64,
    /// Where sessions' copy channels run: `"auto"`, the copy engines the RM marks
    /// asynchronous (not GR's) that reach system memory; or the async copy engines
    /// (COPY0 + n) to spread sessions over, one per session; `[]`: in the session's
    /// GR0 group, behind its kernels.
    pub copy_engines: CopyEngines,
    /// Members of this group (and root) may have their channels' rings, USERD and
    /// pushbuffers in GPU memory, mapped through BAR1: the shortest round trip, but
    /// a client's mapping outlives rigd's free of it (docs/channels.md). Unset: only
    /// root's clients.
    pub gpu_rings_group: Option<String>,
    /// The most GPU memory one such channel window may take (ring, USERD and
    /// pushbuffer, rounded up to a power of two).
    pub gpu_ring_bytes: u64,
    /// How many windows rigd keeps for one uid (reused for that uid only).
    pub gpu_rings_per_uid: usize,
    /// Seconds a uid is refused new channels after the RM had to end one of its
    /// kernels because a block would not be switched out beside another session's work
    /// (Xid 109; docs/channels.md, "GPU time"). 0: never refused.
    pub switch_timeout_penalty_s: u64,
    /// Each session's GR0 channel group's timeslice, in µs: how long its kernels run
    /// before the RM switches them out (between blocks) for another session's work.
    /// 0: the RM's default (1024 µs).
    pub timeslice_us: u64,
}

impl Default for Channels {
    fn default() -> Self {
        Self {
            serve: Vec::new(),
            per_session: 8,
            max_ring_entries: 1 << 20,
            copy_engines: CopyEngines::Auto,
            gpu_rings_group: None,
            gpu_ring_bytes: 4 << 20,
            gpu_rings_per_uid: 32,
            switch_timeout_penalty_s: 60,
            timeslice_us: 0,
        }
    }
}

/// GPU memory lent to sessions on the GPUs `[channels] serve` names (docs/compute.md):
/// what may be held at once, in bytes, each a multiple of 2 MiB (the page it is lent
/// in). A uid's CPU-mapped GPU memory counts until rigd exits (docs/compute.md, "CPU
/// views"). 0 lends none.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct GpuMemory {
    /// By one uid's sessions together, on one GPU.
    pub per_uid_bytes: u64,
    /// By all sessions together, on one GPU.
    pub per_gpu_bytes: u64,
    /// Fresh 2 MiB pages rigd keeps allocated ahead on each GPU, lent to no one until a
    /// session leases one page: its lease is then one map, not an allocation and a map
    /// (docs/compute.md, "Spare pages"). Not charged to anyone; read at start. 0: none.
    pub spare_pages: u32,
}

impl Default for GpuMemory {
    fn default() -> Self {
        // The H200 has 141 GB (140 GiB as the RM counts it). 128 GiB for clients leaves
        // 12 GiB to the RM's own reservations, the channels' context buffers and windows
        // rigd makes, and CUDA programs beside rigd on the same GPU; half of it per uid
        // lets two users hold their share at once and no one client starve the others.
        Self {
            per_uid_bytes: 64 << 30,
            per_gpu_bytes: 128 << 30,
            spare_pages: 4,
        }
    }
}

/// Where and to whom rigd listens.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    /// The Unix socket, unless systemd hands one over.
    pub socket: PathBuf,
    /// Members of this group may connect: the socket is made 0660 root:`group`.
    /// Unset: only root may connect (0600).
    pub group: Option<String>,
    /// Members of this group may take, reset and give back devices (with root).
    pub admin_group: Option<String>,
}

impl Default for Server {
    fn default() -> Self {
        Self {
            socket: PathBuf::from("/run/rig/rigd.sock"),
            group: None,
            admin_group: None,
        }
    }
}

/// Files and trees rigd reads.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Paths {
    /// Root of sysfs (`bus/pci/devices` under it).
    pub sysfs: PathBuf,
    /// Debian's pci.ids (package `pci.ids`); names are omitted when it is missing.
    pub pci_ids: PathBuf,
    /// A group file (`/etc/group` format) to read groups from instead of the system's
    /// name service. Unset (the default), groups are looked up through NSS
    /// (`getgrnam_r`): /etc/group, LDAP, SSSD, whatever nsswitch.conf names. Set it for
    /// a statically linked rigd, which cannot load NSS modules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group_file: Option<PathBuf>,
    /// rigd's journal and state.
    pub state_dir: PathBuf,
    /// Vendor firmware files.
    pub firmware: PathBuf,
    /// procfs (holders of device nodes, mounts).
    pub proc: PathBuf,
    /// devtmpfs (`/dev/vfio`, `/dev/kfd`).
    pub dev: PathBuf,
}

/// How rig takes devices.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Take {
    /// Allow sysfs mode (driverless, BARs through `resourceN`), for hosts without an
    /// IOMMU: DMA is then unconfined, so it must be asked for here.
    pub allow_sysfs_mode: bool,
    /// Seconds an unbind may take before rig stops waiting (a holder keeps it busy).
    pub unbind_timeout_s: u64,
}

impl Default for Take {
    fn default() -> Self {
        Self {
            allow_sysfs_mode: false,
            unbind_timeout_s: 10,
        }
    }
}

/// DMA memory: pools of pinned 2 MiB hugepages lent to clients (docs/dma.md).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Dma {
    /// Bytes in each device's pool: a non-zero multiple of 2 MiB.
    pub pool_bytes: u64,
    /// Raise vm.nr_hugepages when a pool needs more free pages than there are.
    /// Off: a shortfall is an error that says how many pages are missing.
    pub reserve_hugepages: bool,
    /// Pools made at start with no device ("host" mode: no device address), by name.
    pub host_pools: Vec<String>,
    /// Threads that fault in (and so clear) a new pool's pages; 0: one per CPU.
    pub pin_threads: usize,
    pub quota: DmaQuota,
}

impl Default for Dma {
    fn default() -> Self {
        Self {
            pool_bytes: 256 << 20,
            reserve_hugepages: false,
            host_pools: Vec::new(),
            pin_threads: 0,
            quota: DmaQuota::default(),
        }
    }
}

/// What one uid may hold at once.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct DmaQuota {
    /// Bytes across all devices.
    pub per_uid_bytes: u64,
    /// Bytes from any one device's pool.
    pub per_device_bytes: u64,
}

impl Default for DmaQuota {
    fn default() -> Self {
        Self {
            per_uid_bytes: 1 << 30,
            per_device_bytes: 1 << 30,
        }
    }
}

impl Default for Paths {
    fn default() -> Self {
        Self {
            sysfs: PathBuf::from("/sys"),
            pci_ids: PathBuf::from("/usr/share/misc/pci.ids"),
            group_file: None,
            state_dir: PathBuf::from("/var/lib/rig"),
            firmware: PathBuf::from("/lib/firmware"),
            proc: PathBuf::from("/proc"),
            dev: PathBuf::from("/dev"),
        }
    }
}

/// Hardware queues lent to clients (the `queue` stage).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Queue {
    /// Queues one client session may hold on one device.
    pub per_client: u32,
    /// The most commands one lent queue may have in flight.
    pub max_depth: u32,
}

impl Default for Queue {
    fn default() -> Self {
        Self {
            per_client: 4,
            // NVMe allows 65536 entries; 1024 keeps one client's rings within a 2 MiB
            // block (64 KiB of submission entries, 16 KiB of completions).
            max_depth: 1024,
        }
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("Failed to read config file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "Group `{group}` (server.group, server.admin_group or channels.gpu_rings_group) is not in {database}"
    )]
    UnknownGroup { group: String, database: String },
    #[error("Failed to look group `{group}` up in the system's group database (NSS)")]
    GroupLookup {
        group: String,
        #[source]
        source: nix::Error,
    },
    #[error("{path}: lease.allow rule {rule}: `{device}` is neither a PCI address nor \"*\"")]
    LeaseDevice {
        path: PathBuf,
        rule: usize,
        device: String,
        #[source]
        source: BdfError,
    },
    #[error("{path}: lease.allow rule {rule} names no devices, or neither uids nor groups")]
    LeaseRuleEmpty { path: PathBuf, rule: usize },
    #[error("{path}: log.level `{level}` is not a tracing filter")]
    LogLevel {
        path: PathBuf,
        level: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    #[error(
        "{path}: metrics.listen `{listen}` is neither unix:PATH nor a 127.0.0.1 (or [::1]) address and port"
    )]
    MetricsListen { path: PathBuf, listen: String },
    #[error("{path}: gpu_memory.{key} = {value} is not a multiple of 2 MiB (2097152)")]
    GpuMemoryPage {
        path: PathBuf,
        key: &'static str,
        value: u64,
    },
}

impl Config {
    /// Loads `path`. A missing file at the default path gives the defaults; a missing
    /// file named explicitly is an error.
    ///
    /// # Errors
    /// [`ConfigError::Read`] and [`ConfigError::Parse`].
    pub fn load(path: &Path, explicit: bool) -> Result<Self, ConfigError> {
        match fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !explicit => Ok(Self::default()),
            Err(source) => Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses the text of a config file; `path` only names it in errors.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] with the 1-based line and column of the fault.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            ConfigError::Parse {
                path: path.to_owned(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })?;
        config.lease.check(path)?;
        if let Some(level) = &config.log.level {
            tracing_subscriber::EnvFilter::try_new(level).map_err(|source| {
                ConfigError::LogLevel {
                    path: path.to_owned(),
                    level: level.clone(),
                    source,
                }
            })?;
        }
        config.gpu_memory.check(path)?;
        if let Some(listen) = &config.metrics.listen
            && MetricsListen::parse(listen).is_none()
        {
            return Err(ConfigError::MetricsListen {
                path: path.to_owned(),
                listen: listen.clone(),
            });
        }
        Ok(config)
    }
}

/// Where metrics are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsListen {
    Unix(PathBuf),
    Tcp(std::net::SocketAddr),
}

impl MetricsListen {
    /// `unix:PATH`, or a loopback `address:port`; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        if let Some(p) = s.strip_prefix("unix:") {
            return (p.starts_with('/')).then(|| Self::Unix(PathBuf::from(p)));
        }
        let addr: std::net::SocketAddr = s.parse().ok()?;
        addr.ip().is_loopback().then_some(Self::Tcp(addr))
    }
}

/// `[channels] copy_engines`: `"auto"` or a list of copy engine numbers (COPY0 + n).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CopyEngines {
    /// The RM's asynchronous copy engines that reach system memory
    /// (docs/hardware/nvidia-channels.md, "Which copy engine").
    #[default]
    Auto,
    /// These, one per session in turn; none: the session's GR0 group.
    Listed(Vec<u8>),
}

/// What the file may hold for [`CopyEngines`].
#[derive(Deserialize)]
#[serde(untagged)]
enum CopyEnginesText {
    Word(String),
    List(Vec<u8>),
}

impl<'de> Deserialize<'de> for CopyEngines {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match CopyEnginesText::deserialize(d)? {
            CopyEnginesText::Word(w) if w == "auto" => Ok(Self::Auto),
            CopyEnginesText::Word(w) => Err(serde::de::Error::custom(format!(
                "copy_engines: \"{w}\" is neither \"auto\" nor a list of copy engine numbers"
            ))),
            CopyEnginesText::List(v) => Ok(Self::Listed(v)),
        }
    }
}

impl Serialize for CopyEngines {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Auto => s.serialize_str("auto"),
            Self::Listed(v) => v.serialize(s),
        }
    }
}

impl GpuMemory {
    /// Checks that both quotas are whole 2 MiB pages.
    ///
    /// # Errors
    /// [`ConfigError::GpuMemoryPage`].
    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        for (key, value) in [
            ("per_uid_bytes", self.per_uid_bytes),
            ("per_gpu_bytes", self.per_gpu_bytes),
        ] {
            if !value.is_multiple_of(rig_model::addr::layout::GPU_PAGE) {
                return Err(ConfigError::GpuMemoryPage {
                    path: path.to_owned(),
                    key,
                    value,
                });
            }
        }
        Ok(())
    }
}

impl Lease {
    /// Checks every rule: addresses that parse (or `"*"`), and someone to allow.
    ///
    /// # Errors
    /// [`ConfigError::LeaseDevice`], [`ConfigError::LeaseRuleEmpty`] (rules count from 1).
    fn check(&self, path: &Path) -> Result<(), ConfigError> {
        for (i, rule) in self.allow.iter().enumerate() {
            let n = i + 1;
            if rule.devices.is_empty() || (rule.uids.is_empty() && rule.groups.is_empty()) {
                return Err(ConfigError::LeaseRuleEmpty {
                    path: path.to_owned(),
                    rule: n,
                });
            }
            for d in rule.devices.iter().filter(|d| *d != "*") {
                d.parse::<Bdf>()
                    .map_err(|source| ConfigError::LeaseDevice {
                        path: path.to_owned(),
                        rule: n,
                        device: d.clone(),
                        source,
                    })?;
            }
        }
        Ok(())
    }
}

impl LeaseRule {
    /// Whether this rule names `bdf` (by address or `"*"`).
    pub fn names(&self, bdf: Bdf) -> bool {
        self.devices
            .iter()
            .any(|d| d == "*" || d.parse::<Bdf>().is_ok_and(|b| b == bdf))
    }
}

fn line_col(text: &str, byte: usize) -> (usize, usize) {
    let before = text.get(..byte).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Looks a group's id up: in `group_file` (`/etc/group` format) when one is given,
/// else through the system's name service (`getgrnam_r`, so LDAP and SSSD groups too).
///
/// # Errors
/// [`ConfigError::Read`] if the file cannot be read, [`ConfigError::GroupLookup`] if
/// NSS fails, [`ConfigError::UnknownGroup`] if the group is in neither.
pub fn resolve_group(name: &str, group_file: Option<&Path>) -> Result<u32, ConfigError> {
    let Some(group_file) = group_file else {
        return match nix::unistd::Group::from_name(name) {
            Ok(Some(g)) => Ok(g.gid.as_raw()),
            Ok(None) => Err(ConfigError::UnknownGroup {
                group: name.to_owned(),
                database: "the system's group database (NSS)".to_owned(),
            }),
            Err(source) => Err(ConfigError::GroupLookup {
                group: name.to_owned(),
                source,
            }),
        };
    };
    let text = fs::read_to_string(group_file).map_err(|source| ConfigError::Read {
        path: group_file.to_owned(),
        source,
    })?;
    group_entries(&text)
        .find(|(n, _, _)| *n == name)
        .map(|(_, gid, _)| gid)
        .ok_or_else(|| ConfigError::UnknownGroup {
            group: name.to_owned(),
            database: group_file.display().to_string(),
        })
}

/// `(name, gid, members)` of each well-formed line of a group file.
pub fn group_entries(text: &str) -> impl Iterator<Item = (&str, u32, Vec<&str>)> {
    text.lines().filter_map(|line| {
        let mut f = line.split(':');
        let name = f.next()?;
        let _password = f.next()?;
        let gid = f.next()?.parse().ok()?;
        let members = f
            .next()
            .unwrap_or("")
            .split(',')
            .filter(|m| !m.is_empty())
            .collect();
        Some((name, gid, members))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_example_parses_to_the_defaults_plus_its_group() {
        let text = include_str!("../../systemd/rigd.toml");
        let c = Config::parse(text, Path::new("systemd/rigd.toml")).expect("example parses");
        let mut want = Config::default();
        want.server.group = Some("rig".to_owned());
        assert_eq!(c, want);
    }

    /// Every key of every section, as `(section, key)`, of `v` (dotted sections for
    /// nested tables).
    fn keys(section: &str, v: &toml::Value, out: &mut Vec<(String, String)>) {
        let Some(t) = v.as_table() else { return };
        for (k, v) in t {
            if v.is_table()
                || v.as_array()
                    .is_some_and(|a| a.first().is_some_and(toml::Value::is_table))
            {
                let inner = if section.is_empty() {
                    k.clone()
                } else {
                    format!("{section}.{k}")
                };
                keys(&inner, v, out);
            } else {
                out.push((section.to_owned(), k.clone()));
            }
        }
    }

    #[test]
    fn shipped_example_names_every_key_with_its_section() {
        // README and docs/systemd.md promise every key in systemd/rigd.toml: set, or
        // shown commented out ("# key = …") under its (perhaps commented) header.
        let text = include_str!("../../systemd/rigd.toml");
        let defaults = toml::Value::try_from(Config::default()).expect("defaults serialize");
        let mut all = Vec::new();
        keys("", &defaults, &mut all);
        assert!(all.len() > 30, "{all:?}");
        let mut missing = Vec::new();
        for (section, key) in &all {
            // An array of tables with none by default ([[lease.allow]]): its example.
            if defaults
                .get(section.as_str())
                .and_then(|s| s.get(key))
                .is_some_and(|v| v.as_array().is_some_and(Vec::is_empty))
                && text.contains(&format!("[[{section}.{key}]]"))
            {
                continue;
            }
            let header = [format!("[{section}]"), format!("# [{section}]")];
            let Some(start) = text
                .lines()
                .position(|l| header.iter().any(|h| l.trim() == h))
            else {
                missing.push(format!("[{section}]"));
                continue;
            };
            let found = text
                .lines()
                .skip(start + 1)
                .take_while(|l| {
                    let l = l.trim_start_matches("# ").trim();
                    !l.starts_with('[') || l.starts_with("[[")
                })
                .any(|l| l.trim_start_matches("# ").starts_with(&format!("{key} = ")));
            if !found {
                missing.push(format!("{section}.{key}"));
            }
        }
        assert!(missing.is_empty(), "not in systemd/rigd.toml: {missing:?}");
    }

    #[test]
    fn copy_engines_are_auto_by_default_a_list_or_empty_and_nothing_else() {
        let parse = |v: &str| {
            Config::parse(
                &format!("[channels]\ncopy_engines = {v}\n"),
                Path::new("t.toml"),
            )
            .map(|c| c.channels.copy_engines)
        };
        assert_eq!(Config::default().channels.copy_engines, CopyEngines::Auto);
        assert_eq!(parse("\"auto\"").expect("auto"), CopyEngines::Auto);
        assert_eq!(
            parse("[2, 5]").expect("list"),
            CopyEngines::Listed(vec![2, 5])
        );
        assert_eq!(parse("[]").expect("empty"), CopyEngines::Listed(vec![]));
        let e = parse("\"fast\"").expect_err("a word that is not auto");
        assert!(e.to_string().contains("neither \"auto\" nor a list"), "{e}");
        assert!(parse("[300]").is_err(), "engine numbers are bytes");
        // Written back as it was read.
        let t = toml::Value::try_from(Config::default()).expect("serialize");
        assert_eq!(t["channels"]["copy_engines"].as_str(), Some("auto"));
    }

    #[test]
    fn empty_file_gives_defaults() {
        let c = Config::parse("", Path::new("t.toml")).expect("empty is valid");
        assert_eq!(c, Config::default());
        assert_eq!(c.server.socket, Path::new("/run/rig/rigd.sock"));
    }

    #[test]
    fn every_path_can_be_overridden() {
        let c = Config::parse(
            "[server]\nsocket = \"/tmp/s\"\ngroup = \"rig\"\n[paths]\nsysfs = \"/tmp/sys\"\npci_ids = \"/x\"\ngroup_file = \"/g\"\nstate_dir = \"/st\"\nfirmware = \"/fw\"\n",
            Path::new("t.toml"),
        )
        .expect("valid");
        assert_eq!(c.paths.sysfs, Path::new("/tmp/sys"));
        assert_eq!(c.server.group.as_deref(), Some("rig"));
        assert_eq!(c.paths.firmware, Path::new("/fw"));
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let e = Config::parse(
            "[server]\nsocket = \"/s\"\nsockett = 1\n",
            Path::new("r.toml"),
        )
        .expect_err("typo");
        let msg = e.to_string();
        assert!(
            msg.starts_with("r.toml:3:1: unknown field `sockett`"),
            "{msg}"
        );
    }

    #[test]
    fn wrong_type_names_line_and_column() {
        let e = Config::parse("[paths]\nsysfs = 3\n", Path::new("r.toml")).expect_err("type");
        assert!(e.to_string().starts_with("r.toml:2:9:"), "{e}");
    }

    #[test]
    fn missing_default_file_is_defaults_but_explicit_is_an_error() {
        let p = Path::new("/nonexistent/rig/rigd.toml");
        assert_eq!(Config::load(p, false).expect("defaults"), Config::default());
        assert!(matches!(
            Config::load(p, true),
            Err(ConfigError::Read { .. })
        ));
    }

    #[test]
    fn groups_resolve_from_the_file_and_unknown_ones_are_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("group");
        fs::write(&f, "root:x:0:\nbroken line\nrig:x:977:alice,bob\n").expect("write");
        assert_eq!(resolve_group("rig", Some(&f)).expect("present"), 977);
        let e = resolve_group("nope", Some(&f)).expect_err("absent");
        assert!(e.to_string().contains("`nope`"), "{e}");
        assert!(e.to_string().contains(&f.display().to_string()), "{e}");
    }

    #[test]
    fn without_a_group_file_groups_come_from_nss() {
        // root is in every system's group database; this name in none.
        assert_eq!(resolve_group("root", None).expect("root"), 0);
        let e = resolve_group("rig-no-such-group-anywhere", None).expect_err("absent");
        assert!(e.to_string().contains("(NSS)"), "{e}");
        assert_eq!(Config::default().paths.group_file, None);
    }

    #[test]
    fn dma_section_defaults_to_no_pools_and_one_gib_quotas() {
        let c = Config::parse("", Path::new("t.toml")).expect("empty is valid");
        assert!(c.dma.host_pools.is_empty());
        assert!(!c.dma.reserve_hugepages);
        assert_eq!(c.dma.pool_bytes, 256 << 20);
        assert_eq!(c.dma.quota.per_uid_bytes, 1 << 30);
        assert_eq!(c.dma.quota.per_device_bytes, 1 << 30);
    }

    #[test]
    fn dma_section_sets_pools_reservation_and_quotas() {
        let c = Config::parse(
            "[dma]\npool_bytes = 33554432\nreserve_hugepages = true\nhost_pools = [\"host\"]\npin_threads = 2\n[dma.quota]\nper_uid_bytes = 8388608\nper_device_bytes = 4194304\n",
            Path::new("t.toml"),
        )
        .expect("valid");
        assert_eq!(c.dma.pool_bytes, 32 << 20);
        assert!(c.dma.reserve_hugepages);
        assert_eq!(c.dma.host_pools, ["host"]);
        assert_eq!(c.dma.pin_threads, 2);
        assert_eq!(c.dma.quota.per_uid_bytes, 8 << 20);
        assert_eq!(c.dma.quota.per_device_bytes, 4 << 20);
    }

    #[test]
    fn unknown_dma_key_names_line_and_column() {
        let e = Config::parse("[dma.quota]\nper_uid = 1\n", Path::new("r.toml")).expect_err("typo");
        assert!(
            e.to_string()
                .starts_with("r.toml:2:1: unknown field `per_uid`"),
            "{e}"
        );
    }

    #[test]
    fn roles_audit_metrics_and_log_parse_and_bad_ones_are_refused() {
        let c = Config::parse(
            "[roles]\nclients = [\"rig\"]\nadmins = [\"rigadm\"]\n[audit]\njournal_socket = \"/tmp/j\"\n[metrics]\nlisten = \"127.0.0.1:9464\"\n[log]\nlevel = \"debug\"\n",
            Path::new("t.toml"),
        )
        .expect("valid");
        assert_eq!(c.roles.clients, ["rig"]);
        assert_eq!(c.roles.admins, ["rigadm"]);
        assert_eq!(c.audit.journal_socket, Path::new("/tmp/j"));
        assert_eq!(c.log.level.as_deref(), Some("debug"));
        assert_eq!(
            MetricsListen::parse("unix:/run/rig/metrics.sock"),
            Some(MetricsListen::Unix("/run/rig/metrics.sock".into()))
        );
        assert!(
            MetricsListen::parse("0.0.0.0:9464").is_none(),
            "not loopback"
        );
        assert!(MetricsListen::parse("unix:rel").is_none(), "relative");
        let e = Config::parse("[metrics]\nlisten = \"10.0.0.1:1\"\n", Path::new("r.toml"))
            .expect_err("not loopback");
        assert!(matches!(e, ConfigError::MetricsListen { .. }), "{e}");
        let e = Config::parse("[log]\nlevel = \"rigd=loud\"\n", Path::new("r.toml"))
            .expect_err("bad level");
        assert!(
            e.to_string().starts_with("r.toml: log.level `rigd=loud`"),
            "{e}"
        );
        assert_eq!(
            Config::default().audit.journal_socket,
            Path::new("/run/systemd/journal/socket")
        );
    }

    #[test]
    fn gpu_memory_quotas_default_for_an_h200_and_must_be_whole_pages() {
        let c = Config::parse("", Path::new("t.toml")).expect("empty is valid");
        assert_eq!(
            (c.gpu_memory.per_uid_bytes, c.gpu_memory.per_gpu_bytes),
            (64 << 30, 128 << 30)
        );
        let c = Config::parse(
            "[gpu_memory]\nper_uid_bytes = 4194304\nper_gpu_bytes = 0\n",
            Path::new("t.toml"),
        )
        .expect("valid");
        assert_eq!(
            (c.gpu_memory.per_uid_bytes, c.gpu_memory.per_gpu_bytes),
            (4 << 20, 0)
        );
        let e = Config::parse("[gpu_memory]\nper_gpu_bytes = 4096\n", Path::new("r.toml"))
            .expect_err("not a page");
        assert!(
            matches!(
                e,
                ConfigError::GpuMemoryPage {
                    key: "per_gpu_bytes",
                    value: 4096,
                    ..
                }
            ),
            "{e}"
        );
        let e = Config::parse("[gpu_memory]\nper_session = 1\n", Path::new("r.toml"))
            .expect_err("typo");
        assert!(
            e.to_string().starts_with("r.toml:2:1: unknown field"),
            "{e}"
        );
    }

    #[test]
    fn lease_section_defaults_to_nobody_and_a_kept_pool() {
        let c = Config::parse("", Path::new("t.toml")).expect("empty is valid");
        assert!(c.lease.allow.is_empty());
        assert_eq!(c.lease.pool, LeasePool::Keep);
    }

    #[test]
    fn lease_rules_parse_devices_uids_groups_and_the_pool_policy() {
        let c = Config::parse(
            "[lease]\npool = \"clear\"\n[[lease.allow]]\ndevices = [\"0000:01:00.0\"]\nuids = [1000]\n[[lease.allow]]\ndevices = [\"*\"]\ngroups = [\"rig\"]\n",
            Path::new("t.toml"),
        )
        .expect("valid");
        assert_eq!(c.lease.pool, LeasePool::Clear);
        let b = |s: &str| s.parse::<Bdf>().expect("address");
        assert!(c.lease.allow[0].names(b("0000:01:00.0")));
        assert!(!c.lease.allow[0].names(b("0000:00:06.0")));
        assert!(c.lease.allow[1].names(b("0000:00:06.0")));
        assert_eq!(c.lease.allow[1].groups, ["rig"]);
    }

    #[test]
    fn a_lease_rule_with_a_bad_address_or_nobody_is_refused_by_number() {
        let e = Config::parse(
            "[[lease.allow]]\ndevices = [\"0000:01:00.0\", \"01:33.0\"]\nuids = [1]\n",
            Path::new("r.toml"),
        )
        .expect_err("bad address");
        assert!(
            matches!(&e, ConfigError::LeaseDevice { rule: 1, device, .. } if device == "01:33.0"),
            "{e}"
        );
        assert!(
            e.to_string()
                .starts_with("r.toml: lease.allow rule 1: `01:33.0`"),
            "{e}"
        );
        let e = Config::parse(
            "[[lease.allow]]\ndevices = [\"*\"]\nuids = [1]\n[[lease.allow]]\ndevices = [\"*\"]\n",
            Path::new("r.toml"),
        )
        .expect_err("nobody");
        assert!(
            matches!(e, ConfigError::LeaseRuleEmpty { rule: 2, .. }),
            "{e}"
        );
        let e =
            Config::parse("[lease]\npool = \"wipe\"\n", Path::new("r.toml")).expect_err("policy");
        assert!(e.to_string().starts_with("r.toml:2:8:"), "{e}");
    }
}
