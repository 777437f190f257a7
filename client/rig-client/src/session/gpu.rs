//! What a session on an RM-served GPU learns of its GPU when it claims
//! (`SessionClaimed.gpu`, proto/rig/v1/gpumem.proto): the shared vocabulary's
//! `rig_model::nv::SessionGpu`, converted by rig-proto. A runtime programs its windows
//! and sizes local memory from it; `gpumem` lends in its pages.

pub use rig_model::nv::SessionGpu;
