#pragma once
// CRC-32 (IEEE 802.3, reflected, the ICRC's) by carry-less multiplication: 64 bytes folded per
// step with PCLMULQDQ, then a Barrett reduction (Intel, "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction", 2009; the constants are those of Linux's
// arch/x86/crypto/crc32-pclmul_asm.S and Chromium zlib's crc32_simd.c for the same polynomial).
// 0.7 us per 4 KiB on the build host (an EPYC; 22 us byte by byte). The model's UDP port seals
// each frame it sends and the receiving engine checks each one that arrives: with slicing-by-8
// the CRC was half of the model's CPU there (perf), and rig-perf write_bw -s 65536 between two
// rig-nicsim linked by UDP went from 222 to 1109 MiB/s with this.
#include <cstddef>
#include <cstdint>

namespace rig::roce {

// Whether this CPU has PCLMULQDQ and SSE4.1 (read once).
bool crc32_fold_available() noexcept;
// Runs the CRC register (no inversions: the caller's) over `n` bytes at `p`; n >= 64 and a
// multiple of 16. Only where crc32_fold_available().
std::uint32_t crc32_fold(std::uint32_t crc, const std::byte* p, std::size_t n) noexcept;

}  // namespace rig::roce
