//! JAX device-memory pprof with N samples, and a series of K such snapshots
//! in which one call stack keeps growing (the JAX documentation's leak).
//!
//! The pattern's buffer samples are cycled; each copy gets two synthetic
//! caller frames (`layer_i` in `model.py`, `block_j`) below the pattern's
//! stack so that N samples have about N distinct stacks, as a large model
//! has, instead of N copies of a handful. Executable samples are kept once.
//! Samples are streamed through gzip one at a time.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use flate2::write::GzEncoder;
use flate2::Compression;
use memtool_proto::pprof;
use prost::Message;

use memtool_proto::wire::writer::{put_len_prefix, put_packed, put_varint_field};

pub struct Pattern {
    profile: pprof::Profile,
    buffers: Vec<pprof::Sample>,
    executables: Vec<pprof::Sample>,
}

impl Pattern {
    /// Each buffer sample's `space` value, in pattern order.
    #[cfg(test)]
    pub fn buffer_bytes(&self) -> Vec<u64> {
        let strings = &self.profile.string_table;
        let space = self
            .profile
            .sample_type
            .iter()
            .position(|t| strings.get(t.r#type as usize).map(Vec::as_slice) == Some(b"space"))
            .unwrap_or(0);
        self.buffers
            .iter()
            .map(|s| s.value.get(space).copied().unwrap_or(0) as u64)
            .collect()
    }
}

pub fn read_pattern(bytes: &[u8]) -> Result<Pattern> {
    let raw = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(bytes), &mut out)
            .context("the pattern is not valid gzip")?;
        out
    } else {
        bytes.to_vec()
    };
    let mut profile = pprof::Profile::decode(raw.as_slice()).context("the pattern is not pprof")?;
    let find = |s: &[u8]| profile.string_table.iter().position(|t| t == s);
    let (kind, executable) = (find(b"kind"), find(b"executable"));
    let (executables, buffers) = std::mem::take(&mut profile.sample)
        .into_iter()
        .partition::<Vec<_>, _>(|s| {
            s.label
                .iter()
                .any(|l| Some(l.key as usize) == kind && Some(l.str as usize) == executable)
        });
    anyhow::ensure!(!buffers.is_empty(), "the pattern has no buffer samples");
    Ok(Pattern {
        profile,
        buffers,
        executables,
    })
}

/// Writes one snapshot with `n` buffer samples; `leak` adds that many
/// copies' worth of the growing stack (0 for none). With `devices` > 0 the
/// buffers are dealt round-robin to that many devices (`device` labels
/// `dev:0`, `dev:1`…) in place of the pattern's, for profiles of many
/// memories.
pub fn write_snapshot(
    pattern: &Pattern,
    n: u64,
    leak: u64,
    devices: u64,
    out: &mut dyn Write,
) -> Result<()> {
    let mut head = pattern.profile.clone();
    let device_key = add_string(&mut head, "device");
    // Pushed, not looked up: 10^5 names would make the lookup quadratic.
    let device_names: Vec<i64> = (0..devices)
        .map(|d| {
            head.string_table.push(format!("dev:{d}").into_bytes());
            head.string_table.len() as i64 - 1
        })
        .collect();
    let per = pattern.buffers.len() as u64;
    // Two levels of `fan` callers give per × fan² distinct stacks ≥ n.
    let fan = ((n as f64 / per as f64).sqrt().ceil() as u64).max(1);
    let model_py = add_string(&mut head, "model.py");
    let next_function = head.function.iter().map(|f| f.id).max().unwrap_or(0) + 1;
    let next_location = head.location.iter().map(|l| l.id).max().unwrap_or(0) + 1;
    let add_frame = |head: &mut pprof::Profile, name: String, line: i64| -> u64 {
        let name = add_string(head, &name);
        let id = head.function.len() as u64;
        let function_id = next_function + id;
        head.function.push(pprof::Function {
            id: function_id,
            name,
            system_name: name,
            filename: model_py,
            start_line: line,
        });
        let location_id = next_location + head.location.len() as u64;
        head.location.push(pprof::Location {
            id: location_id,
            line: vec![pprof::Line {
                function_id,
                line,
                column: 0,
            }],
            ..Default::default()
        });
        location_id
    };
    let layers: Vec<u64> = (0..fan)
        .map(|i| add_frame(&mut head, format!("layer_{i}"), 10 + i as i64))
        .collect();
    let blocks: Vec<u64> = (0..fan)
        .map(|j| add_frame(&mut head, format!("block_{j}"), 1000 + j as i64))
        .collect();
    let leak_frame = add_frame(&mut head, "keep_for_later".to_string(), 7);

    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&head.encode_to_vec())?;
    let mut buf = Vec::new();
    let mut sample = |gz: &mut GzEncoder<&mut dyn Write>,
                      base: &pprof::Sample,
                      extra: &[u64],
                      count_times: i64,
                      device: Option<i64>|
     -> Result<()> {
        buf.clear();
        let mut body = Vec::new();
        // The synthetic callers go just above the outermost frame (`<module>`).
        let split = base.location_id.len().saturating_sub(1);
        let (inner, outer) = base.location_id.split_at(split);
        put_packed(
            &mut body,
            1,
            inner
                .iter()
                .chain(extra.iter())
                .chain(outer.iter())
                .copied(),
        );
        put_packed(
            &mut body,
            2,
            base.value
                .iter()
                .map(|&v| v.saturating_mul(count_times) as u64),
        );
        let put_label = |body: &mut Vec<u8>, key: i64, str: i64, num: i64| {
            let mut label = Vec::new();
            put_varint_field(&mut label, 1, key as u64);
            if str != 0 {
                put_varint_field(&mut label, 2, str as u64);
            }
            if num != 0 {
                put_varint_field(&mut label, 3, num as u64);
            }
            memtool_proto::wire::writer::put_bytes_field(body, 3, &label);
        };
        for l in &base.label {
            if device.is_some() && l.key == device_key {
                continue;
            }
            put_label(&mut body, l.key, l.str, l.num);
        }
        if let Some(device) = device {
            put_label(&mut body, device_key, device, 0);
        }
        put_len_prefix(&mut buf, 2, body.len() as u64);
        buf.extend_from_slice(&body);
        gz.write_all(&buf)?;
        Ok(())
    };
    for i in 0..n {
        let base = &pattern.buffers[(i % per) as usize];
        let copy = i / per;
        let extra = [
            layers[(copy % fan) as usize],
            blocks[((copy / fan) % fan) as usize],
        ];
        let device = (devices > 0).then(|| device_names[(i % devices) as usize]);
        sample(&mut gz, base, &extra, 1, device)?;
    }
    if leak > 0 {
        let device = device_names.first().copied();
        sample(
            &mut gz,
            &pattern.buffers[0],
            &[leak_frame],
            leak as i64,
            device,
        )?;
    }
    for e in &pattern.executables {
        sample(&mut gz, e, &[], 1, None)?;
    }
    gz.finish()?.flush()?;
    Ok(())
}

fn add_string(p: &mut pprof::Profile, s: &str) -> i64 {
    if let Some(i) = p.string_table.iter().position(|t| t == s.as_bytes()) {
        return i as i64;
    }
    p.string_table.push(s.as_bytes().to_vec());
    p.string_table.len() as i64 - 1
}

/// `dir/memory1.prof … memoryK.prof`, the growing stack holding k copies of
/// the pattern's first buffer in snapshot k.
pub fn generate_series(
    pattern: &[u8],
    n: u64,
    k: u64,
    devices: u64,
    dir: &Path,
) -> Result<Vec<std::path::PathBuf>> {
    let pattern = read_pattern(pattern)?;
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let mut paths = Vec::new();
    for s in 1..=k.max(1) {
        let path = dir.join(format!("memory{s}.prof"));
        let file = std::fs::File::create(&path)
            .with_context(|| format!("{}: cannot create", path.display()))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let leak = if k > 1 { s } else { 0 };
        write_snapshot(&pattern, n, leak, devices, &mut out)?;
        out.flush()?;
        paths.push(path);
    }
    Ok(paths)
}
