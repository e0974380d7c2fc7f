//! Helpers shared by the core's integration tests.
#![allow(dead_code)]

pub mod paths;
