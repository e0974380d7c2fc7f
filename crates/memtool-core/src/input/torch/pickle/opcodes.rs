//! Names of the opcodes the decoder refuses, for its messages.

pub(super) fn opcode_name(op: u8) -> &'static str {
    match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x82..=0x84 => "EXT",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        b'I' => "INT (protocol 0)",
        b'L' => "LONG (protocol 0)",
        b'S' => "STRING (protocol 0)",
        b'V' => "UNICODE (protocol 0)",
        b'F' => "FLOAT (protocol 0)",
        b'p' => "PUT (protocol 0)",
        b'g' => "GET (protocol 0)",
        _ => "unknown",
    }
}
