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
