//! rig-tests
