use std::rc::Rc;

use super::*;

/// A visitor that claims nothing: the pickle is decoded into one value.
struct PlainData;

impl Visitor for PlainData {
    fn route(&mut self, _: Parent<'_>, _: bool) -> Option<u32> {
        None
    }
    fn item(&mut self, _: u32, _: &Value, _: &mut Memo) -> std::result::Result<bool, String> {
        Ok(false)
    }
}

fn plain(bytes: &[u8]) -> Result<Value> {
    decode(&bytes.to_vec(), &mut PlainData, Paths::Fast, None)
}

fn error(bytes: &[u8]) -> String {
    match plain(bytes) {
        Ok(v) => panic!("decoded {v:?}"),
        Err(e) => e.message,
    }
}

/// `pickle.dumps({'a': [1, 'x', None, True, 1.5], 'b': 2**40}, protocol=4)`
/// without FRAME, plus a shared list referenced twice.
#[test]
fn decodes_plain_data_and_shares_memoized_containers() {
    let mut p = vec![0x80, 4, b'}', 0x94, b'('];
    p.extend([0x8c, 1, b'a', 0x94, b']', 0x94, b'(']);
    p.extend([b'K', 1, 0x8c, 1, b'x', 0x94, b'N', 0x88, b'G']);
    p.extend(1.5f64.to_be_bytes());
    p.extend([b'e', 0x8c, 1, b'b', 0x94, 0x8a, 6, 0, 0, 0, 0, 0, 1]);
    p.extend([0x8c, 1, b'c', 0x94, b'h', 2, b'u', b'.']);
    let v = plain(&p).unwrap();
    let a = v.get("a").unwrap().items().unwrap();
    assert_eq!(a.len(), 5);
    assert_eq!(a[0].as_i64(), Some(1));
    assert_eq!(a[1].as_str(), Some("x"));
    assert!(matches!(a[2], Value::None));
    assert!(matches!(a[3], Value::Bool(true)));
    assert!(matches!(a[4], Value::Float(f) if f == 1.5));
    assert_eq!(v.get("b").unwrap().as_i64(), Some(1 << 40));
    let (Some(Value::List(x)), Some(Value::List(y))) = (v.get("a"), v.get("c")) else {
        panic!("lists expected");
    };
    assert!(Rc::ptr_eq(&x, &y), "a memo reference is the same list");
}

#[test]
fn long_integers_of_any_length_decode() {
    // LONG1 of -1 (one byte 0xff), LONG1 of 2**64 (9 bytes), LONG4 of 2**80.
    assert_eq!(plain(&[0x8a, 1, 0xff, b'.']).unwrap().as_i64(), Some(-1));
    let mut p = vec![0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'.'];
    assert!(matches!(plain(&p).unwrap(), Value::BigInt(f) if f == 18446744073709551616.0));
    p = vec![0x8b, 11, 0, 0, 0];
    p.extend([0; 10]);
    p.extend([1, b'.']);
    assert!(matches!(plain(&p).unwrap(), Value::BigInt(f) if f == 2f64.powi(80)));
    // LONG1 of -2**64 - 1 in 9 bytes two's complement.
    let p = [
        0x8a, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, b'.',
    ];
    assert!(matches!(plain(&p).unwrap(), Value::BigInt(f) if f == -18446744073709551617.0));
}

#[test]
fn code_execution_opcodes_are_refused() {
    // GLOBAL 'os\nsystem\n', then REDUCE.
    let mut p = vec![0x80, 2, b'c'];
    p.extend(b"os\nsystem\n");
    p.extend([b'X', 2, 0, 0, 0, b'l', b's', 0x85, b'R', b'.']);
    let e = error(&p);
    assert!(e.contains("GLOBAL") && e.contains("refuses"), "{e}");
    for (op, name) in [
        (b'R', "REDUCE"),
        (0x93, "STACK_GLOBAL"),
        (b'b', "BUILD"),
        (b'i', "INST"),
        (b'o', "OBJ"),
        (0x81, "NEWOBJ"),
        (0x92, "NEWOBJ_EX"),
        (b'Q', "BINPERSID"),
    ] {
        let e = error(&[0x80, 4, b'N', b'N', op, b'.']);
        assert!(e.contains(name), "{name}: {e}");
    }
}

#[test]
fn missing_memo_entries_are_errors() {
    let e = error(&[0x80, 4, b']', b'h', 7, b'.']);
    assert!(e.contains("memo entry 7"), "{e}");
    let e = error(&[0x80, 4, b'j', 0xff, 0xff, 0xff, 0xff, b'.']);
    assert!(e.contains("memo entry 4294967295"), "{e}");
}

#[test]
fn truncated_input_and_huge_claimed_lengths_are_errors() {
    assert!(error(&[0x80, 4, b']']).contains("ends before STOP"));
    assert!(error(&[0x80, 4, b'J', 1, 2]).contains("truncated"));
    // BINUNICODE8 claiming 2**63 bytes, BINBYTES8 claiming u64::MAX, LONG4
    // claiming 2 GiB: nothing is allocated for them.
    let mut p = vec![0x80, 4, 0x8d];
    p.extend((1u64 << 63).to_le_bytes());
    assert!(error(&p).contains("truncated"));
    let mut p = vec![0x80, 4, 0x8e];
    p.extend(u64::MAX.to_le_bytes());
    assert!(error(&p).contains("truncated"));
    let mut p = vec![0x80, 4, 0x8b];
    p.extend(0x7fff_ffffu32.to_le_bytes());
    assert!(error(&p).contains("truncated"));
    assert!(error(&[0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0xff]).contains("negative"));
    assert!(error(&[]).contains("ends before STOP"));
}

#[test]
fn deep_nesting_and_self_reference_are_errors() {
    // [[[[...]]]] 100 deep: EMPTY_LIST x100, then APPEND x99.
    let mut p = vec![0x80, 4];
    p.extend([b']'; 100]);
    p.extend([b'a'; 99]);
    p.push(b'.');
    assert!(error(&p).contains("nested deeper"));
    // The same depth reached by appending into lists already placed.
    let mut p = vec![0x80, 4, b']', 0x94];
    for i in 0..100u8 {
        // get the innermost list, append a new one, memoize that one.
        p.extend([b'h', i, b']', 0x94, b'a', b'0']);
    }
    p.push(b'.');
    let e = error(&p);
    assert!(e.contains("already inside"), "{e}");
    // a = []; a.append(a)
    let e = error(&[0x80, 4, b']', 0x94, b'h', 0, b'a', b'.']);
    assert!(e.contains("contains itself"), "{e}");
    // d = {}; d[d] = None (found by the fuzzer: a cycle through the key)
    let e = error(&[0x80, 4, b'}', 0x94, b'h', 0, b'N', b's', b'.']);
    assert!(e.contains("contains itself"), "{e}");
    // d = {}; d[None] = d
    let e = error(&[0x80, 4, b'}', 0x94, b'N', b'h', 0, b's', b'.']);
    assert!(e.contains("contains itself"), "{e}");
    // Tuples nest too: TUPLE1 x100.
    let mut p = vec![0x80, 4, b'N'];
    p.extend([0x85; 100]);
    p.push(b'.');
    assert!(error(&p).contains("nested deeper"));
}

/// 600,000 small ints in batches of 1,000 and a 3 MiB string: several
/// buffer refills, opcodes cut by the buffer's end, and an argument
/// larger than the buffer.
#[test]
fn input_larger_than_the_buffer_streams_through_it() {
    let mut p = vec![0x80, 4, b']'];
    for _ in 0..600 {
        p.push(b'(');
        for i in 0..1000u32 {
            p.extend([b'K', (i % 251) as u8]);
        }
        p.push(b'e');
    }
    let big = "x".repeat(3 << 20);
    p.push(0x8d);
    p.extend((big.len() as u64).to_le_bytes());
    p.extend(big.as_bytes());
    p.extend([b'a', b'.']);
    let v = plain(&p).unwrap();
    let items = v.seq().unwrap();
    assert_eq!(items.len(), 600_001);
    assert_eq!(items[599_999].as_i64(), Some(999 % 251));
    assert_eq!(items[600_000].as_str().map(str::len), Some(3 << 20));
    drop(items);
    // Cut inside the string: its length is checked against what is left.
    let e = error(&p[..p.len() - 1000]);
    assert_eq!(
        e,
        "truncated: the opcode needs 3145728 bytes but 3144730 remain"
    );
}

#[test]
fn bytes_after_stop_are_ignored_and_stack_errors_are_clean() {
    assert_eq!(
        plain(&[0x80, 4, b'K', 5, b'.', 0xde, 0xad])
            .unwrap()
            .as_i64(),
        Some(5)
    );
    assert!(error(&[0x80, 4, b'.']).contains("underflow"));
    assert!(error(&[0x80, 4, b'(', b'.']).contains("MARK"));
    assert!(error(&[0x80, 4, b'K', 1, b'e', b'.']).contains("MARK"));
    assert!(error(&[0x80, 4, b'K', 1, b'K', 2, b'a', b'.']).contains("not a list"));
    assert!(error(&[0x80, 9, b'N', b'.']).contains("protocol 9"));
    assert!(error(b"I1\n.").contains("unsupported"));
}

/// Collects the entries of the list at key `t` of the root dict, from
/// `item` or, when `fast`, from `record`.
struct Records {
    fast: bool,
    entries: Vec<String>,
    records: usize,
}

fn show(v: &Value) -> String {
    match v {
        Value::None => "None".into(),
        Value::Int(i) => i.to_string(),
        Value::Str(s) => format!("{s:?}"),
        Value::Handle(h) => format!("#{h}"),
        Value::Dict(_) => format!(
            "{{{}}}",
            v.pairs()
                .unwrap()
                .iter()
                .map(|(k, v)| format!("{}: {}", show(k), show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        v => format!("{v:?}"),
    }
}

impl Visitor for Records {
    fn route(&mut self, parent: Parent<'_>, is_list: bool) -> Option<u32> {
        match parent {
            Parent::Root => Some(0),
            Parent::DictKey { route: 0, key: "t" } if is_list => Some(1),
            _ => None,
        }
    }
    fn item(
        &mut self,
        route: u32,
        item: &Value,
        _: &mut Memo,
    ) -> std::result::Result<bool, String> {
        if route != 1 {
            return Ok(false);
        }
        // The fields `record` would be given, each key's first value.
        let mut fields = vec![None; Self::RECORD_KEYS.len()];
        for (k, v) in item.pairs().unwrap().iter() {
            if let Some(i) = record_key(Self::RECORD_KEYS, k) {
                fields[i].get_or_insert_with(|| v.clone());
            }
        }
        self.entries.push(show_fields(Self::RECORD_KEYS, &fields));
        Ok(true)
    }
    fn records(&self, route: u32) -> bool {
        self.fast && route == 1
    }
    const RECORD_KEYS: &'static [&'static str] = &["action", "size"];
    fn record(
        &mut self,
        _: u32,
        fields: &[Option<Value>],
        _: &mut Memo,
    ) -> std::result::Result<(), String> {
        self.entries.push(show_fields(Self::RECORD_KEYS, fields));
        self.records += 1;
        Ok(())
    }
}

/// A record's fields as `{"key": value, ...}`, absent keys left out.
fn show_fields(keys: &[&str], fields: &[Option<Value>]) -> String {
    let pairs: Vec<String> = keys
        .iter()
        .zip(fields)
        .filter_map(|(k, v)| Some(format!("{k:?}: {}", show(v.as_ref()?))))
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// Records in CPython's shape (a FRAME inside one) go to `record`; one
/// in another shape goes the ordinary way and is handed over when its
/// SETITEMS completes it, so the next can go straight again; the visitor
/// sees the same fields of the same entries in the same order either way.
#[test]
fn records_are_read_straight_or_the_ordinary_way_alike() {
    let mut p = vec![
        0x80, 4, b'}', 0x94, b'(', 0x8c, 1, b't', 0x94, b']', 0x94, b'(',
    ];
    // Memo: root 0, 't' 1, list 2, then each dict and string in order.
    p.extend([b'}', 0x94, b'(', 0x8c, 6]);
    p.extend(b"action");
    p.extend([0x94, 0x8c, 5]);
    p.extend(b"alloc");
    p.extend([0x94, 0x8c, 4]);
    p.extend(b"size");
    p.extend([0x94, b'K', 7, b'u']);
    p.extend([
        b'}', 0x94, b'(', b'h', 4, b'h', 5, 0x95, 9, 0, 0, 0, 0, 0, 0, 0,
    ]);
    p.extend([b'h', 6, b'J', 1, 0, 0, 0, b'u']);
    // A dict as a value: not a record's shape.
    p.extend([b'}', 0x94, b'(', b'h', 4, b'}', b'u']);
    p.extend([b'}', 0x94, b'(', b'h', 6, 0x8a, 2, 0, 1, b'u', b'e']);
    p.extend([
        b'(', b'}', 0x94, b'(', b'h', 6, b'N', b'h', 4, b'h', 5, b'u', b'e',
    ]);
    p.extend([b'u', b'.']);
    let mut decoded = Vec::new();
    for fast in [false, true] {
        let mut v = Records {
            fast,
            entries: Vec::new(),
            records: 0,
        };
        decode(&p.clone(), &mut v, Paths::Fast, None).unwrap();
        assert_eq!(v.records, if fast { 4 } else { 0 });
        decoded.push(v.entries);
    }
    assert_eq!(decoded[0], decoded[1]);
    assert_eq!(
        decoded[1],
        [
            r#"{"action": "alloc", "size": 7}"#,
            r#"{"action": "alloc", "size": 1}"#,
            r#"{"action": {}}"#,
            r#"{"size": 256}"#,
            r#"{"action": "alloc", "size": None}"#,
        ]
    );
}

/// Records with a list each, the visitor answering for lists of handles
/// (as the snapshot reader does for `frames`), counting how often it is
/// asked.
#[derive(Default)]
struct Lists {
    asked: usize,
    fields: Vec<String>,
}

impl Visitor for Lists {
    fn route(&mut self, parent: Parent<'_>, is_list: bool) -> Option<u32> {
        match parent {
            Parent::Root => Some(0),
            Parent::DictKey { route: 0, key: "t" } if is_list => Some(1),
            _ => None,
        }
    }
    fn item(&mut self, _: u32, _: &Value, _: &mut Memo) -> std::result::Result<bool, String> {
        Ok(true)
    }
    fn records(&self, route: u32) -> bool {
        route == 1
    }
    const RECORD_KEYS: &'static [&'static str] = &["f"];
    fn record_list(&mut self, _: u32, key: Option<usize>, handles: &[u32]) -> Option<u32> {
        self.asked += 1;
        (key == Some(0)).then(|| 100 + handles.iter().sum::<u32>())
    }
    fn record(
        &mut self,
        _: u32,
        fields: &[Option<Value>],
        _: &mut Memo,
    ) -> std::result::Result<(), String> {
        self.fields.push(show(fields[0].as_ref().unwrap()));
        Ok(())
    }
}

/// A list of handles with the bytes of one met before is answered from
/// those bytes without asking the visitor again, until a memo slot that
/// held a handle is given another value (BINPUT): the same bytes may then
/// mean other handles, and the visitor is asked.
#[test]
fn lists_of_handles_met_before_are_known_by_their_bytes_until_the_memo_changes() {
    // Memo: root 0, 't' 1, the records' list 2.
    let mut p = vec![
        0x80, 4, b'}', 0x94, b'(', 0x8c, 1, b't', 0x94, b']', 0x94, b'(',
    ];
    // Record 3, 'f' 4, an empty list 5: the visitor's handle #100.
    p.extend([
        b'}', 0x94, b'(', 0x8c, 1, b'f', 0x94, b']', 0x94, b'(', b'e', b'u',
    ]);
    // Twice a list of two references to slot 5: [#100, #100] is #300.
    let twice = [
        b'}', 0x94, b'(', b'h', 4, b']', 0x94, b'(', b'h', 5, b'h', 5, b'e', b'u',
    ];
    p.extend(twice);
    p.extend(twice);
    // Slot 5 given #300 (BINGET 7, BINPUT 5, POP): the same bytes are
    // now [#300, #300], #700.
    p.extend([b'h', 7, b'q', 5, b'0']);
    p.extend(twice);
    p.extend([b'e', b'u', b'.']);
    let mut v = Lists::default();
    decode(&p, &mut v, Paths::Fast, None).unwrap();
    assert_eq!(v.fields, ["#100", "#300", "#300", "#700"]);
    assert_eq!(v.asked, 3, "the second [#100, #100] is known by its bytes");
}

/// Lists of handles that share their first bytes, or whose bytes begin
/// with a whole list met before, are each answered for their own handles:
/// a list is known by all its bytes and where it ends, not by the bytes it
/// starts with.
#[test]
fn lists_of_handles_sharing_their_first_bytes_are_told_apart() {
    // Memo: root 0, 't' 1, the records' list 2.
    let mut p = vec![
        0x80, 4, b'}', 0x94, b'(', 0x8c, 1, b't', 0x94, b']', 0x94, b'(',
    ];
    // Record 3, 'f' 4, an empty list 5: the visitor's #100.
    p.extend([
        b'}', 0x94, b'(', 0x8c, 1, b'f', 0x94, b']', 0x94, b'(', b'e', b'u',
    ]);
    // Record 6, a list 7 of slot 5: [#100] is #200.
    p.extend([
        b'}', 0x94, b'(', b'h', 4, b']', 0x94, b'(', b'h', 5, b'e', b'u',
    ]);
    let record = |list: &[u8]| {
        let mut r = vec![b'}', 0x94, b'(', b'h', 4, b']', 0x94];
        r.extend_from_slice(list);
        r.push(b'u');
        r
    };
    // 30 references to slot 5 (61 bytes before APPENDS): #3100.
    let mut same = vec![b'('];
    (0..30).for_each(|_| same.extend([b'h', 5]));
    same.push(b'e');
    // The first 29 the same, the last slot 7: #3200.
    let mut last_differs = same[..same.len() - 3].to_vec();
    last_differs.extend([b'h', 7, b'e']);
    // The 30 references and one more run, of slot 7: #3300.
    let mut longer = same.clone();
    longer.extend([b'(', b'h', 7, b'e']);
    for _ in 0..2 {
        for list in [&same, &last_differs, &longer] {
            p.extend(record(list));
        }
    }
    p.extend([b'e', b'u', b'.']);
    let mut v = Lists::default();
    decode(&p, &mut v, Paths::Fast, None).unwrap();
    assert_eq!(
        v.fields,
        ["#100", "#200", "#3100", "#3200", "#3300", "#3100", "#3200", "#3300"]
    );
    assert_eq!(v.asked, 5, "the second three are known by their bytes");
}
