use super::*;
use crate::gguf::GgufValueType;
use pretty_assertions::assert_eq;
use tokenizers::models::wordlevel::WordLevel;
use tokenizers::pre_tokenizers::whitespace::Whitespace;
use tokenizers::{TruncationParams, TruncationStrategy};

fn ids(counter: &HfCounter, text: &str) -> Vec<u32> {
    counter.tokenizer().encode(text, false).unwrap().get_ids().to_vec()
}

fn string_array(items: &[String]) -> GgufValue {
    GgufValue::Array {
        item_type: GgufValueType::String,
        items: items.iter().map(|s| GgufValue::String(s.clone())).collect(),
    }
}

fn meta(kv: Vec<(&str, GgufValue)>) -> GgufMetadata {
    GgufMetadata {
        version: 3,
        tensor_count: 0,
        kv: kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        parameters: None,
    }
}

#[test]
fn json_tokenizer_counts_and_ignores_truncation() {
    let vocab =
        [("hello", 0), ("world", 1), ("[UNK]", 2)].into_iter().map(|(w, i)| (w.to_owned(), i)).collect();
    let model = WordLevel::builder().vocab(vocab).unk_token("[UNK]".into()).build().unwrap();
    let mut tokenizer = Tokenizer::new(model);
    tokenizer.with_pre_tokenizer(Some(Whitespace {}));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: 1,
            strategy: TruncationStrategy::LongestFirst,
            ..TruncationParams::default()
        }))
        .unwrap();
    let json = tokenizer.to_string(false).unwrap();
    let counter = HfCounter::from_json_bytes(json.as_bytes()).unwrap();
    assert_eq!(counter.name(), "hf:tokenizer.json");
    assert_eq!(ids(&counter, "hello world zebra hello"), vec![0, 1, 2, 0]);
    assert_eq!(counter.count_text("hello world zebra hello"), 4);
    assert_eq!(counter.count_text(""), 0);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, &json).unwrap();
    let from_file = HfCounter::from_file(&path).unwrap();
    assert_eq!(
        (from_file.name(), from_file.count_text("world world")),
        (format!("hf:{}", path.display()).as_str(), 2)
    );
}

#[test]
fn bad_json_and_missing_files_say_where() {
    let err = HfCounter::from_json_bytes(b"{\"model\": 3}").unwrap_err();
    assert!(err.to_string().starts_with("invalid tokenizer.json (bytes): "), "{err}");
    let err = HfCounter::from_file("/nonexistent/tokenizer.json").unwrap_err();
    assert!(err.to_string().starts_with("cannot read tokenizer file /nonexistent/tokenizer.json: "), "{err}");
}

/// GPT-2's byte-to-character map: printable bytes stand for themselves, the rest are
/// shifted past U+0100.
fn byte_chars() -> Vec<String> {
    let mut shifted = 0;
    (0u32..256)
        .map(|b| {
            let printable = (33..=126).contains(&b) || (161..=172).contains(&b) || (174..=255).contains(&b);
            let c = if printable {
                b
            } else {
                shifted += 1;
                255 + shifted
            };
            char::from_u32(c).unwrap().to_string()
        })
        .collect()
}

/// A byte-level vocabulary: the 256 byte characters, then merged tokens, then specials.
fn byte_level_meta(pre: Option<&str>, merges: &[&str], specials: &[&str]) -> GgufMetadata {
    let mut tokens = byte_chars();
    for merge in merges {
        tokens.push(merge.replace(' ', ""));
    }
    let mut types = vec![GgufValue::I32(1); tokens.len()];
    for special in specials {
        tokens.push((*special).to_owned());
        types.push(GgufValue::I32(3));
    }
    let mut kv = vec![
        ("general.name", GgufValue::String("Tiny BPE".into())),
        (KEY_MODEL, GgufValue::String("gpt2".into())),
        (KEY_TOKENS, string_array(&tokens)),
        (KEY_TYPES, GgufValue::Array { item_type: GgufValueType::I32, items: types }),
        (KEY_MERGES, string_array(&merges.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>())),
    ];
    if let Some(pre) = pre {
        kv.push((KEY_PRE, GgufValue::String(pre.into())));
    }
    meta(kv)
}

const HELLO_MERGES: &[&str] =
    &["H e", "l l", "ll o", "He llo", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "1 2", "12 3", "123 4"];

#[test]
fn gguf_byte_level_bpe_counts_merged_words() {
    let meta = byte_level_meta(Some("gpt-2"), HELLO_MERGES, &["<|im_start|>"]);
    let counter = HfCounter::from_gguf(&meta).unwrap();
    assert_eq!(counter.name(), "hf:Tiny BPE");
    let hello = 256 + 3; // "Hello" is the fourth merged token
    let world = 256 + 8;
    let comma = u32::from(b','); // the first 256 tokens are the bytes, in order
    assert_eq!(ids(&counter, "Hello world"), vec![hello, world]);
    assert_eq!(ids(&counter, "Hello, world"), vec![hello, comma, world]);
    assert_eq!(counter.count_text("Hello, world!"), 4);
    // The special token's text counts as one token; unmerged bytes count one each.
    let special = 256 + HELLO_MERGES.len() as u32;
    assert_eq!(ids(&counter, "<|im_start|>Hello"), vec![special, hello]);
    assert_eq!(counter.count_text("Héllo"), 4, "H, the two bytes of é, llo");
    assert_eq!(
        counter.tokenizer().decode(&ids(&counter, "Hello, wörld 🚀"), false).unwrap(),
        "Hello, wörld 🚀"
    );
}

#[test]
fn gguf_pre_tokenizer_decides_how_digits_split() {
    let count = |pre: Option<&str>| {
        let counter = HfCounter::from_gguf(&byte_level_meta(pre, HELLO_MERGES, &[])).unwrap();
        counter.count_text("1234")
    };
    assert_eq!(count(Some("gpt-2")), 1, "gpt-2 keeps digit runs whole");
    assert_eq!(count(Some("smollm")), 4, "smollm splits every digit");
    assert_eq!(count(Some("qwen2")), 4, "qwen2 splits every digit");
    assert_eq!(count(Some("llama-bpe")), 2, "llama 3 splits digits in threes");
    assert_eq!(count(None), 2, "llama.cpp's default splits digits in threes");
}

#[test]
fn every_known_pre_tokenizer_builds_and_round_trips() {
    let text = "Hello, world! It's 2024-06-01\n\n\tdon't   stop 你好世界 Ünïcödé 🚀";
    for name in PRE_TOKENIZERS.iter().flat_map(|spec| spec.names) {
        let counter = HfCounter::from_gguf(&byte_level_meta(Some(name), HELLO_MERGES, &[])).unwrap();
        let ids = ids(&counter, text);
        assert!(ids.len() <= text.len(), "{name}");
        assert_eq!(counter.tokenizer().decode(&ids, false).unwrap(), text, "{name}");
    }
}

#[test]
fn llama3_ignore_merges_takes_whole_vocabulary_words() {
    // "ab" is in the vocabulary but no merge builds it: only ignore_merges finds it.
    let mut meta = byte_level_meta(Some("llama-bpe"), &["H e"], &[]);
    if let Some(GgufValue::Array { items, .. }) = meta.kv.get_mut(KEY_TOKENS) {
        items.push(GgufValue::String("ab".into()));
    }
    if let Some(GgufValue::Array { items, .. }) = meta.kv.get_mut(KEY_TYPES) {
        items.push(GgufValue::I32(1));
    }
    assert_eq!(HfCounter::from_gguf(&meta).unwrap().count_text("ab"), 1);
    meta.kv.insert(KEY_PRE.into(), GgufValue::String("qwen2".into()));
    assert_eq!(HfCounter::from_gguf(&meta).unwrap().count_text("ab"), 2);
}

fn sentencepiece_meta(add_space_prefix: Option<bool>) -> GgufMetadata {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0, 0.0, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (piece, score) in [
        ("▁", -1.0),
        ("h", -2.0),
        ("e", -3.0),
        ("l", -4.0),
        ("o", -5.0),
        ("ll", -6.0),
        ("he", -7.0),
        ("▁he", -8.0),
        ("llo", -9.0),
        ("▁hello", -10.0),
    ] {
        tokens.push(piece.into());
        types.push(1);
        scores.push(score);
    }
    let mut kv = vec![
        (KEY_MODEL, GgufValue::String("llama".into())),
        (KEY_TOKENS, string_array(&tokens)),
        (
            KEY_TYPES,
            GgufValue::Array {
                item_type: GgufValueType::I32,
                items: types.into_iter().map(GgufValue::I32).collect(),
            },
        ),
        (
            KEY_SCORES,
            GgufValue::Array {
                item_type: GgufValueType::F32,
                items: scores.into_iter().map(GgufValue::F32).collect(),
            },
        ),
        (KEY_UNK, GgufValue::U32(0)),
    ];
    if let Some(prefix) = add_space_prefix {
        kv.push((KEY_ADD_SPACE_PREFIX, GgufValue::Bool(prefix)));
    }
    meta(kv)
}

#[test]
fn gguf_sentencepiece_merges_by_score_and_falls_back_to_bytes() {
    let counter = HfCounter::from_gguf(&sentencepiece_meta(None)).unwrap();
    assert_eq!(counter.name(), "hf:gguf");
    let piece = |p: &str| counter.tokenizer().token_to_id(p).unwrap();
    let byte = |b: u8| 3 + u32::from(b);
    assert_eq!(ids(&counter, "hello"), vec![piece("▁hello")]);
    assert_eq!(ids(&counter, "hello!"), vec![piece("▁hello"), byte(b'!')]);
    assert_eq!(ids(&counter, "hi"), vec![piece("▁"), piece("h"), byte(b'i')]);
    assert_eq!(ids(&counter, "hello hello"), vec![piece("▁hello"), piece("▁hello")]);
    assert_eq!(ids(&counter, " hello"), vec![piece("▁"), piece("▁hello")]);
    assert_eq!(ids(&counter, "hello</s>hello"), vec![piece("▁hello"), 2, piece("▁hello")]);
    assert_eq!(ids(&counter, "é"), vec![piece("▁"), byte(0xC3), byte(0xA9)]);
    assert_eq!(counter.tokenizer().decode(&ids(&counter, "hello hi é"), false).unwrap(), "hello hi é");

    let no_prefix = HfCounter::from_gguf(&sentencepiece_meta(Some(false))).unwrap();
    assert_eq!(ids(&no_prefix, "hello"), vec![piece("he"), piece("llo")]);
}

#[test]
fn sentencepiece_merges_follow_scores() {
    let tokens: Vec<String> =
        ["a", "b", "c", "ab", "bc", "abc", "<c>"].iter().map(|s| (*s).to_owned()).collect();
    let scores = [-1.0, -2.0, -3.0, -5.0, -4.0, -6.0, 0.0];
    let types = [1, 1, 1, 1, 1, 1, 3];
    let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
    assert_eq!(
        sentencepiece_merges(&tokens, &scores, Some(&types)),
        vec![pair("b", "c"), pair("a", "b"), pair("a", "bc"), pair("ab", "c")]
    );
}

#[test]
fn unsupported_or_malformed_gguf_tokenizers_are_named() {
    let check = |meta: &GgufMetadata, expected: &str| {
        assert_eq!(HfCounter::from_gguf(meta).unwrap_err().to_string(), expected);
    };
    check(&meta(vec![]), "gguf tokenizer: missing metadata key `tokenizer.ggml.model`");
    check(
        &meta(vec![(KEY_MODEL, GgufValue::String("bert".into()))]),
        "gguf tokenizer model `bert` (tokenizer.ggml.model) is not supported: supported are `gpt2` (byte-level BPE) and `llama` (SentencePiece)",
    );
    check(
        &meta(vec![(KEY_MODEL, GgufValue::U8(1))]),
        "gguf tokenizer: metadata key `tokenizer.ggml.model` is U8(1); expected a string",
    );

    let mut bpe = byte_level_meta(Some("kimi-k2"), HELLO_MERGES, &[]);
    let err = HfCounter::from_gguf(&bpe).unwrap_err().to_string();
    assert!(err.starts_with("gguf pre-tokenizer `kimi-k2` (tokenizer.ggml.pre) is not supported; supported are `default`, `llama3`"), "{err}");
    bpe.kv.insert(KEY_PRE.into(), GgufValue::String("gpt-2".into()));
    bpe.kv.insert(KEY_MERGES.into(), string_array(&["H e".into(), "Hello".into()]));
    check(
        &bpe,
        "gguf tokenizer: `tokenizer.ggml.merges`[1] is \"Hello\"; expected two tokens separated by a space",
    );
    bpe.kv.insert(KEY_MERGES.into(), string_array(&["H e".into(), "Q zz".into()]));
    let err = HfCounter::from_gguf(&bpe).unwrap_err().to_string();
    assert!(err.starts_with("gguf tokenizer: cannot build the byte-level BPE model: "), "{err}");
    bpe.kv.insert(
        KEY_TYPES.into(),
        GgufValue::Array { item_type: GgufValueType::I32, items: vec![GgufValue::I32(1)] },
    );
    check(
        &bpe,
        "gguf tokenizer: `tokenizer.ggml.token_type` has 1 entries but `tokenizer.ggml.tokens` has 268",
    );

    let mut spm = sentencepiece_meta(None);
    spm.kv.insert(KEY_UNK.into(), GgufValue::U32(100_000));
    check(
        &spm,
        "gguf tokenizer: `tokenizer.ggml.unknown_token_id` is 100000 but the vocabulary has 269 tokens",
    );
    spm.kv.remove(KEY_SCORES);
    check(&spm, "gguf tokenizer: missing metadata key `tokenizer.ggml.scores`");
}

/// The real model fetched for integration tests (SmolLM2-135M, a `gpt2`/`smollm`
/// tokenizer), when `PHOSPHOR_TEST_MODEL` names it (see [`crate::testing::test_model`]).
#[test]
fn counts_with_the_test_models_tokenizer_when_present() {
    let Some(path) = crate::testing::test_model("PHOSPHOR_TEST_MODEL") else { return };
    let file = std::fs::File::open(&path).unwrap();
    let meta = GgufMetadata::read(std::io::BufReader::new(file)).unwrap();
    let counter = HfCounter::from_gguf(&meta).unwrap();
    assert_eq!(counter.count_text("Hello, world!"), 4);
    // Ids from llama.cpp's own tokenizer (`llama-tokenize --ids --no-bos`) on the same file.
    for (text, expected) in [
        ("Hello, world!", vec![19556, 28, 905, 17]),
        ("hello world", vec![28120, 905]),
        ("  multiple   spaces\n\n\ttabs  ", vec![216, 2701, 256, 5600, 1116, 197, 100, 7366, 256]),
        (
            "The year 2024 had 366 days; π≈3.14159.",
            vec![
                504, 713, 216, 34, 32, 34, 36, 761, 216, 35, 38, 38, 2009, 43, 25143, 40533, 226, 35, 30, 33,
                36, 33, 37, 41, 30,
            ],
        ),
        (
            "日本語のテキスト 🚀 émoji",
            vec![
                23274, 115, 40993, 179, 120, 248, 26453, 11100, 224, 10391, 251, 10391, 134, 11100, 226,
                15107, 244, 218, 26411, 15771, 10381,
            ],
        ),
        ("<|im_start|>user\nhi<|im_end|>\n", vec![1, 4093, 198, 6004, 2, 198]),
        (
            "fn main() {\n    println!(\"{}\", 1234567);\n}",
            vec![
                7853, 1085, 1000, 1662, 472, 1628, 34115, 17, 43331, 1002, 216, 33, 34, 35, 36, 37, 38, 39,
                4258, 198, 109,
            ],
        ),
        (
            "don't won't I'll we're THEY'RE",
            vec![12420, 982, 3763, 982, 339, 3060, 392, 2316, 6462, 73, 23, 3256],
        ),
        ("a\r\nb\n\n\n c", vec![81, 201, 198, 82, 16506, 265]),
    ] {
        assert_eq!(ids(&counter, text), expected, "{text:?}");
    }
}
