//! Structure-aware: well-formed requests of every RPC whose fields reach past decoding
//! (addresses of the fake tree's functions, short and long forms, near misses;
//! sizes, offsets and counts at and around their limits), a few to a dozen an input,
//! so that sequences (detach, then resize, then attach) happen. Holds what rpc_bytes
//! holds.
#![no_main]
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use rig_proto::v1 as pb;

mod common;

fn bdf(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=9)? {
        0 => common::DEV.into(),
        1 => common::FREE.into(),
        2 => common::DMA_POOL.into(),
        3 => "01:00.0".into(),
        4 => "0000:01:00.7".into(),
        5 => "0000:ff:1f.7".into(),
        6 => "ffff:ff:1f.7".into(),
        7 => String::new(),
        8 => format!("{}\0", common::DEV),
        _ => u.arbitrary()?,
    })
}

/// A u64 at or near a limit that rigd checks.
fn size(u: &mut Unstructured<'_>) -> Result<u64> {
    const B: u64 = common::BLOCK;
    Ok(match u.int_in_range(0..=12)? {
        0 => 0,
        1 => 1,
        2 => 4095,
        3 => 4096,
        4 => B - 1,
        5 => B,
        6 => B + 1,
        7 => 4 * B,
        8 => 8 * B,
        9 => 9 * B,
        10 => u64::from(u32::MAX) + 1,
        11 => u64::MAX,
        _ => u.arbitrary()?,
    })
}

fn small(u: &mut Unstructured<'_>) -> Result<u32> {
    Ok(match u.int_in_range(0..=8)? {
        0 => 0,
        1 => 1,
        2 => 5,
        3 => 6,
        4 => 8,
        5 => 64,
        6 => 4096,
        7 => u32::MAX,
        _ => u.arbitrary()?,
    })
}

fn request(u: &mut Unstructured<'_>) -> Result<(usize, Vec<u8>)> {
    let m = u.int_in_range(0..=common::METHODS.len() - 1)?;
    let body = match common::METHODS[m].0.rsplit('/').next().unwrap_or_default() {
        "GetDevice" => pb::GetDeviceRequest { bdf: bdf(u)? }.encode_to_vec(),
        "ListDevices" => pb::ListDevicesRequest {
            gpus_only: u.arbitrary()?,
        }
        .encode_to_vec(),
        "Detach" => pb::DetachRequest {
            bdf: bdf(u)?,
            mode: u.int_in_range(0..=3)?,
            entire_group: u.arbitrary()?,
            force: u.arbitrary()?,
            timeout_s: u.int_in_range(0..=2)?,
            ..Default::default()
        }
        .encode_to_vec(),
        "Attach" => pb::AttachRequest {
            bdf: bdf(u)?,
            ..Default::default()
        }
        .encode_to_vec(),
        "Reset" => pb::ResetRequest {
            bdf: bdf(u)?,
            ..Default::default()
        }
        .encode_to_vec(),
        "Resize" => pb::ResizeRequest {
            bdf: bdf(u)?,
            bar: small(u)?,
            ..Default::default()
        }
        .encode_to_vec(),
        "ReadBar" => pb::ReadBarRequest {
            bdf: bdf(u)?,
            bar: small(u)?,
            offset: size(u)?,
            width_bits: small(u)?,
            count: small(u)?,
        }
        .encode_to_vec(),
        "WriteBar" => pb::WriteBarRequest {
            bdf: bdf(u)?,
            bar: small(u)?,
            offset: size(u)?,
            width_bits: small(u)?,
            value: u.arbitrary()?,
        }
        .encode_to_vec(),
        "SetBusMaster" => pb::SetBusMasterRequest {
            bdf: bdf(u)?,
            on: u.arbitrary()?,
        }
        .encode_to_vec(),
        "OpenSession" => pb::DmaOpenRequest { device: bdf(u)? }
        .encode_to_vec(),
        // Version, Status, Dma.Status, Dma.Channels, Queues.Status: empty requests.
        _ => Vec::new(),
    };
    Ok((m, body))
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let h = common::harness();
    for _ in 0..12 {
        let Ok((m, body)) = request(&mut u) else {
            break;
        };
        let _ = h.call(m, body);
    }
    h.still_serves();
});
