use super::*;
use pretty_assertions::assert_eq;

/// A GGUF writer for tests: the header and key/value pairs, no tensors.
pub(crate) fn encode(version: u32, tensor_count: u64, kv: &[(&str, GgufValue)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&tensor_count.to_le_bytes());
    out.extend_from_slice(&(kv.len() as u64).to_le_bytes());
    for (key, value) in kv {
        put_str(&mut out, key);
        out.extend_from_slice(&value.value_type().code().to_le_bytes());
        put_value(&mut out, value);
    }
    out
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, value: &GgufValue) {
    match value {
        GgufValue::U8(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
        GgufValue::Bool(v) => out.push(u8::from(*v)),
        GgufValue::String(s) => put_str(out, s),
        GgufValue::Array { item_type, items } => {
            out.extend_from_slice(&item_type.code().to_le_bytes());
            out.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for item in items {
                put_value(out, item);
            }
        }
    }
}

pub(crate) fn strings(items: &[&str]) -> GgufValue {
    GgufValue::Array {
        item_type: GgufValueType::String,
        items: items.iter().map(|s| GgufValue::String((*s).into())).collect(),
    }
}

fn every_type() -> Vec<(&'static str, GgufValue)> {
    vec![
        ("general.architecture", GgufValue::String("llama".into())),
        ("general.name", GgufValue::String("Tiny Test ✓".into())),
        ("llama.context_length", GgufValue::U32(8192)),
        ("t.u8", GgufValue::U8(200)),
        ("t.i8", GgufValue::I8(-5)),
        ("t.u16", GgufValue::U16(65_000)),
        ("t.i16", GgufValue::I16(-30_000)),
        ("t.i32", GgufValue::I32(-70_000)),
        ("t.u64", GgufValue::U64(u64::MAX)),
        ("t.i64", GgufValue::I64(i64::MIN)),
        ("t.f32", GgufValue::F32(0.25)),
        ("t.f64", GgufValue::F64(-1.5e300)),
        ("t.bool", GgufValue::Bool(true)),
        ("t.empty", GgufValue::Array { item_type: GgufValueType::F32, items: vec![] }),
        ("t.strings", strings(&["a", "", "Ġb"])),
        (
            "t.nested",
            GgufValue::Array {
                item_type: GgufValueType::Array,
                items: vec![
                    GgufValue::Array {
                        item_type: GgufValueType::I32,
                        items: vec![GgufValue::I32(1), GgufValue::I32(-2)],
                    },
                    GgufValue::Array { item_type: GgufValueType::Bool, items: vec![GgufValue::Bool(false)] },
                ],
            },
        ),
        (
            "tokenizer.chat_template",
            GgufValue::String("{% for m in messages %}{{ m.content }}{% endfor %}".into()),
        ),
    ]
}

#[test]
fn reads_every_value_type_in_versions_2_and_3() {
    for version in [2, 3] {
        let kv = every_type();
        let bytes = encode(version, 7, &kv);
        let read = GgufMetadata::read(&bytes[..]).unwrap();
        let expected = GgufMetadata {
            version,
            tensor_count: 7,
            kv: kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
            parameters: None,
        };
        assert_eq!(read, expected);
    }
}

#[test]
fn helpers_read_the_well_known_keys() {
    let meta = GgufMetadata::read(&encode(3, 0, &every_type())[..]).unwrap();
    assert_eq!(
        (meta.architecture(), meta.name(), meta.context_length(), meta.chat_template()),
        (
            Some("llama"),
            Some("Tiny Test ✓"),
            Some(8192),
            Some("{% for m in messages %}{{ m.content }}{% endfor %}")
        )
    );
    let bare = GgufMetadata::read(&encode(3, 0, &[])[..]).unwrap();
    assert_eq!(
        (bare.architecture(), bare.name(), bare.context_length(), bare.chat_template()),
        (None, None, None, None)
    );
    // A context length stored as u64 or as a negative integer.
    let other = GgufMetadata::read(
        &encode(
            3,
            0,
            &[
                ("general.architecture", GgufValue::String("qwen2".into())),
                ("qwen2.context_length", GgufValue::U64(32768)),
            ],
        )[..],
    )
    .unwrap();
    assert_eq!(other.context_length(), Some(32768));
    assert_eq!(GgufValue::I32(-1).as_u64(), None);
}

#[test]
fn stops_before_the_tensor_data() {
    let mut bytes = encode(3, 1, &[("general.name", GgufValue::String("x".into()))]);
    let metadata_len = bytes.len();
    bytes.extend_from_slice(&[0xAB; 64]);
    let mut reader = &bytes[..];
    GgufMetadata::read(&mut reader).unwrap();
    assert_eq!(reader.len(), bytes.len() - metadata_len);
}

/// A tensor description: name, dimensions, type (0: f32), data offset.
fn tensor(name: &str, dims: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(name.len() as u64).to_le_bytes());
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&(dims.len() as u32).to_le_bytes());
    for dim in dims {
        out.extend_from_slice(&dim.to_le_bytes());
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&0u64.to_le_bytes());
    out
}

#[test]
fn counts_parameters_from_the_tensor_descriptions() {
    let mut bytes = encode(3, 3, &[("general.name", GgufValue::String("x".into()))]);
    bytes.extend(tensor("token_embd.weight", &[576, 49152]));
    bytes.extend(tensor("blk.0.attn_norm.weight", &[576]));
    bytes.extend(tensor("scalar", &[]));
    let meta = GgufMetadata::read_with_parameters(&bytes[..]).unwrap();
    assert_eq!(meta.parameters, Some(576 * 49152 + 576 + 1));
    assert_eq!(GgufMetadata::read(&bytes[..]).unwrap().parameters, None);

    // A second copy of the embedding table (a tied output stored again) counts once; an output
    // table of another shape counts in full.
    let mut tied = encode(3, 2, &[]);
    tied.extend(tensor("token_embd.weight", &[896, 151936]));
    tied.extend(tensor("output.weight", &[896, 151936]));
    assert_eq!(GgufMetadata::read_with_parameters(&tied[..]).unwrap().parameters, Some(896 * 151936));
    let mut untied = encode(3, 2, &[]);
    untied.extend(tensor("output.weight", &[896, 1000]));
    untied.extend(tensor("token_embd.weight", &[896, 151936]));
    assert_eq!(
        GgufMetadata::read_with_parameters(&untied[..]).unwrap().parameters,
        Some(896 * 151936 + 896 * 1000)
    );

    let cut = bytes.len() - 5;
    let err = GgufMetadata::read_with_parameters(&bytes[..cut]).unwrap_err();
    assert_eq!(err.to_string(), format!("gguf data ends at offset {cut} in the middle of tensor `scalar`"));

    let mut bad = encode(3, 1, &[]);
    let at = bad.len() as u64 + 8 + 3;
    bad.extend(tensor("big", &[1, 2, 3, 4, 5]));
    let err = GgufMetadata::read_with_parameters(&bad[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "gguf tensor description at offset {at} for tensor `big` claims 5 dimensions; at most 4 are allowed"
        )
    );
}

#[test]
fn every_truncation_is_reported_where_the_data_ends() {
    let bytes = encode(3, 2, &every_type());
    for cut in 0..bytes.len() {
        match GgufMetadata::read(&bytes[..cut]) {
            Err(GgufError::Truncated { offset, .. }) => assert_eq!(offset, cut as u64),
            other => panic!("cut at {cut}: expected Truncated, got {other:?}"),
        }
    }
}

#[test]
fn truncation_names_the_key() {
    let bytes = encode(3, 0, &[("t.strings", strings(&["abc", "defgh"]))]);
    let err = GgufMetadata::read(&bytes[..bytes.len() - 2]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("gguf data ends at offset {} in the middle of `t.strings`[1]", bytes.len() - 2)
    );
    let err = GgufMetadata::read(&bytes[..30]).unwrap_err();
    assert_eq!(err.to_string(), "gguf data ends at offset 30 in the middle of the name of key #0");
    let err = GgufMetadata::read(&bytes[..6]).unwrap_err();
    assert_eq!(err.to_string(), "gguf data ends at offset 6 in the middle of the header");
}

#[test]
fn bad_magic_and_versions_are_refused() {
    let err = GgufMetadata::read(&b"GGJT\x03\x00\x00\x00"[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "not a gguf file: expected the magic bytes \"GGUF\" at offset 0, found \"GGJT\""
    );
    let err = GgufMetadata::read(&b"\x00\x01\xffGxxxxxxx"[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "not a gguf file: expected the magic bytes \"GGUF\" at offset 0, found \"\\x00\\x01\\xffG\""
    );
    let mut v1 = encode(3, 0, &[]);
    v1[4..8].copy_from_slice(&1u32.to_le_bytes());
    let err = GgufMetadata::read(&v1[..]).unwrap_err();
    assert_eq!(err.to_string(), "unsupported gguf version 1 at offset 4: supported versions are 2 and 3");
    let mut big_endian = encode(3, 0, &[]);
    big_endian[4..8].copy_from_slice(&3u32.to_be_bytes());
    let err = GgufMetadata::read(&big_endian[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "unsupported gguf version 50331648 at offset 4: supported versions are 2 and 3 (this looks like a big-endian file, which is not supported)"
    );
}

/// Offset of the first value of a file holding one key named `k`: magic, version, counts,
/// key length, key byte, type code.
const VALUE_AT: usize = 4 + 4 + 8 + 8 + 8 + 1 + 4;

#[test]
fn absurd_lengths_are_refused_before_allocating() {
    let mut bytes = encode(3, 0, &[("k", GgufValue::String("abc".into()))]);
    bytes[VALUE_AT..VALUE_AT + 8].copy_from_slice(&(MAX_STRING_BYTES + 1).to_le_bytes());
    let err = GgufMetadata::read(&bytes[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "gguf string at offset {VALUE_AT} in `k` claims 67108865 bytes; at most 67108864 are allowed"
        )
    );

    let mut bytes = encode(3, 0, &[("k", strings(&["a"]))]);
    bytes[VALUE_AT + 4..VALUE_AT + 12].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = GgufMetadata::read(&bytes[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "gguf array at offset {} in `k` claims {} items; at most 268435456 are allowed",
            VALUE_AT + 4,
            u64::MAX
        )
    );

    let mut bytes = encode(3, 0, &[("k", GgufValue::U8(1))]);
    bytes[24..32].copy_from_slice(&(MAX_KEY_BYTES + 1).to_le_bytes());
    let err = GgufMetadata::read(&bytes[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "gguf string at offset 24 in the name of key #0 claims 65536 bytes; at most 65535 are allowed"
    );

    // A length within bounds but past the end of the data is a truncation, not an allocation.
    let mut bytes = encode(3, 0, &[("k", GgufValue::String("abc".into()))]);
    bytes[VALUE_AT..VALUE_AT + 8].copy_from_slice(&MAX_STRING_BYTES.to_le_bytes());
    assert!(matches!(GgufMetadata::read(&bytes[..]), Err(GgufError::Truncated { .. })));
}

#[test]
fn corrupt_values_are_refused_with_their_key_and_offset() {
    let mut bytes = encode(3, 0, &[("k", GgufValue::U8(1))]);
    bytes[VALUE_AT - 4..VALUE_AT].copy_from_slice(&13u32.to_le_bytes());
    let err = GgufMetadata::read(&bytes[..]).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("unknown gguf value type 13 at offset {} in `k`: known types are 0 to 12", VALUE_AT - 4)
    );

    let mut bytes = encode(3, 0, &[("k", GgufValue::Bool(true))]);
    bytes[VALUE_AT] = 2;
    let err = GgufMetadata::read(&bytes[..]).unwrap_err();
    assert_eq!(err.to_string(), format!("gguf bool at offset {VALUE_AT} in `k` is 2; expected 0 or 1"));

    let mut bytes = encode(3, 0, &[("k", strings(&["ok", "\u{e9}"]))]);
    let last = bytes.len() - 1;
    bytes[last] = 0xFF;
    let err = GgufMetadata::read(&bytes[..]).unwrap_err();
    assert_eq!(err.to_string(), format!("gguf string at offset {} in `k`[1] is not valid utf-8", last - 1));

    let bytes = encode(3, 0, &[("k", GgufValue::U8(1)), ("k", GgufValue::U8(2))]);
    let err = GgufMetadata::read(&bytes[..]).unwrap_err();
    assert_eq!(err.to_string(), format!("duplicate gguf key `k` at offset {}", VALUE_AT + 1));

    let mut deep = GgufValue::U8(0);
    for _ in 0..=MAX_ARRAY_DEPTH {
        deep = GgufValue::Array { item_type: deep.value_type(), items: vec![deep] };
    }
    let err = GgufMetadata::read(&encode(3, 0, &[("k", deep)])[..]).unwrap_err();
    assert!(matches!(err, GgufError::TooDeep { max: MAX_ARRAY_DEPTH, .. }), "{err}");
}

/// The real model fetched for integration tests, when `PHOSPHOR_TEST_MODEL` names it (see
/// [`crate::testing::test_model`]).
#[test]
fn reads_the_test_model_when_present() {
    let Some(path) = crate::testing::test_model("PHOSPHOR_TEST_MODEL") else { return };
    let file = std::fs::File::open(&path).unwrap();
    let meta = GgufMetadata::read(io::BufReader::new(file)).unwrap();
    assert_eq!((meta.architecture(), meta.context_length()), (Some("llama"), Some(8192)));
    assert!(meta.chat_template().is_some_and(|t| t.contains("<|im_start|>")));
    assert!(meta.tensor_count > 0);
    // SmolLM2-135M: 134.5 million parameters (its embeddings are tied: one table).
    let file = std::fs::File::open(&path).unwrap();
    let with = GgufMetadata::read_with_parameters(io::BufReader::new(file)).unwrap();
    assert_eq!(with.parameters, Some(134_515_008));
    assert_eq!(with.kv, meta.kv);
}

/// Qwen2.5-Coder-0.5B-Instruct, the demo's summarizer (`PHOSPHOR_TEST_QWEN`): its file stores the
/// tied output table a second time, and it counts as the 494 million parameters its authors give.
#[test]
fn counts_a_stored_twice_embedding_once() {
    let Some(path) = crate::testing::test_model("PHOSPHOR_TEST_QWEN") else { return };
    let file = std::fs::File::open(&path).unwrap();
    let meta = GgufMetadata::read_with_parameters(io::BufReader::new(file)).unwrap();
    assert_eq!(meta.architecture(), Some("qwen2"));
    assert_eq!(meta.parameters, Some(494_032_768));
}
