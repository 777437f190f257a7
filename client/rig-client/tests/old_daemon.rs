//! A daemon older than this client: one that lacks the methods it calls (here, a gRPC
//! server on a temp socket with no services, which answers every method with
//! `Unimplemented`). `Client::connect` asks nothing, so the first call finds out.

use rig_client::{Client, ClientError};
use tokio_stream::wrappers::UnixListenerStream;

#[tokio::test]
async fn a_daemon_without_the_called_method_is_reported_too_old() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("rigd.sock");
    let listener = tokio::net::UnixListener::bind(&socket).expect("bind");
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::default())
            .serve_with_incoming(UnixListenerStream::new(listener)),
    );

    let mut client = Client::connect(&socket)
        .await
        .expect("connect asks nothing");
    let listed = client
        .list_devices(false)
        .await
        .expect_err("no such method");
    let asked = client.version().await.expect_err("no Version either");

    for e in [listed, asked] {
        assert!(
            matches!(
                e,
                ClientError::DaemonTooOld {
                    daemon: 0,
                    needed: 1,
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains("rigd.sock is too old"), "{e}");
    }
    server.abort();
}
