//! rig-firmware
