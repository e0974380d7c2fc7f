//! The protobuf wire format, read and written field by field: the
//! [`reader`] walks inputs too large to decode into owned messages (XSpace),
//! the [`writer`] streams memtool-gen's scaled fixtures.

pub mod reader;
pub mod writer;
