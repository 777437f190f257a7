//! Events shared between sessions, as rigd's side socket serves them on a fake RM GPU:
//! a token never given is refused, a closed handle names nothing, and a handle is
//! looked up in its own session only. (What the events order on the GPU, and the
//! exporter's end: rig-runtime's tests/shared_events.rs.)

mod dma_support;

use dma_support::Server;
use rig_client::{
    event::{EventError as SharedError, ExportedEvent, ImportedEvent},
    session::{Session, SessionErrorKind},
};
use rigd::{channels::Limits, nvrm::FakeRm};

const GPU: &str = "0000:00:06.0";

async fn serve() -> Server {
    let server = Server::start(16 << 20).await;
    server.serve_fake_gpu(GPU, FakeRm::new(), Limits::default(), 8);
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_never_given_is_refused_and_a_closed_import_is_unmapped() {
    let server = serve().await;
    let a = Session::open(&server.socket, GPU).await.expect("exporter");
    let b = Session::open(&server.socket, GPU).await.expect("importer");
    let ev = ExportedEvent::export(&a).await.expect("export");
    let mut wrong = ev.token();
    wrong[0] ^= 0xff;
    let e = ImportedEvent::import(&b, &wrong)
        .await
        .expect_err("not the token");
    assert!(
        matches!(&e, SharedError::Session(s) if s.kind() == Some(SessionErrorKind::UnknownEvent)),
        "{e}"
    );

    let imp = ImportedEvent::import(&b, &ev.token())
        .await
        .expect("import");
    let id = imp.id();
    imp.close(&b).await.expect("close");
    // Its handle is gone: a second close is refused.
    let e = b
        .call(rig_proto::v1::session_request::Body::EventClose(
            rig_proto::v1::EventClose { event: id },
        ))
        .await
        .expect_err("closed");
    assert_eq!(e.kind(), Some(SessionErrorKind::UnknownEvent), "{e}");
    // The exporter's handle names nothing in the importer's session.
    let e = b
        .call(rig_proto::v1::session_request::Body::EventClose(
            rig_proto::v1::EventClose { event: ev.id() },
        ))
        .await
        .expect_err("not b's");
    assert_eq!(e.kind(), Some(SessionErrorKind::UnknownEvent), "{e}");
    ev.close(&a).await.expect("the exporter's close");
    server.stop().await;
}
