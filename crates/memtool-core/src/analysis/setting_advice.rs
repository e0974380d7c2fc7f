//! `oom`'s advice for a fragmentation failure: the allocator settings
//! (`PYTORCH_CUDA_ALLOC_CONF`) that address it, each with the figure of the
//! state at the failure it changes — none the file's `allocator_settings`
//! show already on, none that would recover nothing.

use crate::model::Memory;
use crate::report::units::bytes as size;

use super::failure_state::{AllocatorState, PoolFree};
use serde::Serialize;

/// One allocator setting (`PYTORCH_CUDA_ALLOC_CONF`) and what it would change here.
#[derive(Debug, Serialize)]
pub struct SettingAdvice {
    /// The setting as it is written in `PYTORCH_CUDA_ALLOC_CONF`.
    pub setting: String,
    /// What it changes, with this snapshot's figure.
    pub effect: String,
    /// The figure.
    pub bytes: u64,
}

/// The allocator settings that address fragmentation, each with the figure
/// of the state at the failure it changes: none the file shows already on,
/// none that would recover nothing.
pub(super) fn advise(
    memory: &Memory,
    state: &AllocatorState,
    request: u64,
    device_free: u64,
    own_pool: Option<&PoolFree>,
) -> Vec<SettingAdvice> {
    let pool_free = own_pool.map_or(state.free, |p| p.free_bytes);
    let largest = own_pool.map_or(0, |p| p.largest_free_block_bytes);
    let growable = pool_free.saturating_add(device_free);
    // Segments at least as large as the request that smaller allocations
    // split: each could have held the request whole.
    let (mut split_segments, mut split_free) = (0usize, 0u64);
    let mut wholly_free = 0u64;
    for s in &state.segments {
        if !s.holds_live {
            wholly_free = wholly_free.saturating_add(s.bytes);
        } else if s.bytes >= request && s.free_bytes > 0 {
            split_segments += 1;
            split_free = split_free.saturating_add(s.free_bytes);
        }
    }
    let mib = |b: u64| b.div_ceil(1 << 20);
    let split_mb = mib(request).max(1);
    let on = AllocatorSettingsOn::of(memory);
    let mut advice = Vec::new();
    if !on.expandable_segments && growable > largest {
        advice.push(SettingAdvice {
            setting: "expandable_segments:True".to_string(),
            effect: format!(
                "segments grow in place instead of being made in fixed sizes, and free pages \
                 are unmapped and mapped again where they are needed: the largest request that \
                 could be served goes from {} (the largest free block) to about {} (free in \
                 the pool plus free on the device)",
                size(largest),
                size(growable)
            ),
            bytes: growable,
        });
    }
    if on.max_split_size_mb.is_none_or(|set| set > split_mb) {
        advice.push(SettingAdvice {
            setting: format!("max_split_size_mb:{split_mb}"),
            effect: format!(
                "smaller allocations no longer split free blocks of this size or more: {} free \
                 in {} segment{} at least as large as the request is memory split by smaller \
                 allocations",
                size(split_free),
                split_segments,
                if split_segments == 1 { "" } else { "s" }
            ),
            bytes: split_free,
        });
    }
    if !on.garbage_collection {
        advice.push(SettingAdvice {
            setting: "garbage_collection_threshold:0.8".to_string(),
            effect: format!(
                "cached free segments are released before the limit instead of at it: {} is in \
                 segments with no live block",
                size(wholly_free)
            ),
            bytes: wholly_free,
        });
    }
    advice.retain(|a| a.bytes > 0);
    advice
}

/// Which of the settings `oom` could advise the file shows on: its
/// `allocator_settings` fields, else their spelling in
/// `PYTORCH_CUDA_ALLOC_CONF`.
#[derive(Debug, Default)]
struct AllocatorSettingsOn {
    expandable_segments: bool,
    /// The split limit already set, in MiB.
    max_split_size_mb: Option<u64>,
    garbage_collection: bool,
}

impl AllocatorSettingsOn {
    fn of(memory: &Memory) -> AllocatorSettingsOn {
        let settings = &memory.allocator_settings;
        let conf = settings
            .get("PYTORCH_CUDA_ALLOC_CONF")
            .map_or("", String::as_str);
        let conf_value = |key: &str| {
            conf.split(',')
                .filter_map(|kv| kv.split_once(':'))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().to_string())
        };
        let truthy = |v: &str| matches!(v, "True" | "true" | "1");
        let expandable_segments = settings
            .get("expandable_segments")
            .is_some_and(|v| truthy(v))
            || conf_value("expandable_segments").is_some_and(|v| truthy(&v));
        // The snapshot records max_split_size in bytes (-1 or SIZE_MAX: unset).
        let max_split_size_mb = settings
            .get("max_split_size")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&b| b > 0 && b < u64::MAX / 2)
            .map(|b| b >> 20)
            .or_else(|| conf_value("max_split_size_mb").and_then(|v| v.parse().ok()));
        let positive = |v: &str| v.parse::<f64>().is_ok_and(|f| f > 0.0);
        let garbage_collection = settings
            .get("garbage_collection_threshold")
            .is_some_and(|v| positive(v))
            || conf_value("garbage_collection_threshold").is_some_and(|v| positive(&v));
        AllocatorSettingsOn {
            expandable_segments,
            max_split_size_mb,
            garbage_collection,
        }
    }
}
