//! Collapsed stacks (`render --format folded`) for other flame-graph tools.

use super::flame::Tree;
use super::{at_peak, Inputs, RenderOptions};

/// Collapsed stacks (`frame;frame;frame bytes`) of what was live at each
/// memory's peak, all memories together (for `render A B`, the new profile).
pub fn folded(inputs: Inputs<'_>, options: &RenderOptions) -> String {
    let profile = match inputs {
        Inputs::One(p) => p,
        Inputs::Diff { new, .. } => new,
    };
    let mut tree = Tree::default();
    for memory in options.analysis.selected(profile) {
        tree.add_sites(
            &profile.names,
            &at_peak(memory, options.analysis.ties),
            &options.analysis.frames,
            1,
        );
    }
    let mut out = String::new();
    tree.folded(&mut out);
    out
}
