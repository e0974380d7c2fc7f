//! PyTorch inputs: caching-allocator snapshot pickles, profiler Chrome traces
//! and `export_memory_timeline` outputs.

pub(crate) mod json;
pub mod pickle;
pub(crate) mod snapshot;
