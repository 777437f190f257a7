//! What the role gate and audit lines cost a unary RPC (docs/BENCHMARKS.md, "Roles and
//! audit on the unary RPC path"), before and after in one run: three servers in this
//! process over the fake kernel — without the gate (`service::run_ungated`: what main
//! had for client calls), with the gate and default roles (`[roles] clients` empty),
//! and with the gate and client and admin groups (the caller's groups from its
//! connection, SO_PEERGROUPS, read once when it connects; an audit line to a journal
//! socket for each admin call) — called in turn, call by call, by this binary re-run as
//! a non-root uid (`setpriv`), so the policy takes its real path rather than root's
//! shortcut. Medians, p99 and min of each.
//!
//! Needs root (to run the client as another uid). Run pinned, e.g.:
//!
//! ```text
//! taskset -c 1 cargo bench -p rig-client --bench gate
//! ```

use std::{
    os::unix::{fs::PermissionsExt, net::UnixDatagram},
    path::{Path, PathBuf},
    process::Command,
    sync::Arc,
    time::{Duration, Instant},
};

use rig_proto::v1 as pb;
use rigd::{
    config::Config,
    rig::Rig,
    service,
    sys::sysfs::FakeKernel,
    testing::{FakeDevice, FakeSysfs},
};

const GPU: &str = "0000:03:00.0";
const ADMIN_GID: u32 = 4950;
const CLIENT_GID: u32 = 4951;
const N: usize = 4000;

type BoxError = Box<dyn std::error::Error>;

fn main() -> Result<(), BoxError> {
    if !std::env::args().any(|a| a == "--bench") {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if let Some(sockets) = std::env::var_os("RIG_GATE_SOCKETS") {
        return runtime.block_on(client(
            sockets
                .to_string_lossy()
                .split(',')
                .map(PathBuf::from)
                .collect(),
        ));
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("gate bench: needs root to run the client as another uid; skipped");
        return Ok(());
    }
    runtime.block_on(parent())
}

/// One server: its own fake tree with the GPU held (sysfs mode), its own config.
async fn server(
    dir: &Path,
    name: &str,
    gated: bool,
    roles: bool,
) -> Result<(PathBuf, tokio::task::JoinHandle<()>), BoxError> {
    let root = dir.join(name);
    let fake = FakeSysfs::new(&root.join("sys"))?;
    fake.add(
        &FakeDevice::new(GPU, 0x10de, 0x2335, 0x030200)
            .with_bar64(0, 0x1040_0200_0000, 16 << 20, true)
            .with_driver("nvidia")
            .in_group(7),
    )?;
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = root.join("pci.ids");
    config.paths.state_dir = root.join("state");
    config.paths.dev = root.join("dev");
    config.paths.group_file = Some(dir.join("group"));
    config.paths.proc = PathBuf::from("/proc");
    config.take.allow_sysfs_mode = true;
    config.audit.journal_socket = dir.join("journal.socket");
    config.roles.admins = vec!["rigadm".into()];
    if roles {
        config.roles.clients = vec!["rig".into()];
    }
    let socket = root.join("rigd.sock");
    let bound = service::socket::bind(&socket, None)?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))?;
    bound.listener.set_nonblocking(true)?;
    let listener = tokio::net::UnixListener::from_std(bound.listener.try_clone()?)?;
    let kernel = FakeKernel::new(fake.root(), &["nvidia", "vfio-pci"]);
    let (rig, _) = Rig::with_sysfs(&config, Arc::new(kernel));
    let rig = Arc::new(rig);
    let task = tokio::spawn(async move {
        let never = std::future::pending::<()>();
        let _ = if gated {
            service::run(rig, listener, never).await
        } else {
            service::run_ungated(rig, listener, never).await
        };
        drop(bound);
        drop(fake);
    });
    // Hold the GPU (root, through the library) so SetBusMaster has a device.
    let mut c = rig_client::Client::connect(&socket).await?;
    let req = rig_client::DetachRequest {
        bdf: GPU.into(),
        mode: Some(rig_client::Mode::Sysfs),
        ..Default::default()
    };
    c.detach(&req, &mut |_| {}).await?;
    Ok((socket, task))
}

async fn parent() -> Result<(), BoxError> {
    let dir = tempfile::tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))?;
    std::fs::write(
        dir.path().join("group"),
        format!("root:x:0:\nrigadm:x:{ADMIN_GID}:\nrig:x:{CLIENT_GID}:\n"),
    )?;
    // The journal: drained as fast as it comes, as journald would.
    let journal = UnixDatagram::bind(dir.path().join("journal.socket"))?;
    let lines = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&lines);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while journal.recv(&mut buf).is_ok() {
            seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    });
    for d in ["ungated", "gate", "roles"] {
        std::fs::create_dir_all(dir.path().join(d))?;
        std::fs::set_permissions(dir.path().join(d), std::fs::Permissions::from_mode(0o755))?;
    }
    let (a, _ta) = server(dir.path(), "ungated", false, false).await?;
    let (b, _tb) = server(dir.path(), "gate", true, false).await?;
    let (c, _tc) = server(dir.path(), "roles", true, true).await?;
    let sockets = format!("{},{},{}", a.display(), b.display(), c.display());
    let exe = std::env::current_exe()?;
    let out = tokio::task::spawn_blocking(move || {
        Command::new("setpriv")
            .args([
                "--reuid=4001",
                "--regid=4001",
                &format!("--groups={CLIENT_GID},{ADMIN_GID}"),
            ])
            .arg(exe)
            .arg("--bench")
            .env("RIG_GATE_SOCKETS", sockets)
            .output()
    })
    .await??;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    println!(
        "\naudit lines received by the journal socket: {}",
        lines.load(std::sync::atomic::Ordering::Relaxed)
    );
    if !out.status.success() {
        return Err("the client failed".into());
    }
    Ok(())
}

fn stats(mut d: Vec<Duration>) -> (f64, f64, f64) {
    d.sort_unstable();
    let at = |q: usize| d[((d.len() - 1) * q + 50) / 100].as_secs_f64() * 1e6;
    (at(50), at(99), at(0))
}

async fn connect(
    socket: PathBuf,
) -> Result<pb::rig_client::RigClient<tonic::transport::Channel>, BoxError> {
    let channel = tonic::transport::Endpoint::from_static("http://rigd")
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                let s = tokio::net::UnixStream::connect(socket).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(s))
            }
        }))
        .await?;
    Ok(pb::rig_client::RigClient::new(channel))
}

/// The child (uid 4001, an admin and a client by supplementary groups).
async fn client(sockets: Vec<PathBuf>) -> Result<(), BoxError> {
    let mut clients = Vec::new();
    for s in sockets {
        clients.push(connect(s).await?);
    }
    let names = [
        "without the gate (main's client path)",
        "gate, default roles",
        "gate, [roles] clients + admins (groups from the connection)",
    ];
    println!(
        "uid {} (groups from its connection: SO_PEERGROUPS), {N} calls each, servers called in turn\n",
        nix::unistd::getuid()
    );
    println!("| RPC | server | median µs | p99 µs | min µs |");
    println!("| --- | --- | --- | --- | --- |");
    let mut version = vec![Vec::with_capacity(N); clients.len()];
    for _ in 0..N {
        for (i, c) in clients.iter_mut().enumerate() {
            let t = Instant::now();
            std::hint::black_box(c.version(pb::VersionRequest {}).await?);
            version[i].push(t.elapsed());
        }
    }
    for (i, d) in version.into_iter().enumerate() {
        let (m, p, n) = stats(d);
        println!("| Rig.Version | {} | {m:.2} | {p:.2} | {n:.2} |", names[i]);
    }
    let mut master = vec![Vec::with_capacity(N); clients.len()];
    for k in 0..N {
        for (i, c) in clients.iter_mut().enumerate() {
            let t = Instant::now();
            std::hint::black_box(
                c.set_bus_master(pb::SetBusMasterRequest {
                    bdf: GPU.into(),
                    on: k % 2 == 0,
                })
                .await?,
            );
            master[i].push(t.elapsed());
        }
    }
    for (i, d) in master.into_iter().enumerate() {
        let (m, p, n) = stats(d);
        let name = match i {
            0 => names[0],
            1 => "gate + audit line, default roles",
            _ => "gate + audit line, [roles] clients + admins",
        };
        println!("| Rig.SetBusMaster | {name} | {m:.2} | {p:.2} | {n:.2} |");
    }
    Ok(())
}
