//! `cargo run --manifest-path scripts/proto-regen/Cargo.toml [-- --check]`:
//! writes memtool-proto's generated types from the vendored `.proto` files,
//! or checks that the committed ones are what the files give.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let check = std::env::args().any(|a| a == "--check");
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let proto = repo.join("proto");
    let committed = repo.join("crates/memtool-proto/src/generated");
    let out = std::env::temp_dir().join(format!("memtool-proto-regen-{}", std::process::id()));
    std::fs::create_dir_all(&out)?;
    let descriptors = protox::compile(["profile.proto", "xla_hlo.proto"], [&proto])?;
    prost_build::Config::new()
        .out_dir(&out)
        .compile_fds(descriptors)?;
    let mut stale = Vec::new();
    for name in ["perftools.profiles.rs", "xla.rs"] {
        let fresh = std::fs::read(out.join(name))?;
        let path = committed.join(name);
        if check {
            if std::fs::read(&path).ok().as_deref() != Some(fresh.as_slice()) {
                stale.push(path.display().to_string());
            }
        } else {
            std::fs::write(&path, fresh)?;
        }
    }
    std::fs::remove_dir_all(&out)?;
    if !stale.is_empty() {
        return Err(format!(
            "{} out of date with proto/: run `cargo run --manifest-path scripts/proto-regen/Cargo.toml`",
            stale.join(", ")
        )
        .into());
    }
    Ok(())
}
