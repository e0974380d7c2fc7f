//! PyTorch JSON inputs (stub).

use crate::error::{Error, Result};
use crate::model::{Format, Profile};

pub(crate) fn classify(_bytes: &[u8]) -> Format {
    Format::TorchTrace
}

pub(crate) fn read(
    _profile: &mut Profile,
    path: &str,
    _bytes: &[u8],
    _format: Format,
) -> Result<()> {
    Err(Error::NoData {
        path: path.into(),
        message: "todo".into(),
    })
}
