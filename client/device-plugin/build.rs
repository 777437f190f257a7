//! Compiles the kubelet's Device Plugin API (proto/k8s/deviceplugin/v1beta1, rig's copy
//! of its wire definition) with protox (pure Rust, offline) for the rig-device-plugin
//! binary, which includes the generated module from OUT_DIR. rig's own protos are
//! rig-proto's (proto/build.rs).

use std::{env, error::Error, path::PathBuf};

fn main() -> Result<(), Box<dyn Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("proto/k8s");
    let api = root.join("deviceplugin/v1beta1/api.proto");
    println!("cargo:rerun-if-changed={}", api.display());
    let fds = protox::compile([&api], [&root])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
