//! rigctl's exit codes, the one table of them ([`Exit`]), and what an error prints:
//! numbered lines on stderr for a person, or under `--json` one object on stdout
//! ([`ErrorJson`]) for a program. The code is chosen from rigd's typed details
//! (`ErrorInfo.reason`, docs/errors.md), else from the gRPC code, else from the
//! client's own error (no daemon, a refused socket); the man page (`after_long_help`,
//! [`TABLE`]) and docs/rigctl.md carry the same table.

use std::error::Error;

use rig_client::{ClientError, session::SessionError};
use serde::Serialize;
use tonic::Code;

/// What rigctl's exit status says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done.
    Ok = 0,
    /// Any failure not below.
    Failure = 1,
    /// The command line is wrong (clap's usage errors), or rigd refused an argument as
    /// malformed (INVALID_ARGUMENT: `BAD_ADDRESS`, `BAR_SIZE_UNSUPPORTED`, …).
    Usage = 2,
    /// rigd is not there: no socket, nobody listening, the connection failed or broke
    /// (UNAVAILABLE), or a rigd too old for this rigctl.
    Unreachable = 3,
    /// Refused for who the caller is: the socket's permissions, or a role
    /// (`NOT_ADMIN`, `NOT_CLIENT`, `LEASE_NOT_ALLOWED`, … PERMISSION_DENIED).
    Permission = 4,
    /// No such device, or none rig holds (`NO_DEVICE`, `NOT_HELD`, `NO_POOL`, …
    /// NOT_FOUND).
    NotFound = 5,
    /// The device is busy or someone else has it (`BUSY`, `LOCKED`, `ALREADY_HELD`,
    /// `REFUSED` by the preflight's holders, `FOREIGN_VFIO`, `LEASED`, …).
    Busy = 6,
    /// A wait ran out (`UNBIND_TIMEOUT`, DEADLINE_EXCEEDED, a hook's wait).
    TimedOut = 7,
    /// A hardware or kernel step failed (`STEP_FAILED`, `VFIO`, `RESET_FAILED`,
    /// `UNBIND_STUCK`, `WRONG_DRIVER`, `QUEUE_DEVICE`, …): the step is named.
    Hardware = 8,
}

/// The table, as the man page's EXIT STATUS and `rigctl --help` show it.
pub const TABLE: &str = "\
Exit status:
  0  done
  1  any other failure
  2  usage: a wrong command line, or an argument rigd refused as malformed
  3  rigd unreachable: no socket, nobody listening, the connection broke, too old
  4  permission: the socket's mode, or a role rigd requires (the refusal names it)
  5  not found: no such device, or none rig holds
  6  busy: another operation, process, lease or holder has the device
  7  timed out: an unbind or a wait ran out
  8  a hardware or kernel step failed (the step is named)
With --json an error is one object on stdout: {\"error\": {\"exit\", \"kind\",
\"outcome\", \"reason\", \"device\", \"step\", \"code\", \"message\", \"causes\"}}
(docs/rigctl-json.md).";

impl Exit {
    /// All of them, in order (the tests walk the table).
    #[cfg(test)]
    pub const ALL: [Self; 9] = [
        Self::Ok,
        Self::Failure,
        Self::Usage,
        Self::Unreachable,
        Self::Permission,
        Self::NotFound,
        Self::Busy,
        Self::TimedOut,
        Self::Hardware,
    ];

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The word `--json` names it by.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failure => "failure",
            Self::Usage => "usage",
            Self::Unreachable => "unreachable",
            Self::Permission => "permission",
            Self::NotFound => "not_found",
            Self::Busy => "busy",
            Self::TimedOut => "timed_out",
            Self::Hardware => "hardware",
        }
    }

    /// The code of one of rigd's reasons (docs/errors.md); `None` for a reason that
    /// has no code of its own (then the gRPC code decides).
    pub fn of_reason(reason: &str) -> Option<Self> {
        Some(match reason {
            "NOT_ADMIN"
            | "NOT_CLIENT"
            | "SYSFS_MODE_NOT_ALLOWED"
            | "NO_PEER_CREDENTIALS"
            | "LEASE_NOT_ALLOWED"
            | "SYSFS_PERMISSION_DENIED"
            | "GPU_RINGS_REFUSED" => Self::Permission,
            "NO_DEVICE" | "NOT_HELD" | "NO_POOL" | "NO_BAR" | "UNKNOWN_QUEUE" | "UNKNOWN_LEASE"
            | "UNKNOWN_CHANNEL" | "NOT_LEASED" => Self::NotFound,
            "BUSY"
            | "LOCKED"
            | "ALREADY_HELD"
            | "REFUSED"
            | "FOREIGN_VFIO"
            | "LEASED"
            | "LEASE_IN_USE"
            | "LEASE_KEPT"
            | "HELD_ACROSS_RESTART"
            | "FUNCTION_BUSY"
            | "DRIVER_BOUND" => Self::Busy,
            "UNBIND_TIMEOUT" => Self::TimedOut,
            "UNBIND_STUCK"
            | "STEP_FAILED"
            | "VFIO"
            | "WRONG_DRIVER"
            | "RESET_FAILED"
            | "RESET_RESTORE"
            | "RESIZE_FAILED"
            | "QUEUE_DEVICE"
            | "NVME_ADMIN_FAILED"
            | "LEASE_RECLAIM_FAILED"
            | "RM"
            | "SYSFS_UNREADABLE" => Self::Hardware,
            _ => return None,
        })
    }

    /// The code of a gRPC status code, for an error without a known reason.
    pub fn of_code(code: Code) -> Self {
        match code {
            Code::Ok => Self::Ok,
            Code::InvalidArgument | Code::OutOfRange => Self::Usage,
            Code::Unavailable => Self::Unreachable,
            Code::PermissionDenied | Code::Unauthenticated => Self::Permission,
            Code::NotFound => Self::NotFound,
            Code::Aborted | Code::AlreadyExists => Self::Busy,
            Code::DeadlineExceeded => Self::TimedOut,
            _ => Self::Failure,
        }
    }

    fn of_client(e: &ClientError) -> Self {
        match e {
            ClientError::NoDaemon { .. }
            | ClientError::NotListening { .. }
            | ClientError::Connect { .. }
            | ClientError::Channel { .. }
            | ClientError::DaemonTooOld { .. } => Self::Unreachable,
            ClientError::PermissionDenied { .. } => Self::Permission,
            ClientError::Argument(_) => Self::Usage,
            ClientError::Rpc { code, info, .. } => info
                .as_ref()
                .and_then(|i| Self::of_reason(&i.reason))
                .unwrap_or_else(|| Self::of_code(*code)),
            _ => Self::Failure,
        }
    }

    /// The code of any error rigctl ends with: the first error in its chain that
    /// says one.
    pub fn of(e: &(dyn Error + 'static)) -> Self {
        let mut next = Some(e);
        while let Some(e) = next {
            if let Some(c) = e.downcast_ref::<CliError>() {
                return c.exit;
            }
            if let Some(c) = e.downcast_ref::<ClientError>() {
                return Self::of_client(c);
            }
            if let Some(crate::metrics::MetricsError::Io { .. }) =
                e.downcast_ref::<crate::metrics::MetricsError>()
            {
                return Self::Unreachable;
            }
            if let Some(d) = e.downcast_ref::<SessionError>() {
                match d {
                    // Transparent: its source() skips the ClientError itself.
                    SessionError::Client(c) => return Self::of_client(c),
                    SessionError::Side { .. } | SessionError::Ended => return Self::Unreachable,
                    _ => {}
                }
            }
            next = e.source();
        }
        Self::Failure
    }
}

/// An error of rigctl's own with the code it ends with (a hook's refusal, a wait that
/// ran out).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
    /// The device it concerns, for `--json`.
    pub device: Option<String>,
}

impl CliError {
    pub fn new(exit: Exit, device: &str, message: String) -> Self {
        Self {
            exit,
            message,
            device: Some(device.to_owned()),
        }
    }
}

/// `--json`'s error object: `{"error": ErrorJson}`.
#[derive(Debug, Serialize)]
pub struct ErrorJson {
    /// The exit status, and its word.
    pub exit: u8,
    pub kind: &'static str,
    /// `denied` (a permission refusal) or `failed`: the word rigd's audit line has
    /// for the same call (RIG_OUTCOME), as a success's `outcome` is `ok`.
    pub outcome: &'static str,
    /// rigd's stable reason (docs/errors.md); `null` for errors rigd did not send.
    pub reason: Option<String>,
    pub device: Option<String>,
    pub step: Option<String>,
    /// The gRPC code's name (`"PERMISSION_DENIED"`) when rigd answered with an error.
    pub code: Option<String>,
    /// The one line rigctl prints first.
    pub message: String,
    /// The causes, outermost first (the numbered lines rigctl prints).
    pub causes: Vec<String>,
}

/// The `--json` object of `e`.
pub fn json_of(e: &(dyn Error + 'static)) -> ErrorJson {
    let exit = Exit::of(e);
    let mut causes = Vec::new();
    let mut cause = e.source();
    while let Some(c) = cause {
        causes.push(c.to_string());
        cause = c.source();
    }
    let client = client_error(e);
    let info = client.and_then(ClientError::error_info);
    let code = match client {
        Some(ClientError::Rpc { code, .. }) => Some(code_name(*code)),
        _ => None,
    };
    let own_device = {
        let mut next = Some(e);
        let mut found = None;
        while let Some(x) = next {
            if let Some(c) = x.downcast_ref::<CliError>() {
                found.clone_from(&c.device);
                break;
            }
            next = x.source();
        }
        found
    };
    ErrorJson {
        exit: exit.code(),
        kind: exit.as_str(),
        outcome: if exit == Exit::Permission {
            "denied"
        } else {
            "failed"
        },
        reason: info.map(|i| i.reason.clone()),
        device: info.and_then(|i| i.device.clone()).or(own_device),
        step: info.and_then(|i| i.step.clone()),
        code,
        message: e.to_string(),
        causes,
    }
}

/// The client error in `e`'s chain, if any.
fn client_error<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a ClientError> {
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(c) = e.downcast_ref::<ClientError>() {
            return Some(c);
        }
        if let Some(SessionError::Client(c)) = e.downcast_ref::<SessionError>() {
            return Some(c);
        }
        next = e.source();
    }
    None
}

/// The gRPC code's canonical name (`google.rpc.Code`).
fn code_name(c: Code) -> String {
    let name = match c {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_numbered_as_the_table_says() {
        for (n, e) in (0u8..).zip(Exit::ALL) {
            assert_eq!(e.code(), n);
            assert!(
                TABLE.contains(&format!("\n  {n}  ")),
                "{n} is missing from the table"
            );
        }
    }

    #[test]
    fn a_reason_decides_before_the_grpc_code() {
        // UNBIND_TIMEOUT comes as DEADLINE_EXCEEDED, NOT_HELD as FAILED_PRECONDITION.
        let rpc = |code, reason: &str| ClientError::Rpc {
            code,
            message: "m".into(),
            info: Some(rig_client::ErrorInfo {
                reason: reason.into(),
                device: None,
                step: None,
            }),
        };
        assert_eq!(
            Exit::of(&rpc(Code::FailedPrecondition, "NOT_HELD")),
            Exit::NotFound
        );
        assert_eq!(Exit::of(&rpc(Code::Internal, "VFIO")), Exit::Hardware);
        assert_eq!(
            Exit::of(&rpc(Code::FailedPrecondition, "SOMETHING_NEW")),
            Exit::Failure
        );
        assert_eq!(Exit::of(&rpc(Code::Aborted, "SOMETHING_NEW")), Exit::Busy);
        let wrapped = SessionError::Client(rpc(Code::PermissionDenied, "NOT_CLIENT"));
        assert_eq!(Exit::of(&wrapped), Exit::Permission);
    }
}
