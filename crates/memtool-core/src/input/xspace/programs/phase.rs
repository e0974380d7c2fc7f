//! Where in a training step a buffer is made, from JAX's op names.

/// Where in a training step a buffer is made, from JAX's op name: inside
/// `transpose(...)` is the backward pass, inside `jvp(...)` the forward pass,
/// and the rest of a module that has a backward pass is the update after it.
pub(super) fn phase(op_name: &str, has_backward: bool, category: &str) -> Option<&'static str> {
    if !has_backward || category == "Parameter" {
        return None;
    }
    if op_name.contains("transpose(") {
        Some("backward")
    } else if op_name.contains("jvp(") {
        Some("forward")
    } else if op_name.starts_with("jit(") || op_name.starts_with("pmap(") {
        Some("update")
    } else {
        None
    }
}
