//! Reads the metadata of a GGUF model file: the header, the tensor count and every key/value
//! pair (architecture, context length, chat template, the embedded tokenizer), never the tensors.
//!
//! The format is llama.cpp's (`docs/gguf.md` there): the magic `GGUF`, a little-endian `u32`
//! version (2 or 3 here), the tensor count and key/value count as `u64`, then the key/value pairs.
//! Tensor descriptions and data follow; this reader stops before them, so reading a 5 GB model's
//! metadata costs a few megabytes of I/O (mostly the tokenizer's vocabulary).
//!
//! ```
//! use phosphor_base::gguf::{GgufError, GgufMetadata};
//!
//! let err = GgufMetadata::read(&b"GGML\x03\x00\x00\x00"[..]).unwrap_err();
//! assert!(matches!(err, GgufError::BadMagic { .. }));
//! ```
//!
//! Wrap a file in a [`std::io::BufReader`]: the reader issues many small reads.

use std::collections::BTreeMap;
use std::io::{self, Read};

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";

/// The GGUF versions this reader understands. Version 1 used 32-bit lengths and is long gone.
pub const SUPPORTED_VERSIONS: [u32; 2] = [2, 3];

/// The longest string value accepted (64 MiB). Real chat templates are a few KiB.
pub const MAX_STRING_BYTES: u64 = 64 << 20;

/// The longest key accepted: the format caps key names at 65535 bytes.
pub const MAX_KEY_BYTES: u64 = 65_535;

/// The most items one array may hold (2^28). Real vocabularies hold a few hundred thousand.
pub const MAX_ARRAY_ITEMS: u64 = 1 << 28;

/// The most dimensions a tensor has (ggml's `GGML_MAX_DIMS`).
pub const MAX_TENSOR_DIMS: u32 = 4;

/// How deep arrays of arrays may nest. The format allows nesting; no real file nests at all.
pub const MAX_ARRAY_DEPTH: usize = 8;

/// What can go wrong reading GGUF metadata. Every variant names where: the byte offset and the
/// key being read (`` `general.name` ``, `` `tokenizer.ggml.tokens`[7] ``, or `the name of key #3`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GgufError {
    /// The data does not start with `GGUF`: not a GGUF file (perhaps an old GGML/GGJT file or a
    /// safetensors file). Check the path or convert the model with llama.cpp's tools.
    #[error("not a gguf file: expected the magic bytes \"GGUF\" at offset 0, found \"{}\"", found.escape_ascii())]
    BadMagic {
        /// The first four bytes found.
        found: [u8; 4],
    },
    /// A GGUF version this reader does not know. Re-convert the model with a current llama.cpp.
    #[error("unsupported gguf version {version} at offset 4: supported versions are 2 and 3{}",
        if SUPPORTED_VERSIONS.contains(&version.swap_bytes()) { " (this looks like a big-endian file, which is not supported)" } else { "" })]
    UnsupportedVersion {
        /// The version found.
        version: u32,
    },
    /// The data ends in the middle of the metadata: the file is truncated (an interrupted
    /// download?). Fetch it again.
    #[error("gguf data ends at offset {offset} in the middle of {key}")]
    Truncated {
        /// What was being read.
        key: String,
        /// Where the data ended.
        offset: u64,
    },
    /// Reading failed for another reason than the end of the data. Check the file system.
    #[error("i/o error at offset {offset} reading {key}: {source}")]
    Io {
        /// What was being read.
        key: String,
        /// Where the read was.
        offset: u64,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A string's length is beyond [`MAX_STRING_BYTES`] (or a key's beyond [`MAX_KEY_BYTES`]):
    /// the file is corrupt. Fetch it again.
    #[error("gguf string at offset {offset} in {key} claims {len} bytes; at most {max} are allowed")]
    StringTooLong {
        /// The key being read.
        key: String,
        /// Where the string's length field is.
        offset: u64,
        /// The length claimed.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// An array's length is beyond [`MAX_ARRAY_ITEMS`]: the file is corrupt. Fetch it again.
    #[error("gguf array at offset {offset} in {key} claims {len} items; at most {max} are allowed")]
    ArrayTooLong {
        /// The key being read.
        key: String,
        /// Where the array's length field is.
        offset: u64,
        /// The length claimed.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Arrays nest deeper than [`MAX_ARRAY_DEPTH`]: the file is corrupt or hostile.
    #[error("gguf arrays nest deeper than {max} levels at offset {offset} in {key}")]
    TooDeep {
        /// The key being read.
        key: String,
        /// Where the innermost array's type field is.
        offset: u64,
        /// The limit.
        max: usize,
    },
    /// A tensor description claims more dimensions than [`MAX_TENSOR_DIMS`]: the file is corrupt.
    #[error(
        "gguf tensor description at offset {offset} for {key} claims {dims} dimensions; at most {max} are allowed"
    )]
    TooManyDimensions {
        /// The tensor being read.
        key: String,
        /// Where its dimension count is.
        offset: u64,
        /// The count claimed.
        dims: u32,
        /// The limit.
        max: u32,
    },
    /// A value type code outside 0..=12: the file is corrupt, or from a newer format version.
    #[error("unknown gguf value type {code} at offset {offset} in {key}: known types are 0 to 12")]
    UnknownValueType {
        /// The key being read.
        key: String,
        /// Where the type code is.
        offset: u64,
        /// The code found.
        code: u32,
    },
    /// A string (key or value) is not UTF-8, which the format requires. The file is corrupt.
    #[error("gguf string at offset {offset} in {key} is not valid utf-8")]
    InvalidUtf8 {
        /// The key being read.
        key: String,
        /// Where the string's bytes start.
        offset: u64,
    },
    /// A bool is neither 0 nor 1. The file is corrupt.
    #[error("gguf bool at offset {offset} in {key} is {value}; expected 0 or 1")]
    InvalidBool {
        /// The key being read.
        key: String,
        /// Where the byte is.
        offset: u64,
        /// The byte found.
        value: u8,
    },
    /// The same key appears twice. The file is corrupt (llama.cpp refuses it too).
    #[error("duplicate gguf key `{key}` at offset {offset}")]
    DuplicateKey {
        /// The repeated key.
        key: String,
        /// Where the second occurrence's name starts.
        offset: u64,
    },
}

/// The type of a GGUF value, with the format's numeric codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GgufValueType {
    /// `u8`.
    U8 = 0,
    /// `i8`.
    I8 = 1,
    /// `u16`.
    U16 = 2,
    /// `i16`.
    I16 = 3,
    /// `u32`.
    U32 = 4,
    /// `i32`.
    I32 = 5,
    /// `f32`.
    F32 = 6,
    /// A one-byte bool (0 or 1).
    Bool = 7,
    /// A UTF-8 string with a `u64` length.
    String = 8,
    /// An array: item type, `u64` length, items.
    Array = 9,
    /// `u64`.
    U64 = 10,
    /// `i64`.
    I64 = 11,
    /// `f64`.
    F64 = 12,
}

impl GgufValueType {
    /// The type with the format's code `code`, if there is one.
    pub const fn from_code(code: u32) -> Option<GgufValueType> {
        Some(match code {
            0 => GgufValueType::U8,
            1 => GgufValueType::I8,
            2 => GgufValueType::U16,
            3 => GgufValueType::I16,
            4 => GgufValueType::U32,
            5 => GgufValueType::I32,
            6 => GgufValueType::F32,
            7 => GgufValueType::Bool,
            8 => GgufValueType::String,
            9 => GgufValueType::Array,
            10 => GgufValueType::U64,
            11 => GgufValueType::I64,
            12 => GgufValueType::F64,
            _ => return None,
        })
    }

    /// The format's code for this type.
    pub const fn code(self) -> u32 {
        self as u32
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// `u8`.
    U8(u8),
    /// `i8`.
    I8(i8),
    /// `u16`.
    U16(u16),
    /// `i16`.
    I16(i16),
    /// `u32`.
    U32(u32),
    /// `i32`.
    I32(i32),
    /// `u64`.
    U64(u64),
    /// `i64`.
    I64(i64),
    /// `f32`.
    F32(f32),
    /// `f64`.
    F64(f64),
    /// A bool.
    Bool(bool),
    /// A string.
    String(String),
    /// An array; `item_type` is kept so that an empty array still says what it holds.
    Array {
        /// The declared type of every item.
        item_type: GgufValueType,
        /// The items, each of `item_type`.
        items: Vec<GgufValue>,
    },
}

impl GgufValue {
    /// This value's type.
    pub fn value_type(&self) -> GgufValueType {
        match self {
            GgufValue::U8(_) => GgufValueType::U8,
            GgufValue::I8(_) => GgufValueType::I8,
            GgufValue::U16(_) => GgufValueType::U16,
            GgufValue::I16(_) => GgufValueType::I16,
            GgufValue::U32(_) => GgufValueType::U32,
            GgufValue::I32(_) => GgufValueType::I32,
            GgufValue::U64(_) => GgufValueType::U64,
            GgufValue::I64(_) => GgufValueType::I64,
            GgufValue::F32(_) => GgufValueType::F32,
            GgufValue::F64(_) => GgufValueType::F64,
            GgufValue::Bool(_) => GgufValueType::Bool,
            GgufValue::String(_) => GgufValueType::String,
            GgufValue::Array { .. } => GgufValueType::Array,
        }
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// Any integer type as `u64`, if it is not negative. Writers disagree on which integer type
    /// a key gets (`context_length` is `u32` in llama.cpp's files, `u64` in others).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer type as `i64`, if it fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            GgufValue::I8(v) => Some(v.into()),
            GgufValue::I16(v) => Some(v.into()),
            GgufValue::I32(v) => Some(v.into()),
            GgufValue::I64(v) => Some(v),
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// A float (`f32` widened, or `f64`), if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The bool, if this is one.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            GgufValue::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array { items, .. } => Some(items),
            _ => None,
        }
    }
}

/// A GGUF file's header and metadata, without its tensors.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GgufMetadata {
    /// The format version (2 or 3).
    pub version: u32,
    /// How many tensors the file holds (not read).
    pub tensor_count: u64,
    /// Every metadata key and its value.
    pub kv: BTreeMap<String, GgufValue>,
    /// The model's parameter count (the elements of every tensor; an output table of the token
    /// embedding's shape counts once), when the tensor descriptions were read
    /// ([`GgufMetadata::read_with_parameters`]).
    pub parameters: Option<u64>,
}

impl GgufMetadata {
    /// Reads the header and every key/value pair from `reader`, leaving it just before the tensor
    /// descriptions. Lengths beyond [`MAX_STRING_BYTES`], [`MAX_ARRAY_ITEMS`] or
    /// [`MAX_KEY_BYTES`] are refused before anything is allocated for them.
    pub fn read(reader: impl Read) -> Result<GgufMetadata, GgufError> {
        read_metadata(&mut Reader { inner: reader, offset: 0 })
    }

    /// [`GgufMetadata::read`], then the tensor descriptions that follow the metadata (names,
    /// shapes, types and offsets: a few KiB; the tensor data is not read), to count the model's
    /// parameters into [`GgufMetadata::parameters`].
    pub fn read_with_parameters(reader: impl Read) -> Result<GgufMetadata, GgufError> {
        let mut r = Reader { inner: reader, offset: 0 };
        let mut metadata = read_metadata(&mut r)?;
        let mut parameters: u64 = 0;
        // Models whose output table is their token embedding (tied, as in Qwen2.5 0.5B and SmolLM2)
        // are counted with it once by their authors, but some GGUF conversions store it twice:
        // Qwen2.5-Coder-0.5B-Instruct's Q4_K_M file has `output.weight` beside `token_embd.weight`,
        // which would make its 494 million parameters 630. A separate output table of the same shape
        // counts once, so a model's size does not depend on how its file was converted (an untied
        // model of that shape is counted a little small; only the small-model rule reads the count).
        let mut embedding: Option<Vec<u64>> = None;
        let mut output: Option<(Vec<u64>, u64)> = None;
        for index in 0..metadata.tensor_count {
            let name = r.string(MAX_KEY_BYTES, &|| format!("the name of tensor #{index}"))?;
            let ctx = || format!("tensor `{name}`");
            let dims_offset = r.offset;
            let dims = r.u32(&ctx)?;
            if dims > MAX_TENSOR_DIMS {
                return Err(GgufError::TooManyDimensions {
                    key: ctx(),
                    offset: dims_offset,
                    dims,
                    max: MAX_TENSOR_DIMS,
                });
            }
            let mut shape = Vec::with_capacity(dims as usize);
            for _ in 0..dims {
                shape.push(r.u64(&ctx)?);
            }
            let elements = shape.iter().fold(1u64, |n, d| n.saturating_mul(*d));
            let _type = r.u32(&ctx)?;
            let _data_offset = r.u64(&ctx)?;
            parameters = parameters.saturating_add(elements);
            match name.as_str() {
                "token_embd.weight" => embedding = Some(shape),
                "output.weight" => output = Some((shape, elements)),
                _ => {}
            }
        }
        if let (Some(embedding), Some((shape, elements))) = (embedding, output)
            && embedding == shape
        {
            parameters = parameters.saturating_sub(elements);
        }
        metadata.parameters = Some(parameters);
        Ok(metadata)
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&GgufValue> {
        self.kv.get(key)
    }

    /// The value of `key` if it is a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(GgufValue::as_str)
    }

    /// `general.architecture`: `llama`, `qwen2`, `gemma3`, ...
    pub fn architecture(&self) -> Option<&str> {
        self.get_str("general.architecture")
    }

    /// `general.name`: the model's human name, when the converter recorded it.
    pub fn name(&self) -> Option<&str> {
        self.get_str("general.name")
    }

    /// `{architecture}.context_length`: the context window the model was trained for.
    pub fn context_length(&self) -> Option<u64> {
        let arch = self.architecture()?;
        self.get(&format!("{arch}.context_length")).and_then(GgufValue::as_u64)
    }

    /// `tokenizer.chat_template`: the Jinja chat template, when the file carries one.
    pub fn chat_template(&self) -> Option<&str> {
        self.get_str("tokenizer.chat_template")
    }
}

/// The header and every key/value pair (see [`GgufMetadata::read`]).
fn read_metadata<R: Read>(r: &mut Reader<R>) -> Result<GgufMetadata, GgufError> {
    let header = || "the header".to_owned();
    let mut magic = [0; 4];
    r.fill(&mut magic, &header)?;
    if magic != MAGIC {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = r.u32(&header)?;
    if !SUPPORTED_VERSIONS.contains(&version) {
        return Err(GgufError::UnsupportedVersion { version });
    }
    let tensor_count = r.u64(&header)?;
    let kv_count = r.u64(&header)?;
    let mut kv = BTreeMap::new();
    for index in 0..kv_count {
        let key_offset = r.offset;
        let key = r.string(MAX_KEY_BYTES, &|| format!("the name of key #{index}"))?;
        let ctx = || format!("`{key}`");
        let type_offset = r.offset;
        let code = r.u32(&ctx)?;
        let value_type = GgufValueType::from_code(code).ok_or_else(|| GgufError::UnknownValueType {
            key: ctx(),
            offset: type_offset,
            code,
        })?;
        let value = r.value(value_type, 0, &ctx)?;
        if kv.contains_key(&key) {
            return Err(GgufError::DuplicateKey { key, offset: key_offset });
        }
        kv.insert(key, value);
    }
    Ok(GgufMetadata { version, tensor_count, kv, parameters: None })
}

/// A reader that knows its offset and turns short reads into [`GgufError::Truncated`].
struct Reader<R> {
    inner: R,
    offset: u64,
}

/// Describes what is being read, for errors; only called when one happens.
type Ctx<'a> = &'a dyn Fn() -> String;

impl<R: Read> Reader<R> {
    /// Fills `buf` completely, counting every byte read, so that a truncation is reported at the
    /// exact offset where the data ended.
    fn fill(&mut self, buf: &mut [u8], ctx: Ctx) -> Result<(), GgufError> {
        let mut filled = 0;
        while filled < buf.len() {
            match self.inner.read(&mut buf[filled..]) {
                Ok(0) => return Err(GgufError::Truncated { key: ctx(), offset: self.offset }),
                Ok(n) => {
                    filled += n;
                    self.offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(GgufError::Io { key: ctx(), offset: self.offset, source: e }),
            }
        }
        Ok(())
    }

    fn array<const N: usize>(&mut self, ctx: Ctx) -> Result<[u8; N], GgufError> {
        let mut buf = [0; N];
        self.fill(&mut buf, ctx)?;
        Ok(buf)
    }

    fn u32(&mut self, ctx: Ctx) -> Result<u32, GgufError> {
        Ok(u32::from_le_bytes(self.array(ctx)?))
    }

    fn u64(&mut self, ctx: Ctx) -> Result<u64, GgufError> {
        Ok(u64::from_le_bytes(self.array(ctx)?))
    }

    /// A `u64` length then that many UTF-8 bytes, at most `max`.
    fn string(&mut self, max: u64, ctx: Ctx) -> Result<String, GgufError> {
        let len_offset = self.offset;
        let len = self.u64(ctx)?;
        if len > max {
            return Err(GgufError::StringTooLong { key: ctx(), offset: len_offset, len, max });
        }
        let start = self.offset;
        // `len <= max` (64 MiB at most) so the allocation is bounded; a lying length on a short
        // file ends in `Truncated`, not in a huge allocation.
        let mut bytes = vec![0; usize::try_from(len).unwrap_or(usize::MAX)];
        self.fill(&mut bytes, ctx)?;
        String::from_utf8(bytes).map_err(|_| GgufError::InvalidUtf8 { key: ctx(), offset: start })
    }

    fn value(&mut self, value_type: GgufValueType, depth: usize, ctx: Ctx) -> Result<GgufValue, GgufError> {
        Ok(match value_type {
            GgufValueType::U8 => GgufValue::U8(u8::from_le_bytes(self.array(ctx)?)),
            GgufValueType::I8 => GgufValue::I8(i8::from_le_bytes(self.array(ctx)?)),
            GgufValueType::U16 => GgufValue::U16(u16::from_le_bytes(self.array(ctx)?)),
            GgufValueType::I16 => GgufValue::I16(i16::from_le_bytes(self.array(ctx)?)),
            GgufValueType::U32 => GgufValue::U32(self.u32(ctx)?),
            GgufValueType::I32 => GgufValue::I32(i32::from_le_bytes(self.array(ctx)?)),
            GgufValueType::U64 => GgufValue::U64(self.u64(ctx)?),
            GgufValueType::I64 => GgufValue::I64(i64::from_le_bytes(self.array(ctx)?)),
            GgufValueType::F32 => GgufValue::F32(f32::from_le_bytes(self.array(ctx)?)),
            GgufValueType::F64 => GgufValue::F64(f64::from_le_bytes(self.array(ctx)?)),
            GgufValueType::Bool => {
                let offset = self.offset;
                match self.array::<1>(ctx)?[0] {
                    0 => GgufValue::Bool(false),
                    1 => GgufValue::Bool(true),
                    value => return Err(GgufError::InvalidBool { key: ctx(), offset, value }),
                }
            }
            GgufValueType::String => GgufValue::String(self.string(MAX_STRING_BYTES, ctx)?),
            GgufValueType::Array => {
                let type_offset = self.offset;
                if depth >= MAX_ARRAY_DEPTH {
                    return Err(GgufError::TooDeep { key: ctx(), offset: type_offset, max: MAX_ARRAY_DEPTH });
                }
                let code = self.u32(ctx)?;
                let item_type = GgufValueType::from_code(code)
                    .ok_or_else(|| GgufError::UnknownValueType { key: ctx(), offset: type_offset, code })?;
                let len_offset = self.offset;
                let len = self.u64(ctx)?;
                if len > MAX_ARRAY_ITEMS {
                    return Err(GgufError::ArrayTooLong {
                        key: ctx(),
                        offset: len_offset,
                        len,
                        max: MAX_ARRAY_ITEMS,
                    });
                }
                // Grow as items arrive rather than trusting the length for the allocation.
                let mut items = Vec::with_capacity(usize::try_from(len.min(1 << 16)).unwrap_or(0));
                for i in 0..len {
                    items.push(self.value(item_type, depth + 1, &|| format!("{}[{i}]", ctx()))?);
                }
                GgufValue::Array { item_type, items }
            }
        })
    }
}

#[cfg(test)]
mod tests;
