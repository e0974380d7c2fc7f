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
    },
}

impl Default for FrameFilter {
    fn default() -> Self {
        FrameFilter::User {
            library_patterns: vec!["site-packages".into(), "dist-packages".into()],
        }
    }
}

impl FrameFilter {
    /// Library code: a file matching a library pattern, or a native frame
    /// (not a `.py` file: C++ frames of PyTorch, unwinder entries). The
    /// user's own code is Python. The root frame that names memory
    /// allocated before the recording is always shown.
    pub fn is_library(&self, names: &Names, frame: FrameId) -> bool {
        match self {
            FrameFilter::All => false,
            FrameFilter::User { library_patterns } => {
                let file = names.str(names.frame_of(frame).file);
                if file.is_empty() && names.before_recording_frame(frame).is_some() {
                    return false;
                }
                !file.ends_with(".py") || library_patterns.iter().any(|p| file.contains(p.as_str()))
            }
        }
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
            .find(|&f| function(f).starts_with("at::_ops::") && function(f).contains("::call("));
        let node = frames.iter().copied().find(|&f| {
            let name = function(f);
            name.contains("Backward") && name.contains("::apply(")
        });
        op.into_iter().chain(node).collect()
    }
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
            .map(|&f| names.frame_label(f))
            .collect();
        assert_eq!(
            labels,
            [
                "at::_ops::bmm::call(at::Tensor const&, at::Tensor const&) ??:7",
                "torch::autograd::generated::BmmBackward0::apply(std::vector<at::Tensor>&&) ??:7"
            ]
        );
        let user = filter.user_frame(&names, s).unwrap();
        assert!(names.frame_label(user).starts_with("at::_ops::bmm::call"));
    }
}
