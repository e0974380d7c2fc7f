//! A summary put together from parts read a file at a time is the summary
//! of the files read as one profile, byte for byte in JSON, on the
//! repository's snapshot files (out-of-memory dumps of one device, and
//! training steps with categories, gzip'd).

use std::io::Read;
use std::path::PathBuf;

use crate::analysis::{summary, Options};
use crate::{LoadOptions, Source};

/// The repository's snapshot files in `folder` (crates/memtool/tests/data),
/// name order, gunzipped, with their paths as given on a command line.
fn snapshots(folder: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../memtool/tests/data")
        .join(folder);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".pickle"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            let bytes = if bytes.starts_with(&[0x1f, 0x8b]) {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&bytes[..])
                    .read_to_end(&mut out)
                    .unwrap();
                out
            } else {
                bytes
            };
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let name = name.strip_suffix(".gz").unwrap_or(&name).to_string();
            (format!("data/{folder}/{name}"), bytes)
        })
        .collect()
}

fn sources(files: &[(String, Vec<u8>)]) -> Vec<Source> {
    files
        .iter()
        .map(|(path, bytes)| Source::from_bytes(path.clone(), bytes.clone()))
        .collect()
}

/// The JSON of the summary of `files` read whole, and put together from
/// parts (None where the parts cannot be).
fn both(files: &[(String, Vec<u8>)], options: &Options) -> (String, Option<String>) {
    let load = LoadOptions::default();
    let whole = crate::load(sources(files), &load).unwrap();
    let whole = serde_json::to_string_pretty(&summary::summarize(&whole, options)).unwrap();
    let parts = crate::load_each(
        sources(files),
        2,
        crate::Reading::Part,
        &load,
        |s| Ok((s, ())),
        |(), profile| super::reduce(&profile.unwrap(), options),
    );
    let merged = super::merge(parts).map(|r| serde_json::to_string_pretty(&r).unwrap());
    (whole, merged)
}

#[test]
fn parts_give_the_summary_of_the_whole() {
    let options = Options::default();
    let oom = snapshots("oom");
    let categories = snapshots("categories");
    assert!(oom.len() >= 5 && categories.len() >= 6);
    for set in [&oom, &categories] {
        let (whole, merged) = both(set, &options);
        assert_eq!(Some(&whole), merged.as_ref());
        // Every file's memory, labelled with its file.
        for (path, _) in set.iter() {
            let name = path.rsplit('/').next().unwrap();
            assert!(whole.contains(&format!(" ({name})\"")), "{name}: {whole}");
        }
    }
    assert!(both(&oom, &options).0.contains("\"verdict\""));
    // Out of order, and two files of one name in two folders: named by
    // their paths.
    let mut mixed: Vec<(String, Vec<u8>)> = oom.iter().rev().cloned().collect();
    mixed.push(("other/capacity.pickle".to_string(), oom[0].1.clone()));
    mixed.extend(categories.iter().take(2).cloned());
    let (whole, merged) = both(&mixed, &options);
    assert!(whole.contains("(other/capacity.pickle)"), "{whole}");
    assert_eq!(Some(whole), merged);
}

#[test]
fn a_file_given_twice_is_two_memories() {
    let oom = snapshots("oom");
    // With a folder: the second is named by its path, as the whole names it.
    let twice = vec![oom[0].clone(), oom[0].clone()];
    let (whole, merged) = both(&twice, &Options::default());
    assert!(whole.contains("(data/oom/after_failure.pickle)"), "{whole}");
    assert_eq!(Some(whole), merged);
    // A bare name given twice: both are named by it, as the whole names
    // them.
    let bare = ("after_failure.pickle".to_string(), oom[0].1.clone());
    let (whole, merged) = both(&[bare.clone(), bare], &Options::default());
    let doc: serde_json::Value = serde_json::from_str(&whole).unwrap();
    let ids: Vec<&str> = doc["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["cuda:0 (after_failure.pickle)"; 2]);
    assert_eq!(Some(whole), merged);
}
