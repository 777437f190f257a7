//! Compiles proto/rig/v1/*.proto with protox (pure Rust: no protoc binary, works offline)
//! and keeps the descriptor set for gRPC server reflection.

use std::{env, error::Error, fs, path::PathBuf};

use prost::Message;

fn main() -> Result<(), Box<dyn Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let protos = [
        root.join("rig/v1/rig.proto"),
        root.join("rig/v1/dma.proto"),
        root.join("rig/v1/gpumem.proto"),
        root.join("rig/v1/event.proto"),
        root.join("rig/v1/queue.proto"),
        root.join("rig/v1/lease.proto"),
        root.join("rig/v1/topo.proto"),
    ];
    for p in &protos {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    let fds = protox::compile(&protos, [&root])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("rig_v1_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
