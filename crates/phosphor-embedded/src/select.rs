//! Which engine runs a model file: the configured one, or for `auto` the fastest one compiled in that knows the
//! file's architecture.

use std::fmt;

use phosphor_base::config::Engine;

use crate::error::{EmbeddedError, Result};

/// An inference engine this crate can run a GGUF model on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// [llama.cpp](https://github.com/ggml-org/llama.cpp), through the `llama-cpp-2` crate (feature `llamacpp`).
    LlamaCpp,
    /// [mistral.rs](https://github.com/EricLBuehler/mistral.rs) (feature `mistralrs`).
    MistralRs,
}

impl EngineKind {
    /// Both engines, in the order `auto` prefers them.
    pub const ALL: [EngineKind; 2] = [EngineKind::LlamaCpp, EngineKind::MistralRs];

    /// The engine's name as people write it: `llama.cpp`, `mistral.rs`.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::LlamaCpp => "llama.cpp",
            EngineKind::MistralRs => "mistral.rs",
        }
    }

    /// The value of `embedded_models.inference.engine` that names it.
    pub fn config_name(self) -> &'static str {
        match self {
            EngineKind::LlamaCpp => Engine::Llamacpp.as_str(),
            EngineKind::MistralRs => Engine::Mistralrs.as_str(),
        }
    }

    /// Whether this build has the engine (its cargo feature was on).
    pub fn is_compiled_in(self) -> bool {
        match self {
            EngineKind::LlamaCpp => cfg!(feature = "llamacpp"),
            EngineKind::MistralRs => cfg!(feature = "mistralrs"),
        }
    }

    /// The `general.architecture` values the engine loads from GGUF.
    pub fn architectures(self) -> &'static [&'static str] {
        match self {
            EngineKind::LlamaCpp => &LLAMA_CPP_ARCHITECTURES,
            EngineKind::MistralRs => &MISTRAL_RS_ARCHITECTURES,
        }
    }

    /// Whether the engine loads GGUF files of this architecture (compiled in or not).
    pub fn runs(self, architecture: &str) -> bool {
        self.architectures().iter().any(|a| a.eq_ignore_ascii_case(architecture))
    }
}

impl fmt::Display for EngineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The architectures mistral.rs 0.8 loads from GGUF (`general.architecture` values).
pub const MISTRAL_RS_ARCHITECTURES: [&str; 8] =
    ["llama", "phi2", "phi3", "starcoder2", "qwen2", "qwen3", "qwen3moe", "mistral3"];

/// The text-generation architectures of the llama.cpp that `llama-cpp-sys-2` 0.1.161 vendors (its
/// `src/llama-arch.cpp`, less the embedding-only, speech and vision-tower entries).
pub const LLAMA_CPP_ARCHITECTURES: [&str; 136] = [
    "llama",
    "llama4",
    "deci",
    "falcon",
    "grok",
    "gpt2",
    "gptj",
    "gptneox",
    "mpt",
    "baichuan",
    "starcoder",
    "refact",
    "bloom",
    "stablelm",
    "qwen",
    "qwen2",
    "qwen2moe",
    "qwen2vl",
    "qwen3",
    "qwen3moe",
    "qwen3next",
    "qwen3vl",
    "qwen3vlmoe",
    "qwen35",
    "qwen35moe",
    "clef",
    "qwen4exp",
    "phi2",
    "phi3",
    "phimoe",
    "plamo",
    "plamo2",
    "plamo3",
    "codeshell",
    "orion",
    "internlm2",
    "minicpm",
    "minicpm3",
    "gemma",
    "gemma2",
    "gemma3",
    "gemma3n",
    "gemma4",
    "starcoder2",
    "mamba",
    "mamba2",
    "maple",
    "jamba",
    "falcon-h1",
    "xverse",
    "command-r",
    "cohere2",
    "cohere2moe",
    "dbrx",
    "olmo",
    "olmo2",
    "olmoe",
    "muse-glimmer",
    "openelm",
    "arctic",
    "deepseek",
    "deepseek2",
    "deepseek2-ocr",
    "deepseek32",
    "deepseek4",
    "chatglm",
    "glm4",
    "glm4moe",
    "glm-dsa",
    "bitnet",
    "t5",
    "jais",
    "jais2",
    "nemotron",
    "nemotron_h",
    "nemotron_h_moe",
    "exaone",
    "exaone4",
    "exaone-moe",
    "rwkv6",
    "rwkv6qwen2",
    "rwkv7",
    "arwkv7",
    "granite",
    "granitemoe",
    "granitehybrid",
    "graniteswitch",
    "granite_swa",
    "chameleon",
    "plm",
    "bailingmoe",
    "bailingmoe2",
    "bailingmoe3",
    "dots1",
    "dots3note",
    "arcee",
    "afmoe",
    "laguna",
    "ernie4_5",
    "ernie4_5-moe",
    "hunyuan-moe",
    "hunyuan-dense",
    "hunyuan_vl",
    "hy_v3",
    "hy_v4",
    "smollm3",
    "gpt-oss",
    "lfm2",
    "lfm2moe",
    "dream",
    "smallthinker",
    "llada",
    "llada-moe",
    "seed_oss",
    "grovemoe",
    "apertus",
    "minimax-01",
    "hrm_text",
    "minimax-m2",
    "minimax-m3",
    "cogvlm",
    "rnd1",
    "pangu-embedded",
    "mistral3",
    "mistral4",
    "paddleocr",
    "mimo2",
    "step35",
    "spark2_5",
    "maincoder",
    "kimi-linear",
    "kimi-k3",
    "glm5-next",
    "talkie",
    "mellum",
    "nanbeige",
];

/// The engine that runs a file of `architecture`, as `engine` asks.
///
/// - An explicit engine must be compiled in and know the architecture.
/// - `auto` takes llama.cpp when it is compiled in and knows the architecture, else mistral.rs on the same terms.
///   llama.cpp comes first because it measured several times faster on CPUs (docs/BENCHMARKS.md); on GPUs the
///   order is the same, and only llama.cpp has a Vulkan backend.
///
/// `model` names the file or short name in errors.
pub fn choose_engine(engine: Engine, architecture: &str, model: &str) -> Result<EngineKind> {
    let wanted = match engine {
        Engine::Auto => None,
        Engine::Llamacpp => Some(EngineKind::LlamaCpp),
        Engine::Mistralrs => Some(EngineKind::MistralRs),
    };
    if let Some(kind) = wanted {
        if kind.is_compiled_in() && kind.runs(architecture) {
            return Ok(kind);
        }
        return Err(EmbeddedError::EngineUnavailable {
            engine: kind.config_name(),
            model: model.to_owned(),
            architecture: architecture.to_owned(),
            reason: if kind.is_compiled_in() {
                format!("{kind} cannot load `{architecture}` models from GGUF")
            } else {
                format!("this build has no {kind} engine (cargo feature `{}`)", kind.config_name())
            },
            instead: alternatives(architecture),
        });
    }
    EngineKind::ALL
        .into_iter()
        .find(|kind| kind.is_compiled_in() && kind.runs(architecture))
        .ok_or_else(|| unsupported(model, architecture))
}

/// What would work instead of a refused engine choice, for the error message.
fn alternatives(architecture: &str) -> String {
    let runnable: Vec<&str> = EngineKind::ALL
        .into_iter()
        .filter(|kind| kind.is_compiled_in() && kind.runs(architecture))
        .map(EngineKind::config_name)
        .collect();
    if runnable.is_empty() {
        match EngineKind::ALL.into_iter().find(|kind| kind.runs(architecture)) {
            Some(kind) => format!(
                "build with the cargo feature `{}`, or choose a model of another architecture",
                kind.config_name()
            ),
            None => "choose a model of another architecture".to_owned(),
        }
    } else {
        format!("set it to `auto` or `{}`", runnable.join("` or `"))
    }
}

/// The error for a model that no engine compiled in can run.
pub(crate) fn unsupported(model: &str, architecture: &str) -> EmbeddedError {
    let engines: Vec<String> = EngineKind::ALL
        .into_iter()
        .map(|kind| {
            if kind.is_compiled_in() {
                let list = kind.architectures();
                if list.len() > 12 {
                    format!("{kind} loads {} architectures", list.len())
                } else {
                    format!("{kind} loads {}", list.join(", "))
                }
            } else if kind.runs(architecture) {
                format!("{kind} could, but is not in this build (cargo feature `{}`)", kind.config_name())
            } else {
                format!("{kind} is not in this build")
            }
        })
        .collect();
    EmbeddedError::UnsupportedArchitecture {
        model: model.to_owned(),
        architecture: architecture.to_owned(),
        engines: engines.join("; "),
        alternatives: crate::catalog::supported_short_names(),
    }
}

/// Whether some engine compiled in can run GGUF files of this architecture.
pub fn is_supported_architecture(architecture: &str) -> bool {
    EngineKind::ALL.into_iter().any(|kind| kind.is_compiled_in() && kind.runs(architecture))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn auto_prefers_llama_cpp_and_falls_back_to_mistral_rs() {
        let auto = |arch| choose_engine(Engine::Auto, arch, "m.gguf");
        if cfg!(feature = "llamacpp") {
            assert_eq!(auto("llama").unwrap(), EngineKind::LlamaCpp);
            assert_eq!(auto("gemma3").unwrap(), EngineKind::LlamaCpp);
            assert_eq!(auto("qwen35").unwrap(), EngineKind::LlamaCpp);
        } else if cfg!(feature = "mistralrs") {
            assert_eq!(auto("llama").unwrap(), EngineKind::MistralRs);
            assert!(auto("gemma3").is_err());
        }
        let err = auto("wavenet").unwrap_err();
        assert!(matches!(err, EmbeddedError::UnsupportedArchitecture { .. }), "{err}");
    }

    #[test]
    fn an_explicit_engine_must_run_the_architecture() {
        if cfg!(feature = "mistralrs") {
            assert_eq!(choose_engine(Engine::Mistralrs, "qwen3", "m").unwrap(), EngineKind::MistralRs);
            let err = choose_engine(Engine::Mistralrs, "gemma3", "gemma.gguf").unwrap_err();
            let instead = if cfg!(feature = "llamacpp") {
                "set it to `auto` or `llamacpp`"
            } else {
                "build with the cargo feature `llamacpp`, or choose a model of another architecture"
            };
            assert_eq!(
                err.to_string(),
                format!(
                    "`embedded_models.inference.engine` is \"mistralrs\", but gemma.gguf is a `gemma3` model and \
                     mistral.rs cannot load `gemma3` models from GGUF; {instead}"
                )
            );
        }
        if !cfg!(feature = "llamacpp") {
            let err = choose_engine(Engine::Llamacpp, "llama", "m.gguf").unwrap_err();
            assert!(
                err.to_string().contains("this build has no llama.cpp engine (cargo feature `llamacpp`)")
            );
        }
    }

    #[test]
    fn the_lists_hold_the_architectures_users_ask_for() {
        for arch in ["gemma3", "qwen35", "gemma2", "llama", "qwen3", "phi3"] {
            assert!(EngineKind::LlamaCpp.runs(arch), "{arch}");
        }
        for arch in MISTRAL_RS_ARCHITECTURES {
            assert!(
                EngineKind::LlamaCpp.runs(arch),
                "llama.cpp should run everything mistral.rs does: {arch}"
            );
        }
        assert!(!EngineKind::MistralRs.runs("gemma3"));
    }
}
