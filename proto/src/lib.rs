//! rig-proto
