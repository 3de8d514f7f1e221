//! Rewrites a GGUF model in another quantization with llama.cpp's quantizer, for measuring how each engine's
//! speed depends on the quantization type (docs/BENCHMARKS.md).
//!
//! `cargo run --release --example requantize -- IN.gguf OUT.gguf q8_0|q4_0|q4_k_m|q6_k|f16`
//!
//! Quantizing an already quantized file keeps its precision loss: the output is the right size and speed for
//! its type, not the quality of a file quantized from the original weights.

// llama-cpp-2 has no safe quantizer; this development tool calls llama.cpp's C function directly.
#![allow(unsafe_code)]

use std::ffi::CString;

use anyhow::{Context, bail};
use llama_cpp_sys_2 as sys;

const TYPES: &[(&str, sys::llama_ftype)] = &[
    ("q8_0", sys::LLAMA_FTYPE_MOSTLY_Q8_0),
    ("q4_0", sys::LLAMA_FTYPE_MOSTLY_Q4_0),
    ("q4_1", sys::LLAMA_FTYPE_MOSTLY_Q4_1),
    ("q4_k_m", sys::LLAMA_FTYPE_MOSTLY_Q4_K_M),
    ("q6_k", sys::LLAMA_FTYPE_MOSTLY_Q6_K),
    ("f16", sys::LLAMA_FTYPE_MOSTLY_F16),
];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, kind] = &args[..] else {
        bail!("usage: requantize IN.gguf OUT.gguf TYPE (TYPE: {})", names());
    };
    let Some(&(_, ftype)) = TYPES.iter().find(|(name, _)| name.eq_ignore_ascii_case(kind)) else {
        bail!("unknown quantization type {kind:?}; expected one of: {}", names());
    };
    if !std::path::Path::new(input).is_file() {
        bail!("{input} is not a file");
    }
    let c_in = CString::new(input.as_str()).context("input path contains a NUL byte")?;
    // Written under a temporary name and renamed, so that a failed run leaves no half-written model.
    let partial = format!("{output}.partial");
    let c_out = CString::new(partial.as_str()).context("output path contains a NUL byte")?;
    // SAFETY: the default parameters are plain data; the paths are valid NUL-terminated strings that outlive the
    // call; llama.cpp reads `c_in` and writes `c_out`, nothing else.
    let status = unsafe {
        sys::llama_backend_init();
        let mut params = sys::llama_model_quantize_default_params();
        params.ftype = ftype;
        params.allow_requantize = true;
        params.nthread = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
        sys::llama_model_quantize(c_in.as_ptr(), c_out.as_ptr(), &params)
    };
    if status != 0 {
        let _ = std::fs::remove_file(&partial);
        bail!("llama.cpp could not quantize {input} to {kind} (status {status})");
    }
    std::fs::rename(&partial, output).with_context(|| format!("could not rename {partial} to {output}"))?;
    println!("{output}");
    Ok(())
}

fn names() -> String {
    TYPES.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}
