//! rigd
