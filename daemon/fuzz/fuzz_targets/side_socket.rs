//! The DMA side socket (SEQPACKET), to rigd's whole service over the fake kernel: each
//! input opens a real session (OpenSession over gRPC), connects the side socket, and
//! sends a sequence of packets: raw bytes, or requests built to reach deeper (a claim
//! with the right token, a wrong one, another session's id; leases at and around the
//! block and quota limits; releases, queue opens, whole-device leases and give-backs,
//! channel opens, GPU memory allocations and frees), each with descriptors of random
//! kinds attached (a memfd, a pipe, a socket, /dev/null, the side socket itself) and,
//! now and then, SCM_CREDENTIALS naming another pid. Holds: no panic; each packet
//! answered, or the connection closed, within the limit; rigd still answers a new
//! client; and once the connection is gone its session is too.
#![no_main]
use std::{
    io::IoSlice,
    os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd},
    time::{Duration, Instant},
};

use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use nix::{
    poll::{PollFd, PollFlags, PollTimeout, poll},
    sys::socket::{self, ControlMessage, MsgFlags, UnixCredentials},
};
use prost::Message;
use rig_proto::v1::{self as pb, session_request::Body};

mod common;

/// A descriptor of some kind to attach.
fn some_fd(u: &mut Unstructured<'_>, side: BorrowedFd<'_>) -> Result<Option<OwnedFd>> {
    Ok(match u.int_in_range(0..=4)? {
        0 => nix::sys::memfd::memfd_create(c"fuzz", nix::sys::memfd::MFdFlags::MFD_CLOEXEC).ok(),
        1 => nix::unistd::pipe().ok().map(|(r, _w)| r),
        2 => socket::socketpair(
            socket::AddressFamily::Unix,
            socket::SockType::Stream,
            None,
            socket::SockFlag::SOCK_CLOEXEC,
        )
        .ok()
        .map(|(a, _b)| a),
        3 => std::fs::File::open("/dev/null").ok().map(OwnedFd::from),
        _ => side.try_clone_to_owned().ok(),
    })
}

fn packet(u: &mut Unstructured<'_>, session: u64, token: &[u8]) -> Result<Vec<u8>> {
    const B: u64 = common::BLOCK;
    let bytes = |u: &mut Unstructured<'_>| -> Result<u64> {
        Ok(match u.int_in_range(0..=7)? {
            0 => 0,
            1 => B,
            2 => B + 1,
            3 => 4 * B,
            4 => 9 * B,
            5 => u64::MAX,
            6 => B - 4096,
            _ => u.arbitrary()?,
        })
    };
    let body = match u.int_in_range(0..=12)? {
        0 => return Ok(u.arbitrary::<Vec<u8>>()?),
        1 | 2 => Body::Claim(pb::SessionClaim {
            session,
            token: token.to_vec(),
        }),
        3 => Body::Claim(pb::SessionClaim {
            session: if u.arbitrary()? { session } else { session ^ 1 },
            token: u.arbitrary::<Vec<u8>>()?,
        }),
        4 | 5 => Body::Lease(pb::DmaLease { bytes: bytes(u)? }),
        6 => Body::Release(pb::DmaRelease {
            lease: u.int_in_range(0..=8)?,
        }),
        7 => Body::OpenQueue(pb::QueueOpen {
            depth: u.arbitrary()?,
            lease: u.int_in_range(0..=8)?,
            offset: bytes(u)?,
        }),
        8 => Body::LeaseDevice(pb::DeviceLease {
            device: if u.arbitrary()? {
                common::DEV.into()
            } else {
                u.arbitrary()?
            },
        }),
        9 => Body::GiveBackDevice(pb::DeviceGiveBack {
            device: common::DEV.into(),
        }),
        11 => Body::GpuMemAlloc(pb::GpuMemAlloc {
            bytes: bytes(u)?,
            cpu_view: u.arbitrary()?,
        }),
        12 => Body::GpuMemFree(pb::GpuMemFree {
            id: u.int_in_range(0..=8)?,
        }),
        _ => Body::ChannelOpen(pb::ChannelOpen {
            engine: u.int_in_range(0..=3)?,
            entries: bytes(u)?,
            rings: u.int_in_range(0..=2)?,
            pushbuffer_bytes: bytes(u)?,
        }),
    };
    let mut v = pb::SessionRequest { body: Some(body) }.encode_to_vec();
    // Now and then, one byte off.
    if u.ratio(1, 8)? && !v.is_empty() {
        let i = u.choose_index(v.len())?;
        v[i] ^= u.arbitrary::<u8>()? | 1;
    }
    Ok(v)
}

fn send(side: BorrowedFd<'_>, data: &[u8], fds: &[OwnedFd], creds: bool) -> bool {
    let raw: Vec<i32> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    // Another pid than ours: root may claim any (unix(7)); rigd must go by the
    // connection's SO_PEERCRED, never by what a packet says.
    let other = UnixCredentials::from(libc::ucred {
        pid: 1,
        uid: nix::unistd::getuid().as_raw(),
        gid: nix::unistd::getgid().as_raw(),
    });
    let mut cmsgs = Vec::new();
    if !raw.is_empty() {
        cmsgs.push(ControlMessage::ScmRights(&raw));
    }
    if creds {
        cmsgs.push(ControlMessage::ScmCredentials(&other));
    }
    let r = socket::sendmsg::<()>(
        side.as_raw_fd(),
        &[IoSlice::new(data)],
        &cmsgs,
        MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT,
        None,
    );
    // EPERM for credentials a non-root run may not claim, EPIPE once rigd closed: the
    // input goes on (or ends) as a client's would.
    r.is_ok()
}

/// Waits for rigd's reply to one packet, or its close of the connection; false when
/// the connection is gone.
fn answered(side: BorrowedFd<'_>) -> bool {
    let start = Instant::now();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let mut fds = [PollFd::new(side, PollFlags::POLLIN)];
        let n = poll(&mut fds, PollTimeout::from(100u16)).expect("poll");
        if n > 0 {
            return match rig_sys::scm::recv(side, &mut buf) {
                Ok(p) => p.len > 0,
                Err(_) => false,
            };
        }
        assert!(
            start.elapsed() < common::LIMIT,
            "hang: the side socket neither answered nor closed within {:?}",
            common::LIMIT
        );
    }
}

fn run(u: &mut Unstructured<'_>, h: &common::Harness) -> Result<()> {
    let device = if u.arbitrary()? {
        common::DMA_POOL
    } else {
        common::DEV
    };
    let open = pb::DmaOpenRequest {
        device: device.into(),
    };
    let Ok(reply) = h.call(11, open.encode_to_vec()) else {
        return Ok(());
    };
    let opened = pb::DmaOpened::decode(reply[0].as_slice()).expect("rigd's own reply decodes");
    let side = rig_sys::scm::connect(&h.side).expect("connect the side socket");
    for _ in 0..u.int_in_range(1..=8)? {
        let data = packet(u, opened.session, &opened.token)?;
        let mut fds = Vec::new();
        for _ in 0..u.int_in_range(0..=3)? {
            fds.extend(some_fd(u, side.as_fd())?);
        }
        let creds = u.ratio(1, 8)?;
        if !send(side.as_fd(), &data, &fds, creds) || !answered(side.as_fd()) {
            break;
        }
    }
    drop(side);
    // The connection's end ends the session: within the limit, it is gone.
    let start = Instant::now();
    while h
        .rig
        .dma()
        .status(None)
        .clients
        .iter()
        .any(|c| c.session.0 == opened.session && c.claimed)
    {
        assert!(
            start.elapsed() < common::LIMIT,
            "session {} outlived its side connection",
            opened.session
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let h = common::harness();
    let mut u = Unstructured::new(data);
    let _ = run(&mut u, h);
    h.still_serves();
});
