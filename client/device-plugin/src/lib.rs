//! rig-device-plugin's library: the Container Device Interface specs ([`cdi`]) for the
//! devices rigd holds, which the plugin (the `rig-device-plugin` binary, `src/main.rs`)
//! writes for the kubelet and `rigctl cdi generate` writes for hosts without
//! Kubernetes. Both reach rigd through rig-client only; neither is something a GPU
//! runtime embeds, which is why this lives beside rig-client and not in it.

#![deny(unsafe_code)]

pub mod cdi;
