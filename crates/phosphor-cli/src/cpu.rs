//! The CPU features this binary was compiled to assume, checked before anything else runs: a binary built for
//! `x86-64-v3` (this workspace's builds, `.cargo/config.toml`) would otherwise die with an illegal instruction
//! on an older CPU.

/// The x86 features this build was compiled to assume (by `-C target-cpu`) that matter for its speed.
fn assumed() -> Vec<&'static str> {
    let mut features = Vec::new();
    macro_rules! assumed {
        ($($feature:literal),*) => {
            $( if cfg!(target_feature = $feature) { features.push($feature); } )*
        };
    }
    assumed!("avx", "avx2", "fma", "f16c", "bmi1", "bmi2", "avx512f");
    features
}

/// Of `assumed`, the features `has` says the CPU lacks.
fn lacking(assumed: &[&'static str], has: impl Fn(&str) -> bool) -> Vec<&'static str> {
    assumed.iter().copied().filter(|f| !has(f)).collect()
}

#[cfg(target_arch = "x86_64")]
fn cpu_has(feature: &str) -> bool {
    match feature {
        "avx" => std::arch::is_x86_feature_detected!("avx"),
        "avx2" => std::arch::is_x86_feature_detected!("avx2"),
        "fma" => std::arch::is_x86_feature_detected!("fma"),
        "f16c" => std::arch::is_x86_feature_detected!("f16c"),
        "bmi1" => std::arch::is_x86_feature_detected!("bmi1"),
        "bmi2" => std::arch::is_x86_feature_detected!("bmi2"),
        "avx512f" => std::arch::is_x86_feature_detected!("avx512f"),
        _ => true,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_has(_feature: &str) -> bool {
    true
}

/// An error message when this CPU lacks a feature the build assumes.
pub(crate) fn check() -> Result<(), String> {
    let missing = lacking(&assumed(), cpu_has);
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "this phosphor binary was built for newer x86-64 CPUs and this CPU lacks {}; build the baseline \
         (`cargo xtask dist --baseline`, or RUSTFLAGS=\"-C target-cpu=x86-64\" before cargo's command)",
        missing.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_only_the_features_the_cpu_lacks() {
        let assumed = ["avx", "avx2", "fma"];
        assert_eq!(lacking(&assumed, |f| f == "avx"), vec!["avx2", "fma"]);
        assert!(lacking(&assumed, |_| true).is_empty());
        assert!(lacking(&[], |_| false).is_empty());
    }

    #[test]
    fn this_build_runs_on_this_cpu() {
        // The test binary itself runs, so the CPU has everything it was compiled for.
        assert_eq!(check(), Ok(()));
    }
}
