//! Every RPC × role over the real socket: rigd's service on a temp socket over the fake
//! kernel, called by this same test binary re-run as another uid with other groups
//! (`setpriv`, util-linux, as root: CI runs tests as root), once per role — an admin
//! (by a supplementary group), a client (by its primary group), and a caller the
//! socket lets in but who has no role. Each child calls every method of every service
//! in proto/ and prints one line per call; the parent checks who was refused, the
//! refusals' reasons, role and groups, and the audit lines rigd sent to a fake journal
//! socket. `rigctl` run as a client shows the person the same refusal.

use std::{
    collections::BTreeMap,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
};

use rig_proto::v1 as pb;
use rigd::{
    config::Config,
    rig::Rig,
    sys::sysfs::FakeKernel,
    testing::{FakeDevice, FakeJournal, FakeSysfs, JournalEntry, Serving},
};
use tonic_types::StatusExt;

const GPU: &str = "0000:03:00.0";
/// Groups of the temp group file: the socket's, the client role's, the admin role's.
const SOCK_GID: u32 = 4952;
const CLIENT_GID: u32 = 4951;
const ADMIN_GID: u32 = 4950;

/// The methods a child calls, in order (admin ones in an order that works: take first,
/// give back last).
const CALLS: &[&str] = &[
    "Rig.Version",
    "Rig.ListDevices",
    "Rig.GetDevice",
    "Rig.Status",
    "Queues.Status",
    "Dma.OpenSession",
    "Dma.Status",
    "Dma.Channels",
    "Rig.Detach",
    "Rig.ReadBar",
    "Rig.WriteBar",
    "Rig.SetBusMaster",
    "Rig.Reset",
    "Rig.Resize",
    "Rig.Attach",
];

const ADMIN_ONLY: &[&str] = &[
    "Rig.Detach",
    "Rig.ReadBar",
    "Rig.WriteBar",
    "Rig.SetBusMaster",
    "Rig.Reset",
    "Rig.Resize",
    "Rig.Attach",
];

fn tree(root: &Path) -> FakeSysfs {
    let fake = FakeSysfs::new(root).expect("fake sysfs");
    let mut gpu = FakeDevice::new(GPU, 0x10de, 0x2335, 0x030200)
        .with_bar64(0, 0x1040_0200_0000, 16 << 20, true)
        .with_bar64(2, 0x1000_0000_0000, 256 << 30, true)
        .with_cap_pointer(0x60)
        .with_express(0x60, 0xb0, 0, (5, 16), (5, 16))
        .with_bytes(0x100, &0x0001_0015u32.to_le_bytes())
        .with_bytes(
            0x104,
            &((10..=18).map(|n| 1u32 << (n + 4)).sum::<u32>()).to_le_bytes(),
        )
        .with_bytes(0x108, &(2u32 | (1 << 5) | (18 << 8)).to_le_bytes())
        .with_driver("nvidia")
        .in_group(7)
        .with_attr("reset_method", "flr bus");
    gpu.resize_files = vec![2];
    fake.add(&gpu).expect("gpu");
    fake
}

type Entry = JournalEntry;

struct World {
    dir: tempfile::TempDir,
    socket: PathBuf,
    /// What the fake journal received, read as it comes (its queue is short).
    journal: FakeJournal,
    serving: Serving,
}

async fn start() -> World {
    let dir = tempfile::tempdir().expect("tempdir");
    // Other uids must reach the socket inside.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let fake = tree(&dir.path().join("sys"));
    let groups = dir.path().join("group");
    std::fs::write(
        &groups,
        format!("root:x:0:\nrigadm:x:{ADMIN_GID}:\nrig:x:{CLIENT_GID}:\nrigsock:x:{SOCK_GID}:\n"),
    )
    .expect("group file");
    let journal_path = dir.path().join("journal.socket");
    let journal = FakeJournal::bind(&journal_path).expect("fake journal");
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.dev = dir.path().join("dev");
    config.paths.group_file = Some(groups);
    // The real procfs: audit lines read the callers' names there. Their supplementary
    // groups come from the connections (SO_PEERGROUPS, `service::peer`).
    config.paths.proc = PathBuf::from("/proc");
    config.take.allow_sysfs_mode = true;
    config.roles.admins = vec!["rigadm".into()];
    config.roles.clients = vec!["rig".into()];
    config.audit.journal_socket = journal_path;
    let socket = dir.path().join("rigd.sock");
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "vfio-pci"]);
    let (rig, _) = Rig::with_sysfs(&config, Arc::new(kernel));
    let serving = Serving::start(Arc::new(rig), &socket, Some(SOCK_GID));
    World {
        dir,
        socket,
        journal,
        serving,
    }
}

impl World {
    /// The child's lines, `method → outcome`, run as `uid` with primary `gid` and
    /// supplementary `groups`.
    fn run_as(&self, uid: u32, gid: u32, groups: &[u32]) -> BTreeMap<String, String> {
        let groups: Vec<String> = groups.iter().map(u32::to_string).collect();
        let out = Command::new("setpriv")
            .arg(format!("--reuid={uid}"))
            .arg(format!("--regid={gid}"))
            .arg(format!("--groups={}", groups.join(",")))
            .arg(std::env::current_exe().expect("test binary"))
            .args([
                "--exact",
                "child_calls_every_rpc",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("RIG_ROLES_SOCKET", &self.socket)
            .output()
            .expect("setpriv runs (util-linux)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "child uid {uid}: {}\n{stdout}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
            .lines()
            .filter_map(|l| l.split_once("CALL ").map(|(_, r)| r))
            .filter_map(|l| l.split_once(' '))
            .map(|(m, o)| (m.to_owned(), o.to_owned()))
            .collect()
    }

    /// The entries received since the last call (rigd sends each before its reply;
    /// the reader thread gets 100 ms to catch up).
    fn audit_lines(&self) -> Vec<Entry> {
        std::thread::sleep(std::time::Duration::from_millis(100));
        self.journal.take()
    }

    async fn stop(self) {
        let _ = self.serving.stop(std::time::Duration::from_secs(10)).await;
        drop(self.dir);
    }
}

/// `ok`, or the status's ErrorInfo reason (or code when it has none) and, for a role
/// refusal, its metadata `role`/`groups`.
fn outcome(s: &tonic::Status) -> String {
    match s.get_details_error_info() {
        Some(i) if i.reason == "NOT_ADMIN" || i.reason == "NOT_CLIENT" => format!(
            "{} role={} groups={} | {}",
            i.reason,
            i.metadata.get("role").map_or("", String::as_str),
            i.metadata.get("groups").map_or("", String::as_str),
            s.message()
        ),
        Some(i) => i.reason,
        None => format!("{:?}", s.code()),
    }
}

fn unary<T>(r: Result<tonic::Response<T>, tonic::Status>) -> String {
    match r {
        Ok(_) => "ok".to_owned(),
        Err(s) => outcome(&s),
    }
}

async fn streamed(
    r: Result<tonic::Response<tonic::Streaming<pb::Progress>>, tonic::Status>,
) -> String {
    let mut stream = match r {
        Ok(s) => s.into_inner(),
        Err(s) => return outcome(&s),
    };
    loop {
        match stream.message().await {
            Ok(Some(_)) => {}
            Ok(None) => return "ok".to_owned(),
            Err(s) => return outcome(&s),
        }
    }
}

/// The child: runs only under `run_as` (RIG_ROLES_SOCKET set), calls every RPC.
#[tokio::test]
async fn child_calls_every_rpc() {
    let Some(socket) = std::env::var_os("RIG_ROLES_SOCKET") else {
        return;
    };
    let socket = PathBuf::from(socket);
    let path = socket.clone();
    let channel = tonic::transport::Endpoint::from_static("http://rigd")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await
        .expect("connect");
    let mut rig = pb::rig_client::RigClient::new(channel.clone());
    let mut queues = pb::queues_client::QueuesClient::new(channel.clone());
    let mut dma = pb::dma_client::DmaClient::new(channel);
    let bdf = GPU.to_owned();
    for call in CALLS {
        let o = match *call {
            "Rig.Version" => unary(rig.version(pb::VersionRequest {}).await),
            "Rig.ListDevices" => unary(rig.list_devices(pb::ListDevicesRequest::default()).await),
            "Rig.GetDevice" => unary(
                rig.get_device(pb::GetDeviceRequest { bdf: bdf.clone() })
                    .await,
            ),
            "Rig.Status" => unary(rig.status(pb::StatusRequest {}).await),
            "Queues.Status" => unary(queues.status(pb::QueueStatusRequest {}).await),
            "Dma.OpenSession" => unary(
                dma.open_session(pb::DmaOpenRequest {
                    device: "no-such-pool".into(),
                })
                .await,
            ),
            "Dma.Status" => unary(dma.status(pb::DmaStatusRequest {}).await),
            "Dma.Channels" => unary(dma.channels(pb::DmaChannelsRequest {}).await),
            "Rig.Detach" => {
                streamed(
                    rig.detach(pb::DetachRequest {
                        bdf: bdf.clone(),
                        mode: pb::TakeMode::Sysfs.into(),
                        ..Default::default()
                    })
                    .await,
                )
                .await
            }
            "Rig.ReadBar" => unary(
                rig.read_bar(pb::ReadBarRequest {
                    bdf: bdf.clone(),
                    bar: 0,
                    offset: 0,
                    width_bits: 32,
                    count: 1,
                })
                .await,
            ),
            "Rig.WriteBar" => unary(
                rig.write_bar(pb::WriteBarRequest {
                    bdf: bdf.clone(),
                    bar: 0,
                    offset: 0x40,
                    width_bits: 32,
                    value: 7,
                })
                .await,
            ),
            "Rig.SetBusMaster" => unary(
                rig.set_bus_master(pb::SetBusMasterRequest {
                    bdf: bdf.clone(),
                    on: false,
                })
                .await,
            ),
            "Rig.Reset" => {
                streamed(
                    rig.reset(pb::ResetRequest {
                        bdf: bdf.clone(),
                        method: 0,
                    })
                    .await,
                )
                .await
            }
            "Rig.Resize" => {
                streamed(
                    rig.resize(pb::ResizeRequest {
                        bdf: bdf.clone(),
                        bar: 2,
                        ..Default::default()
                    })
                    .await,
                )
                .await
            }
            "Rig.Attach" => {
                streamed(rig.attach(pb::AttachRequest { bdf: bdf.clone() }).await).await
            }
            other => panic!("no call for {other}"),
        };
        println!("CALL {call} {o}");
    }
}

fn refused(o: &str) -> bool {
    o.starts_with("NOT_ADMIN") || o.starts_with("NOT_CLIENT")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_rpc_is_allowed_or_refused_by_role_and_every_privileged_call_is_audited() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to run children as other uids (CI runs tests as root)");
        return;
    }
    let w = start().await;
    // A caller the socket lets in (its group) who has no role.
    let outsider = tokio::task::block_in_place(|| w.run_as(4003, 4003, &[SOCK_GID]));
    // A client by its primary group; the socket by a supplementary one.
    let client = tokio::task::block_in_place(|| w.run_as(4002, CLIENT_GID, &[SOCK_GID]));
    let after_client = w.audit_lines();
    // An admin by a supplementary group only.
    let admin = tokio::task::block_in_place(|| w.run_as(4001, 4001, &[SOCK_GID, ADMIN_GID]));
    for (name, got) in [
        ("outsider", &outsider),
        ("client", &client),
        ("admin", &admin),
    ] {
        let methods: Vec<&str> = got.keys().map(String::as_str).collect();
        let mut want: Vec<&str> = CALLS.to_vec();
        want.sort_unstable();
        assert_eq!(methods, want, "{name} called every RPC");
    }
    for (m, o) in &outsider {
        let want = if ADMIN_ONLY.contains(&m.as_str()) {
            "NOT_ADMIN role=admin groups=rigadm | "
        } else {
            "NOT_CLIENT role=client groups=rigadm,rig | "
        };
        assert!(o.starts_with(want), "outsider {m}: {o}");
        assert!(o.contains("(uid 4003 has no role)"), "outsider {m}: {o}");
    }
    for (m, o) in &client {
        if ADMIN_ONLY.contains(&m.as_str()) {
            assert!(
                o.starts_with("NOT_ADMIN role=admin groups=rigadm | "),
                "client {m}: {o}"
            );
            assert!(
                o.ends_with(&format!(
                    "{m} needs the admin role, which root and members of group `rigadm` have (uid 4002 has the client role)"
                )),
                "client {m}: {o}"
            );
        } else {
            assert!(!refused(o), "client {m}: {o}");
        }
    }
    for (m, o) in &admin {
        assert!(!refused(o), "admin {m}: {o}");
    }
    assert_eq!(admin["Rig.Detach"], "ok");
    assert_eq!(admin["Rig.Attach"], "ok");
    assert_eq!(
        client["Dma.OpenSession"], "NO_POOL",
        "allowed, then no such pool"
    );

    // Audit: a line per refusal (15 + 7), then one per privileged call of the admin.
    assert_eq!(
        after_client.len(),
        CALLS.len() + ADMIN_ONLY.len(),
        "{after_client:#?}"
    );
    for l in &after_client {
        assert_eq!(l["RIG_OUTCOME"], "denied", "{l:?}");
        assert!(l["MESSAGE_ID"] == rigd::audit::MESSAGE_ID);
    }
    let client_lines: Vec<_> = after_client
        .iter()
        .filter(|l| l["RIG_UID"] == "4002")
        .collect();
    assert_eq!(client_lines.len(), ADMIN_ONLY.len());
    assert!(
        client_lines
            .iter()
            .all(|l| l["RIG_ROLE"] == "client" && l["RIG_REASON"] == "NOT_ADMIN")
    );
    let admin_lines = w.audit_lines();
    let actions: Vec<&str> = admin_lines
        .iter()
        .map(|l| l["RIG_ACTION"].as_str())
        .collect();
    assert_eq!(
        actions, ADMIN_ONLY,
        "one line per privileged call, in order"
    );
    for l in &admin_lines {
        assert_eq!(l["RIG_UID"], "4001");
        assert_eq!(l["RIG_GID"], "4001");
        assert_eq!(l["RIG_ROLE"], "admin");
        assert_eq!(l["RIG_DEVICE"], GPU, "{l:?}");
        assert!(
            !l["RIG_COMM"].is_empty(),
            "the caller's name from /proc: {l:?}"
        );
        assert!(l["RIG_PID"].parse::<i32>().is_ok_and(|p| p > 0), "{l:?}");
        assert!(l["RIG_DURATION_US"].parse::<u64>().is_ok(), "{l:?}");
        let o = &admin[&l["RIG_ACTION"]];
        let want = if o == "ok" { "ok" } else { "failed" };
        assert_eq!(l["RIG_OUTCOME"], want, "{l:?} vs the caller's {o}");
        if o != "ok" {
            assert_eq!(&l["RIG_REASON"], o, "the caller's reason: {l:?}");
        }
    }
    w.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rigctl_shows_a_client_the_refusal_with_the_role_and_the_group() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to run rigctl as another uid");
        return;
    }
    let w = start().await;
    let out = tokio::task::block_in_place(|| {
        Command::new("setpriv")
            .args([
                "--reuid=4002",
                &format!("--regid={CLIENT_GID}"),
                &format!("--groups={SOCK_GID}"),
            ])
            .arg(env!("CARGO_BIN_EXE_rigctl"))
            .arg("--socket")
            .arg(&w.socket)
            .args(["master", GPU, "off"])
            .output()
            .expect("setpriv rigctl")
    });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "Rig.SetBusMaster needs the admin role, which root and members of group `rigadm` have (uid 4002 has the client role)"
        ),
        "{stderr}"
    );
    let lines = w.audit_lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["RIG_ACTION"], "Rig.SetBusMaster");
    assert_eq!(lines[0]["RIG_OUTCOME"], "denied");
    assert_eq!(lines[0]["RIG_COMM"], "rigctl");
    w.stop().await;
}
