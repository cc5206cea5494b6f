//! What the CPU can run, detected once: the one place the crate asks about instruction sets
//! beyond AVX2 (the encoder's kernels and the vector scan both use it), and about AVX2 with FMA
//! for the cosine of two vectors ([`crate::hybrid::dot`]).
//!
//! [`AVX512_ENV`] = `off` keeps the crate on its AVX2 kernels where the CPU has AVX-512 too: for
//! CPUs that lower their clock under AVX-512, and to measure on one machine what a CPU without
//! it runs.

/// Environment variable that turns the AVX-512 kernels off (`off`) or leaves them to the CPU
/// (`auto`, the default, or `on`); case and surrounding spaces do not matter.
pub const AVX512_ENV: &str = "TOOLSHED_SEARCH_AVX512";

/// Whether [`AVX512_ENV`] allows AVX-512 (`auto`, `on` or unset), or its value if it is none of
/// `auto`, `on` and `off`.
pub(crate) fn avx512_allowed() -> Result<bool, String> {
    avx512_setting(std::env::var(AVX512_ENV).ok().as_deref())
}

/// [`avx512_allowed`] for the variable's value.
fn avx512_setting(value: Option<&str>) -> Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "auto" | "on") => Ok(true),
        Some("off") => Ok(false),
        Some(_) => Err(value.unwrap_or_default().to_string()),
    }
}

/// Whether this CPU has AVX-512 F, BW, VL and VNNI (`vpdpbusd`, 64 byte products per
/// instruction on 512-bit vectors, 32 on 256-bit ones), and [`AVX512_ENV`] does not turn them
/// off. A value the variable cannot hold leaves the detection as it is (the model's loader
/// reports it, see `Embedder::load_with`).
pub(crate) fn avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            avx512_allowed().unwrap_or(true)
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
                && is_x86_feature_detected!("avx512vnni")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether this CPU has AVX2 and FMA (eight fused multiply-adds per instruction).
pub(crate) fn avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avx512_is_left_to_the_cpu_unless_turned_off() {
        assert_eq!(avx512_setting(None), Ok(true));
        assert_eq!(avx512_setting(Some("auto")), Ok(true));
        assert_eq!(avx512_setting(Some(" off ")), Ok(false));
        assert_eq!(avx512_setting(Some("OFF")), Ok(false));
        assert_eq!(avx512_setting(Some("on")), Ok(true));
        assert_eq!(avx512_setting(Some("no")), Err("no".to_string()));
    }
}
