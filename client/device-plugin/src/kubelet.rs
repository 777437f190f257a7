//! The kubelet's side of one resource: this plugin's socket in the kubelet's directory,
//! registration on `kubelet.sock`, and doing both again when the kubelet restarts.
//!
//! A kubelet that starts removes every socket in its directory (ours included) and
//! makes `kubelet.sock` anew, and forgets its plugins; so the directory is watched —
//! polled every 200 ms, a stat of two paths — for `kubelet.sock` missing or replaced
//! (another inode or change time) and for our socket gone. Either way our server is stopped (its
//! ListAndWatch streams end with it), the socket bound again, and we register again.
//! A registration the kubelet refuses (another plugin has the name) or that cannot
//! reach it is logged and retried with backoff (1 s doubling to 30 s); nothing exits.

use std::{
    io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::Duration,
};

use hyper_util::rt::TokioIo;
use tokio_stream::wrappers::UnixListenerStream;

use crate::{
    pb::{self, device_plugin_server::DevicePluginServer, registration_client::RegistrationClient},
    service::Plugin,
};

/// The API version registered (constants.go `Version`).
const API_VERSION: &str = "v1beta1";
const KUBELET_SOCKET: &str = "kubelet.sock";
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// The socket file name of a resource's plugin: `rig.dev_gpu.sock`.
pub fn endpoint(kind: &str) -> String {
    format!("{}.sock", kind.replace('/', "_"))
}

/// What tells one socket file from the next at a path: device, inode and change time
/// (a socket made anew may get the inode number of the one removed just before), or
/// `None` when it is missing.
fn identity(p: &Path) -> Option<(u64, u64, i64, i64)> {
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.ctime(), m.ctime_nsec()))
}

/// Serves `plugin` and keeps it registered, forever.
pub async fn serve_forever(dir: PathBuf, plugin: Plugin) {
    let kubelet = dir.join(KUBELET_SOCKET);
    let name = endpoint(plugin.kind());
    let ours = dir.join(&name);
    let kind = plugin.kind().to_owned();
    let mut said_missing = false;
    loop {
        let Some(kubelet_id) = identity(&kubelet) else {
            if !said_missing {
                eprintln!(
                    "rig-device-plugin: {kind}: kubelet socket {} missing; waiting for the kubelet",
                    kubelet.display()
                );
                said_missing = true;
            }
            tokio::time::sleep(WATCH_EVERY).await;
            continue;
        };
        said_missing = false;
        let listener = match bind(&ours) {
            Ok(l) => l,
            Err(e) => {
                eprintln!(
                    "rig-device-plugin: {kind}: cannot listen on {}: {e}; retrying",
                    ours.display()
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let our_id = identity(&ours);
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(DevicePluginServer::new(plugin.clone()))
                .serve_with_incoming(UnixListenerStream::new(listener)),
        );
        let mut backoff = Duration::from_secs(1);
        let mut registered = false;
        let why = loop {
            if !registered {
                match register(&kubelet, &name, &kind).await {
                    Ok(()) => {
                        eprintln!(
                            "rig-device-plugin: {kind}: registered with the kubelet at {} (endpoint {name})",
                            kubelet.display()
                        );
                        registered = true;
                    }
                    Err(e) => {
                        eprintln!(
                            "rig-device-plugin: {kind}: registration at {} failed: {e}; retrying in {} s",
                            kubelet.display(),
                            backoff.as_secs()
                        );
                    }
                }
            }
            let wait = if registered { WATCH_EVERY } else { backoff };
            let deadline = tokio::time::Instant::now() + wait;
            let mut changed = None;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(WATCH_EVERY.min(wait)).await;
                changed = match identity(&kubelet) {
                    None => Some("kubelet socket missing (the kubelet stopped?)"),
                    Some(id) if id != kubelet_id => {
                        Some("kubelet socket replaced (the kubelet restarted)")
                    }
                    Some(_) if identity(&ours) != our_id => Some(
                        "our socket was removed or replaced (a kubelet restart cleans its directory)",
                    ),
                    Some(_) => None,
                };
                if changed.is_some() || server.is_finished() {
                    break;
                }
            }
            if let Some(c) = changed {
                break c;
            }
            if server.is_finished() {
                break "our gRPC server stopped";
            }
            if !registered {
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        };
        eprintln!("rig-device-plugin: {kind}: {why}; serving {name} again and re-registering");
        server.abort();
        let _ = server.await;
    }
}

/// Binds our socket, removing a stale one first.
fn bind(path: &Path) -> io::Result<tokio::net::UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    tokio::net::UnixListener::bind(path)
}

/// One Register call on the kubelet's socket.
async fn register(kubelet: &Path, endpoint: &str, kind: &str) -> Result<(), String> {
    let path = kubelet.to_owned();
    let channel = tonic::transport::Endpoint::from_static("http://kubelet")
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move {
                let s = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, io::Error>(TokioIo::new(s))
            }
        }))
        .await
        .map_err(|e| rig_client::error_line(&e))?;
    RegistrationClient::new(channel)
        .register(pb::RegisterRequest {
            version: API_VERSION.into(),
            endpoint: endpoint.into(),
            resource_name: kind.into(),
            options: Some(pb::DevicePluginOptions {
                pre_start_required: true,
                get_preferred_allocation_available: true,
            }),
        })
        .await
        .map(drop)
        .map_err(|s| match s.code() {
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded => {
                format!("the kubelet did not answer: {}", s.message())
            }
            _ => format!("the kubelet refused it: {}", s.message()),
        })
}
