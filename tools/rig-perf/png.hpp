#pragma once
// A PNG writer for rig-perf --plot, with no library (PNG: ISO/IEC 15948, RFC 2083; zlib: RFC
// 1950; deflate: RFC 1951). Truecolour, 8 bits per channel (IHDR colour type 2, bit depth 8),
// no interlace, filter type 0 on every row; the image data is a zlib stream of *stored*
// deflate blocks (BTYPE 00: no compression), which every PNG reader inflates. A plot is
// mostly white, so the file is larger than a compressing writer's (about 3 bytes a pixel):
// the price of owing nothing to zlib.
#include <cstdint>
#include <span>
#include <vector>

namespace rig::perf::png {

// CRC-32 of ISO 3309 / ITU-T V.42 as PNG uses it (polynomial 0x04C11DB7, reflected 0xEDB88320,
// initial and final XOR 0xFFFFFFFF): crc32("123456789") == 0xCBF43926. `crc` continues an
// earlier call's result over more bytes.
std::uint32_t crc32(std::span<const std::uint8_t> bytes, std::uint32_t crc = 0) noexcept;
// Adler-32 of RFC 1950 §8.2 (sums modulo 65521, the largest prime below 2^16):
// adler32("Wikipedia") == 0x11E60398.
std::uint32_t adler32(std::span<const std::uint8_t> bytes) noexcept;

// The zlib stream (RFC 1950: CMF 0x78, FLG 0x01, stored deflate blocks of at most 65535
// bytes, the last one BFINAL, then the Adler-32 of `data`, big-endian) that inflates to data.
std::vector<std::uint8_t> zlib_stored(std::span<const std::uint8_t> data);

// The PNG file of a width x height image given as rows of RGB triplets, top row first
// (rgb.size() == width * height * 3). Throws std::invalid_argument on a size mismatch or a
// zero or over 2^31 - 1 dimension (PNG's limit).
std::vector<std::uint8_t> encode_rgb(std::uint32_t width, std::uint32_t height, std::span<const std::uint8_t> rgb);

}  // namespace rig::perf::png
