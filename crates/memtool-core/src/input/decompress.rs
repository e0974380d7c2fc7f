//! Transparent gzip decompression with a size limit, so a small hostile file
//! cannot inflate into all of the machine's memory.

use std::io::Read;

use flate2::bufread::GzDecoder;

use crate::error::{Error, Result};

/// True when the bytes start with the gzip magic number.
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// The default cap on an input's decompressed size. Fixed, not scaled by the
/// compressed size: deflate reaches a thousand to one, so any multiple of
/// the input would let a file of a few hundred MB ask for terabytes.
pub(crate) const DEFAULT_LIMIT: u64 = 4 << 30;

/// The least room made for decompressed bytes at a time.
const GROW_MIN: usize = 64 << 10;

/// What [`gunzip`] gives: the decompressed bytes, and a warning when bytes
/// after the last gzip member were ignored.
#[derive(Debug)]
pub(crate) struct Gunzipped {
    pub bytes: Vec<u8>,
    pub warning: Option<String>,
}

/// Readable size of a limit: whole GiB or MiB when it is one, else bytes.
pub(crate) fn limit_text(limit: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if limit >= GIB && limit.is_multiple_of(GIB) {
        format!("{} GiB", limit / GIB)
    } else if limit >= MIB && limit.is_multiple_of(MIB) {
        format!("{} MiB", limit / MIB)
    } else {
        format!("{limit} bytes")
    }
}

/// Inflates every gzip member in `bytes` (PyTorch and pprof writers may
/// concatenate members), refusing to go past `limit` bytes. Once the first
/// `head_len` bytes are out, `judge_head` may refuse the input (it is no
/// profile), so a bomb that is not one is never inflated further. NUL
/// padding after the last member is ignored, as `gzip -d` does; other
/// trailing bytes are ignored with a warning.
pub(crate) fn gunzip(
    path: &str,
    bytes: &[u8],
    limit: u64,
    head_len: u64,
    judge_head: &dyn Fn(&[u8]) -> Result<()>,
) -> Result<Gunzipped> {
    let corrupt = |message: String, offset: Option<u64>| Error::Corrupt {
        path: path.to_string(),
        format: "gzip",
        message,
        offset,
    };
    let mut out = Vec::new();
    if out
        .try_reserve(bytes.len().saturating_mul(4).min(1 << 30))
        .is_err()
    {
        out = Vec::new();
    }
    let mut rest = bytes;
    let mut head_judged = false;
    let mut warning = None;
    loop {
        let mut member = GzDecoder::new(rest);
        loop {
            let cap = if head_judged {
                limit
            } else {
                head_len.min(limit)
            };
            let wanted = cap.saturating_add(1).saturating_sub(out.len() as u64);
            // Room made here, fallibly, and reads kept within it: std's
            // read_to_end grows a full vector infallibly (an abort when
            // memory runs out).
            let out_of_memory = |have: usize| Error::OutOfMemory {
                path: path.to_string(),
                what: "the decompressed input",
                have: Some(crate::units::bytes(have as u64)),
            };
            if out.capacity() - out.len() < GROW_MIN {
                let more = out.len().max(GROW_MIN);
                out.try_reserve(more)
                    .map_err(|_| out_of_memory(out.len()))?;
            }
            let room = (out.capacity() - out.len()) as u64;
            let before = out.len();
            let read = (&mut member).take(wanted.min(room)).read_to_end(&mut out);
            if let Err(e) = read {
                return Err(match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => corrupt(
                        format!(
                            "gzip stream is truncated (ends after {} decompressed bytes)",
                            out.len()
                        ),
                        None,
                    ),
                    std::io::ErrorKind::OutOfMemory => out_of_memory(out.len()),
                    _ => corrupt(format!("gzip stream is corrupt: {e}"), None),
                });
            }
            if out.len() as u64 > limit {
                return Err(Error::Limit {
                    path: path.to_string(),
                    what: "decompressed size",
                    limit: limit_text(limit),
                    hint: "raise it with --max-decompressed BYTES if the file is trusted",
                });
            }
            if !head_judged && out.len() as u64 > head_len {
                head_judged = true;
                judge_head(&out[..head_len as usize])?;
                continue;
            }
            if out.len() == before || (out.len() - before) as u64 == wanted {
                // The member ended, or the cap was passed.
                break;
            }
        }
        rest = member.into_inner();
        if rest.is_empty() || rest.iter().all(|&b| b == 0) {
            break;
        }
        if !is_gzip(rest) {
            let at = bytes.len() - rest.len();
            warning = Some(format!(
                "{} bytes after the end of the gzip stream (at byte {at}) are not gzip data \
                 and were ignored",
                rest.len()
            ));
            break;
        }
    }
    Ok(Gunzipped {
        bytes: out,
        warning,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{write::GzEncoder, Compression};
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn reads_concatenated_members() {
        let mut both = gz(b"hello ");
        both.extend(gz(b"world"));
        assert_eq!(
            gunzip("x", &both, 100, 64, &|_| Ok(())).unwrap().bytes,
            b"hello world"
        );
    }

    #[test]
    fn stops_at_the_limit() {
        let bomb = gz(&vec![0u8; 1 << 20]);
        let err = gunzip("bomb.gz", &bomb, 1000, 64, &|_| Ok(()))
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "bomb.gz: decompressed size exceeds the limit of 1000 bytes; \
             raise it with --max-decompressed BYTES if the file is trusted"
        );
    }

    #[test]
    fn truncation_is_reported() {
        let data = gz(&vec![7u8; 10_000]);
        let err = gunzip("t.gz", &data[..data.len() / 2], 1 << 20, 64, &|_| Ok(())).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("t.gz: invalid gzip: gzip stream is"),
            "{err}"
        );
    }

    fn no_judge(_: &[u8]) -> Result<()> {
        Ok(())
    }

    #[test]
    fn the_default_limit_does_not_grow_with_the_input() {
        assert_eq!(limit_text(DEFAULT_LIMIT), "4 GiB");
        assert_eq!(limit_text(400 << 20), "400 MiB");
        assert_eq!(limit_text(1000), "1000 bytes");
    }

    #[test]
    fn nul_padding_after_the_last_member_is_accepted() {
        let mut padded = gz(b"hello");
        padded.extend([0u8; 512]);
        let out = gunzip("p.gz", &padded, 100, 64, &no_judge).unwrap();
        assert_eq!(out.bytes, b"hello");
        assert!(out.warning.is_none());
    }

    #[test]
    fn trailing_bytes_after_the_stream_are_named() {
        let mut both = gz(b"hello");
        let end = both.len();
        both.extend(b"garbage!");
        let out = gunzip("g.gz", &both, 100, 64, &no_judge).unwrap();
        assert_eq!(out.bytes, b"hello");
        assert_eq!(
            out.warning.unwrap(),
            format!(
                "8 bytes after the end of the gzip stream (at byte {end}) are not gzip data \
                 and were ignored"
            )
        );
    }

    #[test]
    fn a_head_judged_no_profile_stops_the_inflating() {
        // 64 MiB of zeros: refused after the head, never inflated whole.
        let bomb = gz(&vec![0u8; 64 << 20]);
        let seen = std::cell::Cell::new(0);
        let judge = |head: &[u8]| {
            seen.set(head.len());
            Err(Error::NoData {
                path: "b.gz".into(),
                message: "no".into(),
            })
        };
        let start = std::time::Instant::now();
        let err = gunzip("b.gz", &bomb, 1 << 30, 1 << 16, &judge).unwrap_err();
        assert_eq!(err.to_string(), "b.gz: no");
        assert_eq!(seen.get(), 1 << 16);
        assert!(start.elapsed().as_millis() < 500);
    }
}
