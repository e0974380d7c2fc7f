//! `memtool._memtool`, the extension module behind `import memtool`: a
//! profile's summary (the JSON document of `memtool summary --format json`)
//! and its allocations table (the Parquet file of `memtool export`), from a
//! file or from bytes in memory. `python/memtool/__init__.py` is the
//! documented interface; this module is its plumbing.
//!
//! Each call parses with the GIL released, so Python threads (a Spark
//! executor's, say) parse several profiles at once.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use memtool_core::analysis::{category, summary, warning_notes, FrameFilter, Options};
use memtool_core::model::Profile;
use memtool_core::report::Report;
use memtool_core::{LoadOptions, Source};
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

create_exception!(
    _memtool,
    ProfileError,
    PyValueError,
    "An input memtool cannot read as a profile (the `memtool` command's exit 2)."
);

/// Where a profile's bytes come from: a file memtool opens, or bytes the
/// caller read (a Spark `binaryFile` row's `content`).
enum Input {
    Path(String),
    Bytes(Vec<u8>),
}

impl Input {
    /// `source` as given from Python: `str` is a path (the wrapper passes
    /// `os.fspath` of path-likes), `bytes` the profile itself.
    fn from_python(source: &Bound<'_, PyAny>) -> PyResult<Input> {
        if let Ok(bytes) = source.cast::<PyBytes>() {
            return Ok(Input::Bytes(bytes.as_bytes().to_vec()));
        }
        if source.is_instance_of::<PyString>() {
            return Ok(Input::Path(source.extract::<String>()?));
        }
        Err(PyTypeError::new_err(format!(
            "a profile is a path (str) or its bytes, not {}",
            source.get_type().name()?
        )))
    }
}

/// Reads `input` into a profile, named `name` in its messages and rows.
fn load(input: Input, name: &str) -> Result<Profile, Failure> {
    let source = match input {
        Input::Bytes(bytes) => Source::from_bytes(name, bytes),
        Input::Path(path) => {
            // The path in the message, as the command gives it; the kind
            // picks Python's subclass (`FileNotFoundError`, ...).
            let named = |e: std::io::Error| {
                Failure::Io(std::io::Error::new(e.kind(), format!("{path}: {e}")))
            };
            let file = std::fs::File::open(&path).map_err(named)?;
            if file.metadata().map_err(named)?.is_dir() {
                return Err(Failure::Profile(format!(
                    "{path}: is a directory; give one profile file (the memtool command reads run directories and logdirs)"
                )));
            }
            Source::new(name, file)
        }
    };
    let mut profile = memtool_core::load(vec![source], &LoadOptions::default())
        .map_err(|e| Failure::Profile(e.to_string()))?;
    // Categories inferred where the file names none, as every command
    // does, so the documents equal the command's.
    category::assign(&mut profile, &[], category::Inference::WhereMissing);
    Ok(profile)
}

/// What went wrong, kept free of Python objects so it crosses the released
/// GIL; turned into the Python exception at the end.
enum Failure {
    /// The file could not be opened: Python's own `OSError` subclass.
    Io(std::io::Error),
    /// Not a profile memtool reads: `ProfileError`.
    Profile(String),
    /// A table could not be encoded (a bug): `RuntimeError`.
    Internal(String),
}

impl From<Failure> for PyErr {
    fn from(failure: Failure) -> PyErr {
        match failure {
            Failure::Io(e) => e.into(),
            Failure::Profile(message) => ProfileError::new_err(message),
            Failure::Internal(message) => PyRuntimeError::new_err(message),
        }
    }
}

/// The analysis options the command line's defaults give, with its
/// `--all-frames`.
fn options(all_frames: bool) -> Options {
    Options {
        frames: if all_frames {
            FrameFilter::All
        } else {
            FrameFilter::default()
        },
        ..Options::default()
    }
}

/// The name a profile's messages and rows carry: `name`, else the path,
/// else `<bytes>`.
fn display_name(input: &Input, name: Option<String>) -> String {
    name.unwrap_or_else(|| match input {
        Input::Path(path) => path.clone(),
        Input::Bytes(_) => "<bytes>".to_string(),
    })
}

/// The summary document of `memtool summary --format json` as JSON text.
#[pyfunction]
#[pyo3(signature = (source, name = None, all_frames = false))]
fn summary_json(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    name: Option<String>,
    all_frames: bool,
) -> PyResult<String> {
    let input = Input::from_python(source)?;
    let name = display_name(&input, name);
    let json = py.detach(move || -> Result<String, Failure> {
        let profile = load(input, &name)?;
        let report = summary::summarize(&profile, &options(all_frames));
        let mut out = Vec::new();
        report
            .write_json(&mut out)
            .map_err(|e| Failure::Internal(format!("{name}: the summary as JSON: {e}")))?;
        String::from_utf8(out).map_err(|e| Failure::Internal(e.to_string()))
    })?;
    Ok(json)
}

/// The allocations table of `memtool export` as a Parquet file's bytes, and
/// the reader's warnings (one line each, as the command prints them).
#[pyfunction]
#[pyo3(signature = (source, name = None, all_frames = false, row_group_rows = None))]
fn allocations_parquet<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    name: Option<String>,
    all_frames: bool,
    row_group_rows: Option<usize>,
) -> PyResult<(Bound<'py, PyBytes>, Vec<String>)> {
    let input = Input::from_python(source)?;
    let name = display_name(&input, name);
    let rows = row_group_rows.unwrap_or(memtool_parquet::DEFAULT_ROW_GROUP_ROWS as usize);
    if rows == 0 {
        return Err(PyValueError::new_err("row_group_rows must be at least 1"));
    }
    let (file, warnings) = py.detach(move || -> Result<_, Failure> {
        let profile = load(input, &name)?;
        let file = memtool_parquet::allocations_file(&profile, &name, &options(all_frames), rows)
            .map_err(|e| {
            Failure::Internal(format!("{name}: the allocations as Parquet: {e}"))
        })?;
        Ok((file, warning_notes(&profile.warnings)))
    })?;
    Ok((PyBytes::new(py, &file), warnings))
}

/// The rank number a file's name gives (`rank3`, `rank_3`, `rank-3`, any
/// case; else the last `-N.`/`_N.` before an extension, as in
/// `snapshot-3.pickle`), or `None`: the rule `memtool ranks` numbers its
/// rank files by, so a Spark job's ranks are the command's.
#[pyfunction]
fn rank_of(path: &str) -> Option<u64> {
    memtool_core::analysis::ranks::rank_number(path)
}

/// The extension module `memtool._memtool`.
#[pymodule]
fn _memtool(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(summary_json, m)?)?;
    m.add_function(wrap_pyfunction!(allocations_parquet, m)?)?;
    m.add_function(wrap_pyfunction!(rank_of, m)?)?;
    m.add("ProfileError", m.py().get_type::<ProfileError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
