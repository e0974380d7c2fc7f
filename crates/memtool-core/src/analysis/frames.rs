//! Which frames of a call stack are shown: the user's own code, with
//! library and native frames filtered out.

use crate::model::{FrameId, Names, StackId};

/// Which frames of a stack are shown.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameFilter {
    /// Every frame, as the profiler recorded it.
    All,
    /// Hide frames whose file contains one of these patterns (library code).
    /// A stack made only of library frames is shown whole.
    User {
        /// Substrings of a file path that mark library code.
        library_patterns: Vec<String>,
        /// Packages whose files, written relative to site-packages
        /// (`torch/nn/functional.py`, as snapshots the profiler makes write
        /// them), are library code: a relative path's first directory.
        library_packages: Vec<String>,
    },
}

/// Packages a relative path's first directory names as library code by
/// default: the frameworks and the libraries models are built on.
pub const LIBRARY_PACKAGES: [&str; 21] = [
    "torch",
    "torchvision",
    "torchaudio",
    "torchtext",
    "functorch",
    "triton",
    "numpy",
    "transformers",
    "accelerate",
    "deepspeed",
    "lightning",
    "pytorch_lightning",
    "timm",
    "diffusers",
    "apex",
    "fairscale",
    "jax",
    "flax",
    "optax",
    "tensorflow",
    "keras",
];

impl Default for FrameFilter {
    fn default() -> Self {
        FrameFilter::User {
            library_patterns: vec!["site-packages".into(), "dist-packages".into()],
            library_packages: LIBRARY_PACKAGES.iter().map(|p| p.to_string()).collect(),
        }
    }
}

impl FrameFilter {
    /// Library code: a file matching a library pattern, a relative path
    /// into a library package, or a native frame (not a `.py` file: C++
    /// frames of PyTorch, unwinder entries). The user's own code is Python.
    /// The root frame that names memory allocated before the recording is
    /// always shown.
    pub fn is_library(&self, names: &Names, frame: FrameId) -> bool {
        match self {
            FrameFilter::All => false,
            FrameFilter::User {
                library_patterns,
                library_packages,
            } => {
                let file = names.str(names.frame_of(frame).file);
                if file.is_empty() && names.before_recording_frame(frame).is_some() {
                    return false;
                }
                let in_package = || {
                    file.split_once('/').is_some_and(|(first, _)| {
                        library_packages.iter().any(|p| p.as_str() == first)
                    })
                };
                !file.ends_with(".py")
                    || library_patterns.iter().any(|p| file.contains(p.as_str()))
                    || in_package()
            }
        }
    }

    /// A frame as stacks and user frames show it: a landmark of a native
    /// stack by what it names (`bmm` for `at::_ops::bmm::call(…)`,
    /// `BmmBackward0` for its autograd node's `apply(…)`, no `??` file),
    /// every other frame as `function file:line`.
    pub fn frame_text(&self, names: &Names, frame: FrameId) -> String {
        if *self != FrameFilter::All {
            let function = names.str(names.frame_of(frame).function);
            if let Some(name) = landmark_name(function) {
                return name.to_string();
            }
        }
        names.frame_label(frame)
    }

    /// The frames shown for a stack, leaf first: the user's frames; for a
    /// stack with none (a PyTorch autograd thread), its landmarks (the
    /// autograd node and the op it runs); else the whole stack.
    pub fn frames(&self, names: &Names, stack: StackId) -> Vec<FrameId> {
        let all: Vec<FrameId> = names.frames_of(stack).collect();
        let user: Vec<FrameId> = all
            .iter()
            .copied()
            .filter(|&f| !self.is_library(names, f))
            .collect();
        if !user.is_empty() {
            return user;
        }
        let landmarks = self.landmarks(names, &all);
        if landmarks.is_empty() {
            all
        } else {
            landmarks
        }
    }

    /// The innermost user frame, else the innermost landmark, else the
    /// leaf; for memory allocated before the recording, the root frame that
    /// names it (its other frames are the free's, not the allocation's).
    pub fn user_frame(&self, names: &Names, stack: StackId) -> Option<FrameId> {
        let all: Vec<FrameId> = names.frames_of(stack).collect();
        if let Some(&root) = all
            .last()
            .filter(|&&f| names.before_recording_frame(f).is_some())
        {
            return Some(root);
        }
        all.iter()
            .copied()
            .find(|&f| !self.is_library(names, f))
            .or_else(|| self.landmarks(names, &all).first().copied())
            .or_else(|| all.first().copied())
    }

    /// Frames that say what a native stack is doing: an autograd node's
    /// `apply` and the dispatcher entry of an op (`at::_ops::mm::call`).
    /// Allocator and unwinder internals above them say nothing.
    fn landmarks(&self, names: &Names, frames: &[FrameId]) -> Vec<FrameId> {
        if *self == FrameFilter::All {
            return Vec::new();
        }
        let function = |f: FrameId| names.str(names.frame_of(f).function);
        let op = frames
            .iter()
            .copied()
            .find(|&f| op_name(function(f)).is_some());
        let node = frames
            .iter()
            .copied()
            .find(|&f| autograd_node(function(f)).is_some());
        op.into_iter().chain(node).collect()
    }
}

/// The op a dispatcher entry calls: `bmm` of
/// `at::_ops::bmm::call(at::Tensor const&, …)`.
fn op_name(function: &str) -> Option<&str> {
    let rest = function.strip_prefix("at::_ops::")?;
    let (op, _) = rest.split_once("::call(")?;
    (!op.is_empty()).then_some(op)
}

/// The autograd node whose `apply` a frame runs: `BmmBackward0` of
/// `torch::autograd::generated::BmmBackward0::apply(std::vector<…>&&)`.
fn autograd_node(function: &str) -> Option<&str> {
    let (path, _) = function.split_once("::apply(")?;
    let node = path.rsplit("::").next()?;
    node.contains("Backward").then_some(node)
}

/// The short name of a landmark frame's function, if it is one.
fn landmark_name(function: &str) -> Option<&str> {
    op_name(function).or_else(|| autograd_node(function))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Frame;

    fn stack(names: &mut Names, frames: &[(&str, &str)]) -> StackId {
        let ids: Vec<FrameId> = frames
            .iter()
            .map(|(function, file)| {
                let frame = Frame {
                    function: names.string(function),
                    file: names.string(file),
                    line: 7,
                };
                names.frame(frame)
            })
            .collect();
        names.stack_leaf_first(&ids)
    }

    #[test]
    fn user_frames_are_python_outside_site_packages() {
        let mut names = Names::default();
        let s = stack(
            &mut names,
            &[
                (
                    "c10::cuda::CUDACachingAllocator::malloc",
                    "CUDACachingAllocator.cpp",
                ),
                (
                    "forward",
                    "/venv/lib/python3.11/site-packages/torch/nn/linear.py",
                ),
                ("train_step", "/home/me/train.py"),
                ("<module>", "/home/me/train.py"),
            ],
        );
        let filter = FrameFilter::default();
        let user = filter.user_frame(&names, s).unwrap();
        assert_eq!(names.frame_label(user), "train_step /home/me/train.py:7");
        assert_eq!(filter.frames(&names, s).len(), 2);
        assert_eq!(FrameFilter::All.frames(&names, s).len(), 4);
    }

    #[test]
    fn native_only_stacks_are_named_by_their_op_and_autograd_node() {
        let mut names = Names::default();
        let s = stack(
            &mut names,
            &[
                ("torch::unwind::unwind()", "??"),
                (
                    "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&)",
                    "??",
                ),
                (
                    "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&)",
                    "??",
                ),
                ("clone", "??"),
            ],
        );
        let filter = FrameFilter::default();
        let labels: Vec<String> = filter
            .frames(&names, s)
            .iter()
            .map(|&f| filter.frame_text(&names, f))
            .collect();
        assert_eq!(labels, ["bmm", "BmmBackward0"]);
        let user = filter.user_frame(&names, s).unwrap();
        assert_eq!(filter.frame_text(&names, user), "bmm");
        // Every frame, as recorded.
        assert_eq!(
            FrameFilter::All.frame_text(&names, user),
            "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&) ??:7"
        );
        assert_eq!(
            op_name("at::_ops::div_Tensor::call(at::Tensor const&)"),
            Some("div_Tensor")
        );
        assert_eq!(autograd_node("torch::autograd::CopySlices::apply(x)"), None);
    }

    #[test]
    fn paths_relative_to_site_packages_are_library_code() {
        let mut names = Names::default();
        let s = stack(
            &mut names,
            &[
                ("dropout", "torch/nn/functional.py"),
                ("forward", "models/block.py"),
                ("step", "torch_train.py"),
            ],
        );
        let filter = FrameFilter::default();
        let shown: Vec<String> = filter
            .frames(&names, s)
            .iter()
            .map(|&f| names.frame_label(f))
            .collect();
        assert_eq!(
            shown,
            ["forward models/block.py:7", "step torch_train.py:7"]
        );
    }
}
