//! `rigctl dma` over rigd's service with a DMA pool and a session holding a lease
//! (rig-client's `dma_support` fixture, included by path).

#[path = "../../rig-client/tests/dma_support/mod.rs"]
mod dma_support;

use dma_support::Server;
use rig_client::session::Session;
use rigd::dma::PoolMode;

const MIB: u64 = 1 << 20;
const BLOCK: u64 = 2 * MIB;

#[tokio::test]
async fn rigctl_dma_shows_pools_and_sessions_as_json() {
    let server = Server::start(64 * MIB).await;
    server.shmem_pool("host", PoolMode::Host, 3);
    let session = Session::open(&server.socket, "host").await.expect("open");
    session.lease(BLOCK).await.expect("lease");
    let socket = server.socket.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_rigctl"))
            .args([
                "--socket".as_ref(),
                socket.as_os_str(),
                "dma".as_ref(),
                "--json".as_ref(),
            ])
            .output()
            .expect("run rigctl")
    })
    .await
    .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["pools"][0]["name"], "host");
    assert_eq!(v["pools"][0]["addressing"], "none");
    assert_eq!(v["pools"][0]["leased_blocks"], 1);
    assert_eq!(v["clients"][0]["bytes"], BLOCK);
    assert_eq!(v["clients"][0]["session"], session.id().0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rigctl_dma_shows_each_clients_gpu_memory_shared_events_and_each_gpus_total() {
    use std::sync::Arc;

    use rig_client::{
        event::{ExportedEvent, ImportedEvent},
        gpumem::GpuMemory,
    };
    use rigd::{
        channels::{ChannelHost, Limits, Served},
        dma::{Backing, PoolSpec},
        nvrm::{FakeRm, Gpu},
    };

    let server = Server::start(64 * MIB).await;
    let gpu = Served::new(
        Gpu::open(FakeRm::new(), None).expect("fake GPU"),
        Limits::default(),
    );
    let pool = server
        .rig
        .serve_gpu_with(
            Arc::new(gpu) as Arc<dyn ChannelHost>,
            PoolSpec {
                mode: PoolMode::Host,
                blocks: 1,
                backing: Backing::Shmem,
                pin_threads: 1,
            },
        )
        .expect("serve the fake GPU");
    assert!(pool.wait_pinned(std::time::Duration::from_secs(20)));
    let session = Session::open(&server.socket, "0000:00:06.0")
        .await
        .expect("open");
    let _a = GpuMemory::lease(&session, 3 * BLOCK).await.expect("a");
    let _b = GpuMemory::lease(&session, BLOCK).await.expect("b");
    // An event the first session exports and a second imports.
    let other = Session::open(&server.socket, "0000:00:06.0")
        .await
        .expect("open");
    let ev = ExportedEvent::export(&session).await.expect("export");
    let imp = ImportedEvent::import(&other, &ev.token())
        .await
        .expect("import");
    let socket = server.socket.clone();
    let run = |json: bool| {
        let socket = socket.clone();
        tokio::task::spawn_blocking(move || {
            let mut args = vec!["--socket".into(), socket.into_os_string(), "dma".into()];
            if json {
                args.push("--json".into());
            }
            std::process::Command::new(env!("CARGO_BIN_EXE_rigctl"))
                .args(args)
                .output()
                .expect("run rigctl")
        })
    };

    let out = run(true).await.expect("join");
    let text = run(false).await.expect("join");

    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let me = &v["clients"][0];
    assert_eq!(me["session"], session.id().0);
    assert_eq!(me["gpu_memory_allocations"], 2);
    assert_eq!(me["gpu_memory_bytes"], 4 * BLOCK);
    let g = &v["gpu_memory"][0];
    assert_eq!(g["gpu"], "0000:00:06.0");
    assert_eq!(g["lent_bytes"], 4 * BLOCK);
    assert_eq!(g["kept_bytes"], 0);
    assert_eq!(g["per_uid_bytes"], 64u64 << 30);
    assert_eq!(g["per_gpu_bytes"], 128u64 << 30);
    assert_eq!(
        (&me["events_exported"], &me["events_imported"]),
        (&1.into(), &0.into())
    );
    let them = &v["clients"][1];
    assert_eq!(them["session"], other.id().0);
    assert_eq!(
        (&them["events_exported"], &them["events_imported"]),
        (&0.into(), &1.into())
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("GPU memory on 0000:00:06.0: 8M lent"),
        "{text}"
    );
    assert!(text.contains("Shared events"), "{text}");
    assert!(
        text.contains("1 exported") && text.contains("1 imported"),
        "{text}"
    );

    // The exporter's close: the importer holds the gone event until it closes it too.
    ev.close(&session).await.expect("close");
    let events = |out: std::process::Output| {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let n = |i: usize, k: &str| v["clients"][i][k].as_u64().expect("a count");
        [n(0, "events_exported"), n(1, "events_imported")]
    };
    assert_eq!(events(run(true).await.expect("join")), [0, 1]);
    imp.close(&other).await.expect("close");
    assert_eq!(events(run(true).await.expect("join")), [0, 0]);
    server.stop().await;
}
