//! The Python package's tests (tests/test_*.py, run by pytest) against rigd's service
//! in this process over the fake kernel: a pool of shmem blocks (`host`) and a GPU
//! served through the fake RM. The Python that runs them has the `rig` wheel and pytest
//! installed; scripts/python-test.sh makes it and passes it as RIG_PYTHON.

#[path = "../../rig-client/tests/dma_support/mod.rs"]
mod dma_support;

use std::{path::Path, time::Duration};

use dma_support::Server;
use rigd::{channels::Limits, dma::PoolMode, gpumem::Quota, nvrm::FakeRm};

const MIB: u64 = 1 << 20;
const PAGE: u64 = 2 * MIB;
const GPU: &str = "0000:00:06.0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs RIG_PYTHON, a Python with the rig wheel and pytest: scripts/python-test.sh"]
async fn the_python_packages_tests_pass_against_rigd() {
    let python = std::env::var("RIG_PYTHON").expect("RIG_PYTHON: a Python with rig and pytest");
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let server = Server::start(64 * MIB).await;
    server.shmem_pool("host", PoolMode::Host, 8);
    let _gpu = server.serve_fake_gpu(
        GPU,
        FakeRm::new(),
        Limits {
            gpu_memory: Quota {
                per_uid_bytes: 64 * PAGE,
                per_gpu_bytes: 128 * PAGE,
            },
            ..Limits::default()
        },
        4,
    );
    let mut child = tokio::process::Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(here.join("tests"))
        .env("RIG_SOCKET", &server.socket)
        .env("RIG_HOST_DEVICE", "host")
        .env("RIG_GPU_DEVICE", GPU)
        .env(
            "RIG_CUBIN",
            here.join("../cubin/tests/data/kernels.sm_90.cubin"),
        )
        .kill_on_drop(true)
        .spawn()
        .expect("run pytest");
    // TIMEOUT: the tests take seconds; a hang (a wait that never ends) fails here.
    let status = tokio::time::timeout(Duration::from_secs(300), child.wait())
        .await
        .expect("pytest finishes within 300 s")
        .expect("pytest's status");
    assert!(status.success(), "pytest failed: {status}");
    server.stop().await;
}
