//! The gRPC client of rigd's main socket: [`Client`], its connection and the errors a
//! call can end in (here), and its calls, one file per concern: `devices` (the listing,
//! one device's decode, the topology), `take` (detach, attach, reset, resize, status),
//! `regs` (BAR registers, bus mastering), `reports` (what rigd lends: DMA pools,
//! channels, queues). The types those calls return live with their subject (`model`,
//! `take`, `regs`, `dma`, `channel`, `queue`); only the calls are here, so one `impl
//! Client` per concern and no other module adds to it.
//!
//! Not here: the side socket and everything lent through it (`session` and its peers).

mod devices;
mod regs;
mod reports;
mod take;

use std::{
    io,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use hyper_util::rt::TokioIo;
use rig_proto::v1::{self as pb, rig_client::RigClient, topo_client::TopoClient};
use tonic::{Code, transport::Channel};

use crate::{Version, convert, take::ArgError};

/// Where rigd listens unless told otherwise.
pub const DEFAULT_SOCKET: &str = "/run/rig/rigd.sock";

/// What a client call can fail with. Each message is one line meant for a person.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("No rigd at {path}: start it with `systemctl start rigd`, or `rigd --socket {path}`")]
    NoDaemon { path: PathBuf },
    #[error("rigd is not running: {path} is a stale socket nobody listens on")]
    NotListening { path: PathBuf },
    #[error("Permission denied on {path}: {hint}")]
    PermissionDenied { path: PathBuf, hint: String },
    #[error("Failed to connect to {path}")]
    Connect {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("Failed to open a gRPC channel on {path}")]
    Channel {
        path: PathBuf,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("rigd at {path} is too old: it speaks API {daemon}, this client needs {needed}")]
    DaemonTooOld {
        path: PathBuf,
        daemon: u32,
        needed: u32,
    },
    /// The daemon answered with an error; `message` is its one-line reason, `info`
    /// the same for programs (see [`ClientError::error_info`]).
    #[error("{message}")]
    Rpc {
        code: Code,
        message: String,
        info: Option<ErrorInfo>,
    },
    /// The daemon answered with something this client cannot read: a newer or
    /// garbled reply (the source says which field).
    #[error("rigd sent a reply this client cannot read")]
    Reply {
        #[from]
        source: rig_proto::ConvertError,
    },
    /// A person's text names no take-over option ("magic" for a mode); refused here,
    /// before anything is sent.
    #[error(transparent)]
    Argument(#[from] ArgError),
}

impl ClientError {
    pub(crate) fn rpc(s: tonic::Status) -> Self {
        Self::Rpc {
            code: s.code(),
            info: ErrorInfo::of(&s),
            message: s.message().to_owned(),
        }
    }

    /// What rigd's error says to programs, so they need not parse its message: `None`
    /// for errors rigd did not send (no daemon, a refused argument) and for statuses
    /// without rig's details (a daemon older than them, or one tonic itself made).
    pub fn error_info(&self) -> Option<&ErrorInfo> {
        match self {
            Self::Rpc { info, .. } => info.as_ref(),
            _ => None,
        }
    }

    /// The stable code of rigd's error (`"NO_DEVICE"`, `"QUOTA"`; docs/errors.md).
    pub fn reason(&self) -> Option<&str> {
        self.error_info().map(|i| i.reason.as_str())
    }
}

/// The typed details of one of rigd's error statuses: its `google.rpc.ErrorInfo` in
/// domain [`ERROR_DOMAIN`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ErrorInfo {
    /// A stable UPPER_SNAKE code (docs/errors.md lists them).
    pub reason: String,
    /// The device the error concerns: a PCI address, or a DMA pool's device name.
    pub device: Option<String>,
    /// The step that failed (a take-over's last reported step, or the error's own).
    pub step: Option<String>,
}

/// The `domain` of rigd's ErrorInfo details.
pub const ERROR_DOMAIN: &str = "rig.dev";

impl ErrorInfo {
    /// The details of `s`, if it carries an ErrorInfo of rig's domain.
    pub fn of(s: &tonic::Status) -> Option<Self> {
        use tonic_types::StatusExt;
        let mut info = s.get_details_error_info()?;
        if info.domain != ERROR_DOMAIN {
            return None;
        }
        Some(Self {
            reason: info.reason,
            device: info.metadata.remove("device"),
            step: info.metadata.remove("step"),
        })
    }
}

/// A connection to rigd.
#[derive(Debug, Clone)]
pub struct Client {
    inner: RigClient<Channel>,
    topo: TopoClient<Channel>,
    /// The connection itself, for the other services' clients (`dma`, `channel`,
    /// `queue` read their reports through it).
    channel: Channel,
    path: PathBuf,
}

impl Client {
    /// Connects to the daemon on `path`. It asks nothing yet: a daemon older than
    /// a method this client calls answers `Unimplemented`, which becomes
    /// [`ClientError::DaemonTooOld`] (a Version round trip before every command
    /// cost each `rigctl` call ~5 ms in the disposable machine).
    ///
    /// # Errors
    /// [`ClientError::NoDaemon`], [`ClientError::NotListening`],
    /// [`ClientError::PermissionDenied`], or the transport error.
    pub async fn connect(path: impl AsRef<Path>) -> Result<Self, ClientError> {
        let path = path.as_ref().to_owned();
        let stream = tokio::net::UnixStream::connect(&path)
            .await
            .map_err(|e| diagnose(&path, e))?;
        // The first connection is the diagnosed one; tonic reconnects through the same
        // path if it ever needs to.
        let mut first = Some(stream);
        let reconnect = path.clone();
        let channel = tonic::transport::Endpoint::from_static("http://rigd")
            .connect_with_connector(tower::service_fn(move |_| {
                let taken = first.take();
                let path = reconnect.clone();
                async move {
                    let s = match taken {
                        Some(s) => s,
                        None => tokio::net::UnixStream::connect(path).await?,
                    };
                    Ok::<_, io::Error>(TokioIo::new(s))
                }
            }))
            .await
            .map_err(|source| ClientError::Channel {
                path: path.clone(),
                source,
            })?;
        Ok(Self {
            inner: RigClient::new(channel.clone()),
            topo: TopoClient::new(channel.clone()),
            channel,
            path,
        })
    }

    /// The daemon's version and API, after checking that it speaks this client's.
    ///
    /// # Errors
    /// [`ClientError::DaemonTooOld`], or [`ClientError::Rpc`].
    pub async fn version(&mut self) -> Result<Version, ClientError> {
        let reply = match self.inner.version(pb::VersionRequest {}).await {
            Ok(r) => r.into_inner(),
            // Versions came with API 1: a daemon without them is older.
            Err(s) if s.code() == Code::Unimplemented => return Err(self.too_old(0)),
            Err(s) => return Err(ClientError::rpc(s)),
        };
        if reply.api_version < rig_proto::API_VERSION {
            return Err(self.too_old(reply.api_version));
        }
        Ok(convert::version(reply))
    }

    /// The connection, for a service client of another module.
    pub(crate) fn channel(&self) -> Channel {
        self.channel.clone()
    }

    fn too_old(&self, daemon: u32) -> ClientError {
        ClientError::DaemonTooOld {
            path: self.path.clone(),
            daemon,
            needed: rig_proto::API_VERSION,
        }
    }

    /// A reply's message, or the error its status means: a method the daemon lacks
    /// (`Unimplemented`) means a daemon older than this client, which is then asked
    /// which API it speaks; one that speaks this API but predates the method (methods
    /// are added within an API) is named with its version.
    pub(crate) async fn reply<T>(
        &mut self,
        r: Result<tonic::Response<T>, tonic::Status>,
    ) -> Result<T, ClientError> {
        match r {
            Ok(r) => Ok(r.into_inner()),
            Err(s) if s.code() == Code::Unimplemented => Err(match self.version().await {
                Ok(v) if v.api >= rig_proto::API_VERSION => ClientError::Rpc {
                    code: s.code(),
                    info: None,
                    message: format!(
                        "rigd {} does not offer this call: it is older than this client (rig-client {})",
                        v.daemon,
                        env!("CARGO_PKG_VERSION")
                    ),
                },
                Ok(v) => self.too_old(v.api),
                Err(e) => e,
            }),
            Err(s) => Err(ClientError::rpc(s)),
        }
    }
}

/// An error and its causes on one line, joined by ": " (what rigctl and the probes
/// print for a failure).
pub fn error_line(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Turns a failed connect into the error a person can act on.
pub(crate) fn diagnose(path: &Path, e: io::Error) -> ClientError {
    let path = path.to_owned();
    match e.kind() {
        io::ErrorKind::NotFound => ClientError::NoDaemon { path },
        io::ErrorKind::ConnectionRefused => ClientError::NotListening { path },
        io::ErrorKind::PermissionDenied => {
            let hint = socket_group(&path).map_or_else(
                || "ask an administrator for access to rigd's socket".to_owned(),
                |g| format!("members of group `{g}` may connect (usermod -aG {g} $USER, then log in again)"),
            );
            ClientError::PermissionDenied { path, hint }
        }
        _ => ClientError::Connect { path, source: e },
    }
}

/// The name of the group that owns the socket, through the system's name service
/// (getgrgid_r: /etc/group, LDAP, SSSD).
fn socket_group(path: &Path) -> Option<String> {
    let gid = std::fs::metadata(path).ok()?.gid();
    let group = nix::unistd::Group::from_gid(nix::unistd::Gid::from_raw(gid)).ok()??;
    Some(group.name)
}
