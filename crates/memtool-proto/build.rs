//! Compiles the vendored `.proto` files with protox (pure Rust), so building
//! memtool never needs a system `protoc`.
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let files = ["profile.proto", "xla_hlo.proto"];
    for f in &files {
        println!("cargo:rerun-if-changed={}", root.join(f).display());
    }
    let descriptors = protox::compile(files, [&root])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
