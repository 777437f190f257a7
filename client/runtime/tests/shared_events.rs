//! Events shared between two sessions (CUDA's IPC events) against rigd serving a fake
//! RM GPU: the exporter's record is a release with the GPU's time into the page rigd
//! shares, the importer's channel acquires its own read-only view of it, a host wait
//! for a value nothing releases ends typed, and the exporter's end turns the
//! importer's wait into a typed error at once, never a hang. The GPU's part (a
//! release landing) is played by hand through rigd's view of the page.

mod support;

use std::time::{Duration, Instant};

use rig_client::{
    channel::Engine,
    event::{EventError as SharedError, ExportedEvent, ImportedEvent},
    session::{Session, SessionErrorKind},
};
use rig_nv::method::{self, Release, Waiting};
use rig_runtime::{
    ComputeChannel, ComputeOptions, CopyChannel, CopyOptions, HostAlloc, Runtime, RuntimeError,
    load,
};
use support::{GPU, KERNELS, fetched, gpu_writes, serve};

const SHORT: Duration = Duration::from_millis(300);

async fn runtime(f: &support::Fixture, s: &Session) -> (Runtime, rig_runtime::Kernel) {
    let mut copies = CopyChannel::open(s, CopyOptions::default())
        .await
        .expect("copy channel");
    // The "copy engine" releases the upload's two values before they are asked for.
    let sem = copies.channel().semaphore_va().get();
    gpu_writes(f, s, sem, &2u64.to_le_bytes());
    let module = load::load(s, &mut copies, &HostAlloc, KERNELS, SHORT)
        .await
        .expect("loads");
    let compute = ComputeChannel::open(
        s,
        ComputeOptions {
            arena: 256 << 10,
            timeout: SHORT,
            slots: 4,
            ..ComputeOptions::default()
        },
    )
    .await
    .expect("compute channel");
    let empty = module.kernel("empty").expect("empty");
    (
        Runtime::with(compute, copies, module).expect("runtime"),
        empty,
    )
}

fn at(words: &[u32], needle: &[u32]) -> Option<usize> {
    words.windows(needle.len()).position(|w| w == needle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sessions_event_orders_work_on_the_gpu_and_its_exporters_end_is_typed() {
    let f = serve(32).await;
    let a = Session::open(&f.server.socket, GPU)
        .await
        .expect("exporter");
    let b = Session::open(&f.server.socket, GPU)
        .await
        .expect("importer");
    let (mut ra, empty) = runtime(&f, &a).await;
    let (mut rb, theirs) = runtime(&f, &b).await;
    let mut ev = ExportedEvent::export(&a).await.expect("export");
    let imp = ImportedEvent::import(&b, &ev.token())
        .await
        .expect("import");
    assert_eq!(imp.exporter(), a.id());

    // Nothing recorded: nothing to wait for, on the GPU or the host.
    assert_eq!(rb.wait_shared(Engine::Compute, &imp).expect("wait"), 0);
    assert_eq!(rb.wait_event(&imp, SHORT).expect("no wait"), 0);

    // The exporter records behind a kernel: a release of 1 with the GPU's time into
    // its view of the page, once the engine idled, submitted at once.
    let d = ra.launch(&empty, 1, 1, 0, &[], &[]).expect("launch");
    ra.hold();
    let v = ra
        .record_shared(&mut ev, Engine::Compute, &[d])
        .expect("record");
    assert_eq!(v, 1);
    let words = fetched(&a, ra.compute().channel(), 1).concat();
    let release = method::release_with(
        ev.gpu_va(),
        1,
        Release {
            wait_idle: true,
            timestamp: true,
        },
    )
    .expect("words");
    assert!(
        at(&words, &release).is_some(),
        "the record was submitted, held or not: {words:x?}"
    );
    assert_eq!(
        imp.target(),
        1,
        "the importer reads the record as its target"
    );

    // The importer's kernel waits for it on its own channel: an acquire of its own
    // read-only view, before the launch, letting other groups run meanwhile.
    assert_eq!(rb.wait_shared(Engine::Compute, &imp).expect("wait"), 1);
    rb.launch(&theirs, 1, 1, 0, &[], &[]).expect("launch");
    let words = fetched(&b, rb.compute().channel(), 1).concat();
    let acquire = method::acquire(imp.gpu_va(), 1, Waiting::SwitchGroup).expect("words");
    assert!(
        at(&words, &acquire).is_some_and(|w| w < words.len() - 6),
        "the acquire comes before the launch: {words:x?}"
    );

    // Nothing released yet: the host wait ends typed, naming the event and the value.
    let e = rb.wait_event(&imp, SHORT).expect_err("nothing released");
    assert!(
        matches!(
            e,
            RuntimeError::Shared(SharedError::Timeout { value: 1, event, .. }) if event == imp.id()
        ),
        "{e}"
    );
    // The exporter's GPU releases 1: the wait ends, and the value is the work's.
    assert!(f.gpu.release_event(a.id(), ev.id(), 1));
    assert_eq!(rb.wait_event(&imp, SHORT).expect("released"), 1);
    assert!(imp.check(1).expect("released by the work"));

    // A second record its GPU never releases; then the exporter's process goes.
    assert_eq!(
        ra.record_shared(&mut ev, Engine::Compute, &[])
            .expect("record"),
        2
    );
    let token = ev.token();
    drop((ra, empty, ev, a));
    let started = Instant::now();
    let e = rb
        .wait_event(&imp, Duration::from_secs(10))
        .expect_err("the exporter went");
    assert!(
        matches!(
            e,
            RuntimeError::Shared(SharedError::ExporterGone {
                value: 2,
                reached: 1,
                ..
            })
        ),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the end is seen, not waited out: {:?}",
        started.elapsed()
    );
    assert!(imp.check(1).expect("1 was the work's"), "before the end");
    let (released, _) = imp.released();
    assert!(
        released.wrapping_sub(2).cast_signed() >= 0,
        "every GPU wait passes: {released}"
    );

    // The gone event imports no more.
    let c = Session::open(&f.server.socket, GPU).await.expect("third");
    let e = ImportedEvent::import(&c, &token).await.expect_err("gone");
    assert!(
        matches!(&e, SharedError::Session(s) if s.kind() == Some(SessionErrorKind::EventGone)),
        "{e}"
    );
    f.server.stop().await;
}
