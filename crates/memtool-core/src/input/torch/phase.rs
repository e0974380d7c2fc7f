//! PyTorch's Python frames as the profiler writes them, and the training
//! phase a stack of frames and profiler ranges tells: snapshots and traces
//! name phases by the same rules.
//!
//! What a frame or a range says is a [`Mark`]; a stack's marks are folded
//! from its outermost frame in ([`Trail`]). Anything under the autograd
//! engine is the backward pass, whatever runs there (a recomputed forward,
//! a hook); otherwise the innermost mark decides, so a loss computed inside
//! a model's `forward` is the loss, and a model called from a function named
//! `compute_loss` is the forward pass.

use rustc_hash::FxHashMap;

use crate::model::{FrameId, Names, Phase, StackId};

/// What one frame or profiler range says about the phase it runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mark {
    /// The autograd engine runs it: the backward pass, with everything
    /// inside.
    Engine,
    /// This phase, unless a mark inside says otherwise.
    Phase(Phase),
}

/// A frame's mark, from its function and file (as [`profiler_frame`] splits
/// them). The names are PyTorch's: `torch/_tensor.py` `backward`, the engine's
/// `run_backward` and C++ `torch::autograd::Engine::*`, anything in
/// `torch/optim/`, a `step` in a file named like an optimizer
/// (`cs336_basics/optimizer.py`), `zero_grad`, `torch/nn/modules/loss.py`,
/// `forward` and `nn.Module` calls.
pub(super) fn frame_mark(function: &str, file: &str) -> Option<Mark> {
    let file = file.replace('\\', "/");
    let in_file = |suffix: &str| file.ends_with(suffix);
    if function.contains("autograd::Engine::")
        || function.contains("autograd::python::PythonEngine::")
        || function.contains("autograd::generated::")
        || function.contains("run_backward")
        || (function == "backward"
            && (in_file("torch/_tensor.py") || in_file("torch/autograd/__init__.py")))
    {
        return Some(Mark::Engine);
    }
    if function.ends_with("zero_grad") {
        return Some(Mark::Phase(Phase::ZeroGrad));
    }
    let file_name = file.rsplit('/').next().unwrap_or("");
    if file.contains("torch/optim/")
        || (function == "step" && file_name.to_ascii_lowercase().contains("optim"))
        || function.contains("optimizer_step")
    {
        return Some(Mark::Phase(Phase::Optimizer));
    }
    named_mark(function)
        .or_else(|| (in_file("torch/nn/modules/loss.py")).then_some(Mark::Phase(Phase::Loss)))
}

/// A profiler range's mark, from its name: `autograd::engine::
/// evaluate_function: …` (the engine), `Optimizer.step#Adam.step`,
/// `Optimizer.zero_grad#…`, and names a user gave `record_function`
/// (`## forward ##`) or an op has (`aten::nll_loss_forward`,
/// `aten::convolution_backward`).
pub(super) fn range_mark(name: &str) -> Option<Mark> {
    if name.starts_with("autograd::engine::evaluate_function") {
        return Some(Mark::Engine);
    }
    if name.starts_with("Optimizer.zero_grad") {
        return Some(Mark::Phase(Phase::ZeroGrad));
    }
    if name.starts_with("Optimizer.step") {
        return Some(Mark::Phase(Phase::Optimizer));
    }
    named_mark(name).or_else(|| {
        let lower = name.to_ascii_lowercase();
        lower
            .contains("optimizer")
            .then_some(Mark::Phase(Phase::Optimizer))
    })
}

/// What a name says by the words in it, tried in this order: `zero_grad`,
/// `backward` (`nll_loss_backward` is backward), `loss` and `cross_entropy`,
/// `forward`; a module call (`_call_impl`, the profiler's `nn.Module: X`
/// frames) is the forward pass.
fn named_mark(name: &str) -> Option<Mark> {
    let lower = name.to_ascii_lowercase();
    let phase = if lower.contains("zero_grad") {
        Phase::ZeroGrad
    } else if lower.contains("backward") {
        Phase::Backward
    } else if lower.contains("loss") || lower.contains("cross_entropy") {
        Phase::Loss
    } else if lower.contains("forward")
        || name == "_call_impl"
        || name == "_wrapped_call_impl"
        || name.starts_with("nn.Module: ")
    {
        Phase::Forward
    } else {
        return None;
    };
    Some(Mark::Phase(phase))
}

/// The marks of a stack of frames and ranges, folded from the outermost in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Trail {
    engine: bool,
    innermost: Option<Phase>,
}

impl Trail {
    /// The trail with one more frame or range inside it.
    pub(super) fn enter(self, mark: Option<Mark>) -> Trail {
        match mark {
            None => self,
            Some(Mark::Engine) => Trail {
                engine: true,
                innermost: Some(Phase::Backward),
            },
            Some(Mark::Phase(phase)) => Trail {
                engine: self.engine,
                innermost: Some(phase),
            },
        }
    }

    /// The phase it tells.
    pub(super) fn phase(self) -> Option<Phase> {
        if self.engine {
            Some(Phase::Backward)
        } else {
            self.innermost
        }
    }
}

/// The phases stacks' frames tell, each stack's trail folded once from its
/// caller's: a snapshot's stacks share most of their frames, so marking
/// every frame of every stack afresh (a lowercased copy of each name, a
/// dozen substring searches) cost ~2,700 instructions a stack, ~5 % of
/// reading a snapshot of 10^5 entries and 6,000 stacks.
#[derive(Default)]
pub(super) struct StackPhases {
    trails: FxHashMap<StackId, Trail>,
    marks: FxHashMap<FrameId, Option<Mark>>,
}

impl StackPhases {
    /// The phase the frames of `stack` tell.
    pub(super) fn phase(&mut self, names: &Names, stack: StackId) -> Option<Phase> {
        // The stacks from `stack` out to the first whose trail is known
        // (or the empty stack's, the default), then folded back in.
        let mut unknown = Vec::new();
        let mut trail = Trail::default();
        let mut at = stack;
        while let Some(frame) = names.leaf(at) {
            if let Some(known) = self.trails.get(&at) {
                trail = *known;
                break;
            }
            unknown.push((at, frame));
            at = names.caller(at);
        }
        for &(at, frame) in unknown.iter().rev() {
            let mark = *self.marks.entry(frame).or_insert_with(|| {
                let frame = names.frame_of(frame);
                frame_mark(names.str(frame.function), names.str(frame.file))
            });
            trail = trail.enter(mark);
            self.trails.insert(at, trail);
        }
        trail.phase()
    }
}

/// A Python frame as PyTorch's profiler writes it, one name
/// `torch/nn/functional.py(6711): linear` (in snapshots made from a profile,
/// `_profile_to_snapshot`, with the file `none`, and in traces'
/// `python_function` events): split into function, file and line, so it is
/// a frame like any other. `None` for anything else (`nn.Module: Linear_0`,
/// `<built-in function linear>`), kept as written.
pub(super) fn profiler_frame<'n>(name: &'n str, file: &str) -> Option<(&'n str, &'n str, u32)> {
    if !matches!(file, "" | "none" | "??") {
        return None;
    }
    let (location, function) = name.split_once("): ")?;
    let (path, line) = location.rsplit_once('(')?;
    let line: u32 = line.parse().ok()?;
    (path.ends_with(".py") && !function.is_empty()).then_some((function, path, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiler_frames_are_split_into_function_file_and_line() {
        assert_eq!(
            profiler_frame(
                "torch/nn/functional.py(6711): multi_head_attention_forward",
                "none"
            ),
            Some((
                "multi_head_attention_forward",
                "torch/nn/functional.py",
                6711
            ))
        );
        assert_eq!(
            profiler_frame("torch_train.py(16): <module>", "none"),
            Some(("<module>", "torch_train.py", 16))
        );
        // Anything else is kept as written.
        assert_eq!(profiler_frame("nn.Module: Linear_0", "none"), None);
        assert_eq!(profiler_frame("<built-in function linear>", "none"), None);
        assert_eq!(profiler_frame("f.py(3): g", "real.py"), None);
        assert_eq!(profiler_frame("f.py(x): g", "none"), None);
    }

    fn phase_of(frames_outermost_first: &[(&str, &str)]) -> Option<Phase> {
        frames_outermost_first
            .iter()
            .fold(Trail::default(), |t, (f, file)| {
                t.enter(frame_mark(f, file))
            })
            .phase()
    }

    #[test]
    fn frames_tell_phases_by_pytorch_names() {
        let train = ("train", "train.py");
        let call = ("_call_impl", "torch/nn/modules/module.py");
        assert_eq!(
            phase_of(&[train, call, ("forward", "torch/nn/modules/linear.py")]),
            Some(Phase::Forward)
        );
        // A loss inside the model's forward is the loss; a model called from
        // a function named for its loss is the forward pass.
        assert_eq!(
            phase_of(&[train, call, ("cross_entropy", "torch/nn/functional.py")]),
            Some(Phase::Loss)
        );
        assert_eq!(
            phase_of(&[("compute_loss", "train.py"), call, ("forward", "m.py")]),
            Some(Phase::Forward)
        );
        // Under the engine everything is backward, a recomputed forward too.
        assert_eq!(
            phase_of(&[
                train,
                ("backward", "torch/_tensor.py"),
                ("recompute", "torch/utils/checkpoint.py"),
                call,
                ("forward", "m.py"),
            ]),
            Some(Phase::Backward)
        );
        assert_eq!(
            phase_of(&[(
                "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
                "??"
            )]),
            Some(Phase::Backward)
        );
        // Forward ops dispatched through autograd are not the engine.
        assert_eq!(
            phase_of(&[
                call,
                ("forward", "m.py"),
                (
                    "torch::autograd::THPVariable_mul(_object*, _object*, _object*)",
                    "x.cpp"
                ),
            ]),
            Some(Phase::Forward)
        );
        assert_eq!(
            phase_of(&[
                train,
                ("wrapper", "torch/optim/optimizer.py"),
                ("_single_tensor_adam", "torch/optim/adam.py"),
            ]),
            Some(Phase::Optimizer)
        );
        assert_eq!(
            phase_of(&[train, ("step", "C:\\work\\cs336_basics\\optimizer.py")]),
            Some(Phase::Optimizer)
        );
        assert_eq!(phase_of(&[train, ("step", "train.py")]), None);
        assert_eq!(
            phase_of(&[train, ("zero_grad", "torch/optim/optimizer.py")]),
            Some(Phase::ZeroGrad)
        );
        assert_eq!(phase_of(&[train, ("to", "train.py")]), None);
        assert_eq!(phase_of(&[]), None);
    }

    #[test]
    fn ranges_tell_phases_by_profiler_names() {
        let phase = |names: &[&str]| {
            names
                .iter()
                .fold(Trail::default(), |t, n| t.enter(range_mark(n)))
                .phase()
        };
        assert_eq!(phase(&["ProfilerStep#3"]), None);
        assert_eq!(
            phase(&["ProfilerStep#3", "## forward ##", "aten::linear"]),
            Some(Phase::Forward)
        );
        assert_eq!(
            phase(&[
                "autograd::engine::evaluate_function: MmBackward0",
                "aten::mm"
            ]),
            Some(Phase::Backward)
        );
        assert_eq!(
            phase(&["Optimizer.step#Adam.step", "aten::_foreach_add_"]),
            Some(Phase::Optimizer)
        );
        assert_eq!(
            phase(&["Optimizer.zero_grad#SGD.zero_grad"]),
            Some(Phase::ZeroGrad)
        );
        assert_eq!(phase(&["aten::nll_loss_forward"]), Some(Phase::Loss));
        assert_eq!(phase(&["aten::nll_loss_backward"]), Some(Phase::Backward));
        assert_eq!(phase(&["## optimizer ##"]), Some(Phase::Optimizer));
    }
}
