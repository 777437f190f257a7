//! rigd's service on a socket of a test's own, served until the test stops it: the
//! piece every end-to-end test of rig-client starts its rigd with (the `Rig` each
//! builds is its own: fake kernel, pools, config).

use std::{path::Path, sync::Arc, time::Duration};

use tokio::{sync::oneshot, task::JoinHandle};

use crate::{rig::Rig, service};

/// `service::run` on a bound socket, in a task of the current tokio runtime.
#[derive(Debug)]
pub struct Serving {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Serving {
    /// Binds `socket` (its group `gid`, if given) and serves `rig` on it; the socket
    /// file goes when the service ends.
    ///
    /// # Panics
    /// When the socket cannot be bound, or (in the task) when the service fails.
    pub fn start(rig: Arc<Rig>, socket: &Path, gid: Option<u32>) -> Self {
        let bound = service::socket::bind(socket, gid).expect("bind");
        bound.listener.set_nonblocking(true).expect("nonblocking");
        let listener = tokio::net::UnixListener::from_std(bound.listener.try_clone().expect("dup"))
            .expect("tokio listener");
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let shutdown = async {
                let _ = rx.await;
            };
            service::run(rig, listener, shutdown).await.expect("serve");
            drop(bound);
        });
        Self {
            stop: Some(tx),
            task,
        }
    }

    /// Signals the service to stop and waits up to `limit` for its task: the outer
    /// error is the time running out, the inner one the task's panic.
    pub async fn stop(
        mut self,
        limit: Duration,
    ) -> Result<Result<(), tokio::task::JoinError>, tokio::time::error::Elapsed> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        tokio::time::timeout(limit, &mut self.task).await
    }
}
