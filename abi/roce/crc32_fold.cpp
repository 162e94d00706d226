#include "abi/roce/crc32_fold.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rig::roce {

#if defined(__x86_64__)

bool crc32_fold_available() noexcept {
    static const bool yes = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    return yes;
}

namespace {

// x1 * k (low and high 64-bit halves each by its constant) folded onto `next`
__attribute__((target("pclmul,sse4.1"))) inline __m128i fold16(__m128i x, __m128i k, __m128i next) noexcept {
    const __m128i lo = _mm_clmulepi64_si128(x, k, 0x00);
    const __m128i hi = _mm_clmulepi64_si128(x, k, 0x11);
    return _mm_xor_si128(_mm_xor_si128(hi, lo), next);
}

__attribute__((target("pclmul,sse4.1"))) inline __m128i load(const std::byte* p) noexcept {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}

}  // namespace

__attribute__((target("pclmul,sse4.1"))) std::uint32_t crc32_fold(std::uint32_t crc, const std::byte* p,
                                                                  std::size_t n) noexcept {
    // x^(4*128+32) and x^(4*128-32) mod P, x^(128+32) and x^(128-32), x^64, then P and
    // floor(x^64 / P) for the Barrett step: bit-reflected, as the paper's appendix gives them
    const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
    const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124);
    const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
    __m128i x1 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
    __m128i x2 = load(p + 16), x3 = load(p + 32), x4 = load(p + 48);
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {   // four lanes, 64 bytes a step
        x1 = fold16(x1, k1k2, load(p));
        x2 = fold16(x2, k1k2, load(p + 16));
        x3 = fold16(x3, k1k2, load(p + 32));
        x4 = fold16(x4, k1k2, load(p + 48));
    }
    x1 = fold16(x1, k3k4, x2);   // the four lanes into one
    x1 = fold16(x1, k3k4, x3);
    x1 = fold16(x1, k3k4, x4);
    for (; n >= 16; p += 16, n -= 16) {
        x1 = fold16(x1, k3k4, load(p));
    }
    // 128 bits to 64, to 32 (Barrett)
    const __m128i mask = _mm_setr_epi32(~0, 0, ~0, 0);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), _mm_clmulepi64_si128(x1, k3k4, 0x10));
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask), k5k0, 0x00), _mm_srli_si128(x1, 4));
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask), poly, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask), poly, 0x00);
    return static_cast<std::uint32_t>(_mm_extract_epi32(_mm_xor_si128(x1, t), 1));
}

#else

bool crc32_fold_available() noexcept { return false; }
std::uint32_t crc32_fold(std::uint32_t crc, const std::byte*, std::size_t) noexcept { return crc; }

#endif

}  // namespace rig::roce
