//! What the CPU can run, detected once: the one place the crate asks about instruction sets
//! beyond AVX2 (the encoder's kernels and the vector scan both use it), and about AVX2 with FMA
//! for the cosine of two vectors ([`crate::hybrid::dot`]).
//!
//! Two settings narrow what is detected, each `auto` (the default), `on` or `off`:
//! - [`AVX512_ENV`] = `off` keeps the crate off AVX-512 where the CPU has it: for CPUs that lower
//!   their clock under AVX-512, and to measure on one machine what a CPU without it runs;
//! - [`AVX_VNNI_ENV`] = `off` keeps the encoder off AVX-VNNI (the 256-bit `vpdpbusd` of CPUs
//!   such as Intel's Alder Lake and Sierra Forest, most of which have no AVX-512): with both
//!   off, the encoder runs its plain AVX2 kernel, so one machine can measure all three.

/// Environment variable that turns the AVX-512 kernels off (`off`) or leaves them to the CPU
/// (`auto`, the default, or `on`); case and surrounding spaces do not matter.
pub const AVX512_ENV: &str = "TOOLSHED_SEARCH_AVX512";

/// Environment variable that turns the AVX-VNNI kernel off (`off`) or leaves it to the CPU
/// (`auto`, the default, or `on`), as [`AVX512_ENV`] does for AVX-512. Only the encoder (feature
/// `semantic`) has such a kernel.
#[cfg_attr(not(feature = "semantic"), allow(dead_code))]
pub const AVX_VNNI_ENV: &str = "TOOLSHED_SEARCH_AVX_VNNI";

/// A setting among [`AVX512_ENV`] and [`AVX_VNNI_ENV`] whose value is none of `auto`, `on` and
/// `off`: its name and value (the model's loader refuses it).
#[cfg_attr(not(feature = "semantic"), allow(dead_code))]
pub(crate) fn invalid_setting() -> Option<(&'static str, String)> {
    [AVX512_ENV, AVX_VNNI_ENV].into_iter().find_map(|name| {
        let value = std::env::var(name).ok();
        setting(value.as_deref()).err().map(|v| (name, v))
    })
}

/// Asks the memory system for `data` ahead of its use: a hint, one per 64-byte line, that
/// neither reads nor can fault (nothing happens off x86-64). The scans that read rows scattered
/// over a large catalog (the vectors a sketch scan keeps, the candidates re-scored exactly)
/// wait on each row's memory in turn; asking for the rows a few places ahead overlaps those
/// waits.
#[inline(always)]
pub(crate) fn prefetch<T>(data: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let start = data.as_ptr().cast::<i8>();
        for offset in (0..std::mem::size_of_val(data)).step_by(64) {
            // SAFETY: SSE is part of x86-64; the address lies within `data`, and a prefetch
            // neither reads into the program nor faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Whether the setting `name` allows its instruction set; a value it cannot hold leaves the
/// detection as it is (the model's loader reports it, see [`invalid_setting`]).
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn allowed(name: &str) -> bool {
    setting(std::env::var(name).ok().as_deref()).unwrap_or(true)
}

/// Whether a setting's value allows its instruction set (`auto`, `on`, empty or unset), or the
/// value if it is none of `auto`, `on` and `off`.
fn setting(value: Option<&str>) -> Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("" | "auto" | "on") => Ok(true),
        Some("off") => Ok(false),
        Some(_) => Err(value.unwrap_or_default().to_string()),
    }
}

/// Whether this CPU has AVX-512 F, BW and VL (16 f32 lanes per instruction, for the encoder's
/// element-wise functions), and [`AVX512_ENV`] does not turn them off.
pub(crate) fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            allowed(AVX512_ENV)
                && is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
                && avx2_fma()
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether this CPU has [`avx512`] and VNNI (`vpdpbusd`, 64 byte products per instruction on
/// 512-bit vectors, 32 on 256-bit ones), and [`AVX512_ENV`] does not turn them off.
pub(crate) fn avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| avx512() && is_x86_feature_detected!("avx512vnni"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether this CPU has [`avx512`] and VPOPCNTDQ (`popcount` of eight 64-bit words per
/// instruction, for the sketch scan), and [`AVX512_ENV`] does not turn them off.
pub(crate) fn avx512_popcnt() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| avx512() && is_x86_feature_detected!("avx512vpopcntdq"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether this CPU has AVX-VNNI (`vpdpbusd` on 256-bit vectors, VEX-encoded: no AVX-512
/// needed) with AVX2 and FMA, and [`AVX_VNNI_ENV`] does not turn it off.
#[cfg_attr(not(feature = "semantic"), allow(dead_code))]
pub(crate) fn avx_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            allowed(AVX_VNNI_ENV) && is_x86_feature_detected!("avxvnni") && avx2_fma()
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
    fn an_instruction_set_is_left_to_the_cpu_unless_turned_off() {
        assert_eq!(setting(None), Ok(true));
        assert_eq!(setting(Some("auto")), Ok(true));
        assert_eq!(setting(Some(" off ")), Ok(false));
        assert_eq!(setting(Some("OFF")), Ok(false));
        assert_eq!(setting(Some("on")), Ok(true));
        assert_eq!(setting(Some("no")), Err("no".to_string()));
    }
}
