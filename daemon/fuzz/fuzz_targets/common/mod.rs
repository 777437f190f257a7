//! What the service targets share: rigd's whole service, in this process, over the fake
//! kernel (a fake edu held in vfio mode with a pool, and a vfio-mode DMA pool behind a
//! fake IOMMU), started once per fuzzing process on a socket in a temp dir
//! (`rigd::testing::Serving`, as the client tests serve it); a raw
//! gRPC caller that sends any bytes as any method's request; and the check every
//! input ends with: rigd still answers `Version` within [`LIMIT`].
//!
//! A panic anywhere in rigd's tasks is a crash (the panic hook aborts); a call that
//! does not finish within [`LIMIT`] is a hang (this harness panics).
#![allow(dead_code, reason = "each target uses part of this")]

use std::{
    path::PathBuf,
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::Duration,
};

use bytes::{Buf, BufMut};
use hyper_util::rt::TokioIo;
use rigd::{
    config::{Config, LeaseRule},
    dma::{Backing, FakeIommu, PoolMode, PoolSpec},
    rig::Rig,
    sys::sysfs::FakeKernel,
    take::{DetachOptions, Mode},
    testing::{FakeDevice, FakeSysfs, Serving},
    vfio::FakeVfio,
};
use tonic::{
    Status,
    codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder},
    transport::Channel,
};

/// The device held (vfio mode) with a pool of its own, which clients may lease whole.
pub const DEV: &str = "0000:01:00.0";
/// A driverless function of the fake tree that nobody holds.
pub const FREE: &str = "0000:02:00.0";
/// The vfio-mode DMA pool's name.
pub const DMA_POOL: &str = "0000:03:00.0";
pub const BLOCK: u64 = 2 << 20;
/// The most one call (and the liveness check) may take.
// TIMEOUT: every handler over the fake kernel answers in milliseconds; a take-over's
// unbind waits are not scripted to hang here.
pub const LIMIT: Duration = Duration::from_secs(5);

/// Every method of rig.v1, and whether it answers with a stream.
pub const METHODS: &[(&str, bool)] = &[
    ("/rig.v1.Rig/Version", false),
    ("/rig.v1.Rig/ListDevices", false),
    ("/rig.v1.Rig/GetDevice", false),
    ("/rig.v1.Rig/Detach", true),
    ("/rig.v1.Rig/Attach", true),
    ("/rig.v1.Rig/Reset", true),
    ("/rig.v1.Rig/Resize", true),
    ("/rig.v1.Rig/Status", false),
    ("/rig.v1.Rig/ReadBar", false),
    ("/rig.v1.Rig/WriteBar", false),
    ("/rig.v1.Rig/SetBusMaster", false),
    ("/rig.v1.Dma/OpenSession", false),
    ("/rig.v1.Dma/Status", false),
    ("/rig.v1.Dma/Channels", false),
    ("/rig.v1.Queues/Status", false),
];

pub struct Harness {
    pub rt: tokio::runtime::Runtime,
    pub socket: PathBuf,
    pub side: PathBuf,
    pub rig: Arc<Rig>,
    channel: Mutex<Channel>,
    _serving: Serving,
    _dir: tempfile::TempDir,
}

/// The harness, started on first use.
pub fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(start)
}

fn start() -> Harness {
    // A panic on any of rigd's threads must end the run as a crash, not be swallowed
    // by a JoinHandle.
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        std::process::abort();
    }));
    // As rigd's own main has it (Rust's runtime ignores SIGPIPE before main; a libFuzzer
    // binary's C main does not): a write to a client that went away is EPIPE, not death.
    // Blocked here, before rigd's threads start, so that they inherit the mask.
    let mut pipe = nix::sys::signal::SigSet::empty();
    pipe.add(nix::sys::signal::Signal::SIGPIPE);
    pipe.thread_block().expect("block SIGPIPE");
    let dir = tempfile::tempdir().expect("tempdir");
    let fake = FakeSysfs::new(&dir.path().join("sys")).expect("fake sysfs");
    for (bdf, group) in [(DEV, 9), (FREE, 10), (DMA_POOL, 11)] {
        fake.add(
            &FakeDevice::new(bdf, 0x1234, 0x11e8, 0x00ff00)
                .with_bar64(0, 0xfe00_0000, 1 << 20, false)
                .in_group(group)
                .with_attr("reset_method", "bus"),
        )
        .expect("edu");
    }
    let mut config = Config::default();
    config.paths.sysfs = fake.root().to_owned();
    config.paths.pci_ids = dir.path().join("pci.ids");
    config.paths.state_dir = dir.path().join("state");
    config.paths.proc = dir.path().join("proc");
    config.paths.dev = dir.path().join("dev");
    config.dma.quota.per_uid_bytes = 8 * BLOCK;
    config.dma.quota.per_device_bytes = 8 * BLOCK;
    config.lease.allow = vec![LeaseRule {
        devices: vec![DEV.into()],
        uids: vec![nix::unistd::getuid().as_raw()],
        groups: Vec::new(),
    }];
    let kernel = FakeKernel::new(fake.root(), &["vfio-pci"]);
    let vfio = FakeVfio::new(&kernel);
    let (rig, _) = Rig::with_kernel(&config, Arc::new(kernel), Arc::new(vfio));
    let rig = Arc::new(rig);
    let opts = DetachOptions {
        mode: Mode::Vfio,
        ..DetachOptions::default()
    };
    rig.detach(DEV, opts, &mut |_| {}).expect("detach");
    for (name, mode) in [
        (DEV, PoolMode::Host),
        (DMA_POOL, PoolMode::Vfio(Arc::new(FakeIommu::typical()))),
    ] {
        let spec = PoolSpec {
            mode,
            blocks: 4,
            backing: Backing::Shmem,
            pin_threads: 1,
        };
        let pool = rig.dma().create(name, spec).expect("pool");
        assert!(pool.wait_pinned(Duration::from_secs(10)));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let socket = dir.path().join("rigd.sock");
    let serving = rt.block_on(async { Serving::start(Arc::clone(&rig), &socket, None) });
    let channel = rt.block_on(connect(&socket));
    let side = PathBuf::from(format!("{}.fd", socket.display()));
    Harness {
        rt,
        socket,
        side,
        rig,
        channel: Mutex::new(channel),
        _serving: serving,
        _dir: dir,
    }
}

/// A channel on one new connection to `path`.
async fn connect(path: &std::path::Path) -> Channel {
    let path = path.to_owned();
    tonic::transport::Endpoint::from_static("http://rigd")
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(TokioIo::new(s))
            }
        }))
        .await
        .expect("connect to rigd")
}

/// Bytes in, bytes out: the request goes to rigd exactly as given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl Codec for Raw {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = Raw;
    type Decoder = Raw;
    fn encoder(&mut self) -> Raw {
        Raw
    }
    fn decoder(&mut self) -> Raw {
        Raw
    }
}

impl Encoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for Raw {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
    }
}

impl Harness {
    fn channel(&self) -> Channel {
        self.channel
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends `body` as method `METHODS[m]`'s request; the reply (or the stream's
    /// messages), or rigd's status. A transport failure (rigd dropped the connection)
    /// or a call past [`LIMIT`] panics.
    pub fn call(&self, m: usize, body: Vec<u8>) -> Result<Vec<Vec<u8>>, Status> {
        let (name, streams) = METHODS[m % METHODS.len()];
        let channel = self.channel();
        self.rt.block_on(async move {
            let mut grpc = tonic::client::Grpc::new(channel);
            let path = http::uri::PathAndQuery::from_static(name);
            let call = async {
                grpc.ready().await.expect("rigd's connection is ready");
                if streams {
                    let mut s = grpc
                        .server_streaming(tonic::Request::new(body), path, Raw)
                        .await?
                        .into_inner();
                    let mut out = Vec::new();
                    while let Some(m) = s.message().await? {
                        out.push(m);
                    }
                    Ok(out)
                } else {
                    let r = grpc.unary(tonic::Request::new(body), path, Raw).await?;
                    Ok(vec![r.into_inner()])
                }
            };
            let r: Result<Vec<Vec<u8>>, Status> = tokio::time::timeout(LIMIT, call)
                .await
                .unwrap_or_else(|_| panic!("hang: {name} did not answer within {LIMIT:?}"));
            if let Err(s) = &r {
                assert!(
                    !is_transport(s),
                    "rigd dropped the connection on {name}: {s:?}"
                );
            }
            r
        })
    }

    /// The end of every input: rigd answers another client (a new connection).
    pub fn still_serves(&self) {
        let socket = self.socket.clone();
        self.rt.block_on(async move {
            let check = async {
                let channel = connect(&socket).await;
                let mut grpc = tonic::client::Grpc::new(channel);
                grpc.ready().await.expect("ready");
                let path = http::uri::PathAndQuery::from_static("/rig.v1.Rig/Version");
                grpc.unary(tonic::Request::new(Vec::new()), path, Raw)
                    .await
                    .expect("Version answers")
            };
            tokio::time::timeout(LIMIT, check)
                .await
                .expect("rigd answers Version within the limit");
        });
    }
}

/// Whether a status is the transport's (connection gone) rather than rigd's answer:
/// only those carry a source error; rigd's come off the wire without one.
fn is_transport(s: &Status) -> bool {
    std::error::Error::source(s).is_some()
}
