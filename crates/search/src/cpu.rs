//! What the CPU can run, detected once: the one place the crate asks about instruction sets
//! beyond AVX2 (the encoder's kernels and the vector scan both use it), and about AVX2 with FMA
//! for the cosine of two vectors ([`crate::hybrid::dot`]).

/// Whether this CPU has AVX-512 F, BW and VNNI (`vpdpbusd`, 64 byte products per instruction).
pub(crate) fn avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *HAS.get_or_init(|| {
            is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
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
