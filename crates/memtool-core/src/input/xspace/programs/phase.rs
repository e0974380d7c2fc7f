//! Where in a training step a buffer is made, from JAX's op names.

use crate::model::Phase;

/// Where in a training step a buffer is made, from JAX's op name: inside
/// `transpose(...)` is the backward pass, inside `jvp(...)` the forward pass,
/// and the rest of a module that has a backward pass is the update after it
/// (the optimizer's step).
pub(super) fn phase(op_name: &str, has_backward: bool, category: &str) -> Option<Phase> {
    if !has_backward || category == "Parameter" {
        return None;
    }
    if op_name.contains("transpose(") {
        Some(Phase::Backward)
    } else if op_name.contains("jvp(") {
        Some(Phase::Forward)
    } else if op_name.starts_with("jit(") || op_name.starts_with("pmap(") {
        Some(Phase::Optimizer)
    } else {
        None
    }
}
