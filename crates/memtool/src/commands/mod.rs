//! One module per subcommand.

pub mod diff;
pub mod export;
pub mod frag;
pub mod leaks;
pub mod mcp;
pub mod oom;
pub mod peak;
pub mod ranks;
pub mod render;
pub mod shell;
pub mod summary;
