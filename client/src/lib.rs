//! rig-client
