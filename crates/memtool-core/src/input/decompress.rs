//! Transparent gzip decompression with a size limit, so a small hostile file
//! cannot inflate into all of the machine's memory.

use std::io::Read;

use flate2::read::MultiGzDecoder;

use crate::error::{Error, Result};

/// True when the bytes start with the gzip magic number.
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// The default cap on decompressed size for an input of `compressed_len` bytes:
/// 100× the input, at least 256 MiB, at most 16 GiB.
pub(crate) fn default_limit(compressed_len: usize) -> u64 {
    const MIB: u64 = 1 << 20;
    (compressed_len as u64)
        .saturating_mul(100)
        .clamp(256 * MIB, 16 * 1024 * MIB)
}

/// Inflates every gzip member in `bytes` (PyTorch and pprof writers may
/// concatenate members), refusing to go past `limit` bytes.
pub(crate) fn gunzip(path: &str, bytes: &[u8], limit: u64) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(4).min(1 << 30));
    let mut reader = MultiGzDecoder::new(bytes).take(limit.saturating_add(1));
    if let Err(e) = reader.read_to_end(&mut out) {
        let message = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => format!(
                "gzip stream is truncated (ends after {} decompressed bytes)",
                out.len()
            ),
            _ => format!("gzip stream is corrupt: {e}"),
        };
        return Err(Error::Corrupt {
            path: path.to_string(),
            format: "gzip",
            message,
            offset: None,
        });
    }
    if out.len() as u64 > limit {
        return Err(Error::Limit {
            path: path.to_string(),
            what: "decompressed size",
            limit: format!("{limit} bytes"),
            hint: "raise it with --max-decompressed BYTES if the file is trusted",
        });
    }
    Ok(out)
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
        assert_eq!(gunzip("x", &both, 100).unwrap(), b"hello world");
    }

    #[test]
    fn stops_at_the_limit() {
        let bomb = gz(&vec![0u8; 1 << 20]);
        let err = gunzip("bomb.gz", &bomb, 1000).unwrap_err().to_string();
        assert_eq!(
            err,
            "bomb.gz: decompressed size exceeds the limit of 1000 bytes; \
             raise it with --max-decompressed BYTES if the file is trusted"
        );
    }

    #[test]
    fn truncation_is_reported() {
        let data = gz(&vec![7u8; 10_000]);
        let err = gunzip("t.gz", &data[..data.len() / 2], 1 << 20).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("t.gz: invalid gzip: gzip stream is"),
            "{err}"
        );
    }
}
