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

/// The site of a stack alone.
fn stack_site(names: &mut Names, stack: StackId) -> SiteId {
    names.site(crate::model::Site {
        stack,
        ..Default::default()
    })
}

#[test]
fn breakdown_labels_every_kind_of_stack_as_label_does() {
    let mut names = Names::default();
    let stacks = [
        // user frames under library ones
        stack(
            &mut names,
            &[
                ("forward", "/venv/site-packages/torch/nn/linear.py"),
                ("train_step", "/home/me/train.py"),
            ],
        ),
        // native only, with landmarks
        stack(
            &mut names,
            &[
                ("at::_ops::mm::call(at::Tensor const&)", "??"),
                ("torch::autograd::generated::MmBackward0::apply()", "??"),
            ],
        ),
        // native only, no landmark
        stack(&mut names, &[("malloc", "libc.so"), ("start", "")]),
        // the same frames as the first, but a distinct frame id each
        stack(&mut names, &[("train_step", "/home/me/train.py")]),
        StackId(0),
    ];
    let mut by_site = Vec::new();
    let sites: Vec<SiteId> = stacks
        .iter()
        .enumerate()
        .map(|(i, &stack)| {
            let site = stack_site(&mut names, stack);
            by_site.push((
                site,
                Totals {
                    bytes: 100 * (i as u64 % 2),
                    requested_bytes: 1,
                    count: 1,
                },
            ));
            site
        })
        .collect();
    let by_site: SiteTotals = by_site.into_iter().collect();
    for filter in [FrameFilter::default(), FrameFilter::All] {
        for by in [GroupBy::Stack, GroupBy::UserFrame, GroupBy::Op] {
            // What the plain labels and sums give, sorted as documented.
            let mut expected: Vec<Group> = Vec::new();
            for &site in &sites {
                let key = label(&names, site, by, &filter);
                match expected.iter_mut().find(|g| *g.key == *key) {
                    Some(g) => g.totals.add(by_site.get(site).unwrap()),
                    None => expected.push(Group {
                        key: key.into(),
                        totals: by_site.get(site).unwrap(),
                    }),
                }
            }
            sort_groups(&mut expected);
            assert_eq!(breakdown(&names, &by_site, by, &filter), expected);
        }
    }
}

#[test]
fn stack_groups_of_one_size_are_in_label_order() {
    // Names where one frame's text begins another's (`f` and `f (x)`,
    // `g` and `g h`), where they differ only deep in the stack, and
    // the empty stack: every group the same size, so the order is the
    // labels' alone.
    let mut names = Names::default();
    let frame = |names: &mut Names, function: &str| {
        let function = names.string(function);
        let file = names.string("");
        names.frame(Frame {
            function,
            file,
            line: 0,
        })
    };
    let [f, fx, g, gh, h, main, deep] =
        ["f", "f (x)", "g", "g h", "h", "main", "z"].map(|name| frame(&mut names, name));
    let stacks = [
        vec![f, main],
        vec![fx, main],
        vec![f],
        vec![g, h],
        vec![gh],
        vec![g, h, main, main, f, deep],
        vec![g, h, main, main, f, fx],
        vec![main, f],
        vec![],
    ];
    let mut by_site = Vec::new();
    for frames in &stacks {
        let stack = names.stack_leaf_first(frames);
        let site = stack_site(&mut names, stack);
        by_site.push((
            site,
            Totals {
                bytes: 64,
                requested_bytes: 64,
                count: 1,
            },
        ));
    }
    let by_site: SiteTotals = by_site.into_iter().collect();
    let filter = FrameFilter::All;
    let groups = breakdown(&names, &by_site, GroupBy::Stack, &filter);
    let keys: Vec<&str> = groups.iter().map(|g| &*g.key).collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    assert_eq!(keys.len(), stacks.len(), "{keys:?}");
    assert!(keys.contains(&"<no stack>"));

    // Kept groups are the breakdown's first ones and the rest are
    // counted, at every cut, with sizes that tie only in part.
    let mixed: SiteTotals = by_site
        .iter()
        .enumerate()
        .map(|(i, (site, totals))| {
            let bytes = 64 * (i as u64 % 3);
            (site, Totals { bytes, ..totals })
        })
        .collect();
    let mut grouper = Grouper::new(&names, &filter);
    for by in [GroupBy::Stack, GroupBy::UserFrame] {
        let all = grouper.breakdown(&mixed, by);
        assert!(all.len() > 3, "{all:?}");
        for keep in 0..=all.len() + 1 {
            let top = grouper.top_groups(&mixed, by, Some(keep));
            let kept = keep.min(all.len());
            assert_eq!(top.groups, all[..kept], "{by:?}, keeping {keep}");
            assert_eq!(top.omitted, all.len() - kept);
        }
    }
}

#[test]
fn site_totals_sum_each_site_once_in_site_order() {
    let t = |bytes| Totals {
        bytes,
        requested_bytes: bytes,
        count: 1,
    };
    let by_site: SiteTotals = [(7, t(1)), (2, t(10)), (7, t(100)), (0, t(1000))]
        .into_iter()
        .map(|(site, totals)| (SiteId(site), totals))
        .collect();
    let want = vec![
        (SiteId(0), t(1000)),
        (SiteId(2), t(10)),
        (
            SiteId(7),
            Totals {
                bytes: 101,
                requested_bytes: 101,
                count: 2,
            },
        ),
    ];
    assert_eq!(by_site.iter().collect::<Vec<_>>(), want);
    assert_eq!(by_site.get(SiteId(7)), Some(want[2].1));
    assert_eq!(by_site.get(SiteId(3)), None);

    // Ascending at first (summed with no index), then out of order.
    let ids = [1, 1, 3, 5, 3, 9, 0, 9];
    let by_site: SiteTotals = ids.iter().map(|&id| (SiteId(id), t(1 << id))).collect();
    let want: Vec<(SiteId, u64)> = [0, 1, 3, 5, 9]
        .iter()
        .map(|&id| {
            let n = ids.iter().filter(|&&i| i == id).count() as u64;
            (SiteId(id), n << id)
        })
        .collect();
    let got: Vec<(SiteId, u64)> = by_site.iter().map(|(s, t)| (s, t.bytes)).collect();
    assert_eq!(got, want);
}

#[test]
fn one_grouper_gives_each_memory_the_groups_a_fresh_one_gives() {
    let mut names = Names::default();
    let a = stack(
        &mut names,
        &[("f", "/home/me/a.py"), ("main", "/home/me/a.py")],
    );
    let b = stack(
        &mut names,
        &[("g", "/venv/site-packages/x.py"), ("main", "/home/me/a.py")],
    );
    let sites: Vec<SiteId> = [a, b, StackId(0)]
        .iter()
        .map(|&stack| stack_site(&mut names, stack))
        .collect();
    let totals = |bytes| Totals {
        bytes,
        requested_bytes: bytes,
        count: 1,
    };
    let first: SiteTotals = [(sites[0], totals(5)), (sites[1], totals(7))]
        .into_iter()
        .collect();
    let second: SiteTotals = [(sites[1], totals(3)), (sites[2], totals(3))]
        .into_iter()
        .collect();
    let filter = FrameFilter::default();
    let mut shared = Grouper::new(&names, &filter);
    for by_site in [&first, &second, &first] {
        for by in [GroupBy::Stack, GroupBy::UserFrame, GroupBy::Op] {
            assert_eq!(
                shared.breakdown(by_site, by),
                breakdown(&names, by_site, by, &filter)
            );
        }
    }
    let keys: Vec<String> = shared
        .breakdown(&second, GroupBy::Stack)
        .iter()
        .map(|g| g.key.to_string())
        .collect();
    assert_eq!(keys, ["<no stack>", "main /home/me/a.py:7"]);
}

#[test]
fn site_rows_sum_sites_alike_in_every_field() {
    let mut names = Names::default();
    let user = stack(
        &mut names,
        &[("f", "/home/me/a.py"), ("main", "/home/me/a.py")],
    );
    // Prints as `user` once library frames are hidden.
    let library = stack(
        &mut names,
        &[
            ("g", "/venv/site-packages/x.py"),
            ("f", "/home/me/a.py"),
            ("main", "/home/me/a.py"),
        ],
    );
    let op = names.string("dot");
    let sites: Vec<SiteId> = [
        (user, None),
        (library, None),
        (user, Some(op)),
        (StackId(0), None),
    ]
    .into_iter()
    .map(|(stack, op)| {
        names.site(crate::model::Site {
            stack,
            op,
            ..Default::default()
        })
    })
    .collect();
    let totals = |bytes| Totals {
        bytes,
        requested_bytes: bytes,
        count: 1,
    };
    let by_site: SiteTotals = sites
        .iter()
        .zip([3, 4, 7, 7])
        .map(|(&site, bytes)| (site, totals(bytes)))
        .collect();
    let filter = FrameFilter::default();
    let rows = Grouper::new(&names, &filter).site_rows(&by_site);
    let summary: Vec<(Option<&str>, &str, &str, u64)> = rows
        .iter()
        .map(|r| (r.op.as_deref(), &*r.stack, &*r.user_frame, r.totals.bytes))
        .collect();
    let stack_label = "f /home/me/a.py:7 <- main /home/me/a.py:7";
    assert_eq!(
        summary,
        [
            (None, "<no stack>", "<no stack>", 7),
            (None, stack_label, "f /home/me/a.py:7", 7),
            (Some("dot"), stack_label, "f /home/me/a.py:7", 7),
        ]
    );
    assert_eq!(rows[1].site, sites[0]);
    for row in &rows {
        for (by, text) in [
            (GroupBy::Stack, &row.stack),
            (GroupBy::UserFrame, &row.user_frame),
        ] {
            assert_eq!(label(&names, row.site, by, &filter), **text);
        }
    }
}

/// Memory allocated before the recording is one name by op, stack and user
/// frame: its stack (the free's, native frames only here; a block's own;
/// none) sits under a root frame of that name, which no filter hides.
#[test]
fn memory_from_before_the_recording_has_one_name_by_every_key() {
    use crate::model::BeforeRecording;
    let mut names = Names::default();
    let native = stack(
        &mut names,
        &[
            ("at::_ops::mm::call(at::Tensor const&)", "??"),
            ("torch::autograd::generated::MmBackward0::apply()", "??"),
        ],
    );
    let user = stack(&mut names, &[("train_step", "/home/me/train.py")]);
    let sites = [
        names.before_recording_site(BeforeRecording::Freed, native, None, None, None),
        names.before_recording_site(BeforeRecording::StillLive, user, None, None, None),
        names.before_recording_site(BeforeRecording::StillLive, StackId(0), None, None, None),
        stack_site(&mut names, user),
    ];
    let by_site: SiteTotals = sites
        .iter()
        .enumerate()
        .map(|(i, &site)| {
            let totals = Totals {
                bytes: 10 << i,
                requested_bytes: 10 << i,
                count: 1,
            };
            (site, totals)
        })
        .collect();
    let (live, freed) = (
        BeforeRecording::StillLive.name(),
        BeforeRecording::Freed.name(),
    );
    let keys = |by: GroupBy, filter: &FrameFilter| -> Vec<(String, u64)> {
        let mut groups: Vec<(String, u64)> = breakdown(&names, &by_site, by, filter)
            .into_iter()
            .map(|g| (g.key.to_string(), g.totals.bytes))
            .collect();
        groups.sort();
        groups
    };
    let filter = FrameFilter::default();
    let mut expected = vec![(live.to_string(), 60), (freed.to_string(), 10)];
    expected.sort();
    let mut with_user = expected.clone();
    with_user.push(("train_step /home/me/train.py:7".to_string(), 80));
    with_user.sort();
    assert_eq!(keys(GroupBy::UserFrame, &filter), with_user);
    let mut by_op = expected.clone();
    by_op.push((NONE_LABEL.to_string(), 80));
    by_op.sort();
    assert_eq!(keys(GroupBy::Op, &filter), by_op);
    let mut stacks = vec![
        (format!("train_step /home/me/train.py:7 <- {live}"), 20),
        (live.to_string(), 40),
        (freed.to_string(), 10),
        ("train_step /home/me/train.py:7".to_string(), 80),
    ];
    stacks.sort();
    assert_eq!(keys(GroupBy::Stack, &filter), stacks);
    // The free's stack is never grouped as an allocation's, with
    // --all-frames too: the freed memory is its name alone.
    let all = keys(GroupBy::Stack, &FrameFilter::All);
    assert!(all.iter().any(|(k, b)| *b == 10 && k == freed));
    assert!(!all
        .iter()
        .any(|(k, _)| k != freed && k.ends_with(&format!("<- {freed}"))));
    // The name alone is no recorded stack; a recorded stack under it is.
    let only = |site: SiteId| [(site, Totals::default())].into_iter().collect();
    assert!(!has_values(&names, &only(sites[2]), GroupBy::Stack));
    assert!(has_values(&names, &only(sites[1]), GroupBy::Stack));
    // The plain labels agree with the grouper.
    for &site in &sites {
        for by in [GroupBy::Stack, GroupBy::UserFrame, GroupBy::Op] {
            let key = label(&names, site, by, &filter);
            assert!(keys(by, &filter).iter().any(|(k, _)| *k == key), "{key}");
        }
    }
}
