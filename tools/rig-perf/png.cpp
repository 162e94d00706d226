// The PNG writer (png.hpp), from the definitions: CRC-32 by its polynomial, Adler-32 by its
// sums, zlib's header and stored deflate blocks, PNG's chunks.
#include "tools/rig-perf/png.hpp"

#include <array>
#include <stdexcept>
#include <string>

namespace rig::perf::png {

namespace {

// The CRC of every byte value, shifted through the reflected polynomial bit by bit (the
// table-driven form of the bitwise definition, PNG spec annex D).
constexpr std::array<std::uint32_t, 256> crc_table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
        std::uint32_t c = n;
        for (int k = 0; k < 8; ++k) {
            c = (c & 1) != 0 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        }
        t[n] = c;
    }
    return t;
}();

constexpr std::uint32_t adler_mod = 65521;
// Stored blocks carry at most 2^16 - 1 bytes (LEN is 16 bits).
constexpr std::size_t stored_max = 65535;
constexpr std::uint32_t png_max_dimension = 0x7fffffff;

void put_be32(std::vector<std::uint8_t>& out, std::uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) {
        out.push_back(static_cast<std::uint8_t>(v >> shift));
    }
}

void put_le16(std::vector<std::uint8_t>& out, std::uint16_t v) {
    out.push_back(static_cast<std::uint8_t>(v & 0xff));
    out.push_back(static_cast<std::uint8_t>(v >> 8));
}

// One chunk: length (of the data), type, data, CRC over type and data.
void put_chunk(std::vector<std::uint8_t>& out, const char (&type)[5], std::span<const std::uint8_t> data) {
    put_be32(out, static_cast<std::uint32_t>(data.size()));
    const std::size_t type_at = out.size();
    out.insert(out.end(), type, type + 4);
    out.insert(out.end(), data.begin(), data.end());
    put_be32(out, crc32(std::span<const std::uint8_t>(out).subspan(type_at)));
}

}  // namespace

std::uint32_t crc32(std::span<const std::uint8_t> bytes, std::uint32_t crc) noexcept {
    std::uint32_t c = crc ^ 0xffffffffu;
    for (const std::uint8_t b : bytes) {
        c = crc_table[(c ^ b) & 0xff] ^ (c >> 8);
    }
    return c ^ 0xffffffffu;
}

std::uint32_t adler32(std::span<const std::uint8_t> bytes) noexcept {
    std::uint32_t a = 1, b = 0;
    // 5552 bytes is the most that cannot overflow 32 bits before the modulo (zlib's NMAX)
    constexpr std::size_t run = 5552;
    for (std::size_t at = 0; at < bytes.size(); at += run) {
        const std::size_t end = std::min(bytes.size(), at + run);
        for (std::size_t i = at; i < end; ++i) {
            a += bytes[i];
            b += a;
        }
        a %= adler_mod;
        b %= adler_mod;
    }
    return b << 16 | a;
}

std::vector<std::uint8_t> zlib_stored(std::span<const std::uint8_t> data) {
    std::vector<std::uint8_t> out;
    out.reserve(data.size() + data.size() / stored_max * 5 + 16);
    // CMF: CM 8 (deflate), CINFO 7 (32 KiB window); FLG: FLEVEL 0, no dictionary, FCHECK so
    // that CMF * 256 + FLG is a multiple of 31 (0x7801 = 31 x 991).
    out.push_back(0x78);
    out.push_back(0x01);
    std::size_t at = 0;
    do {
        const std::size_t n = std::min(stored_max, data.size() - at);
        const bool last = at + n == data.size();
        // block header: BFINAL, then BTYPE 00; a stored block skips to the byte boundary
        out.push_back(last ? 0x01 : 0x00);
        put_le16(out, static_cast<std::uint16_t>(n));
        put_le16(out, static_cast<std::uint16_t>(~n & 0xffff));  // NLEN: LEN's one's complement
        out.insert(out.end(), data.begin() + static_cast<std::ptrdiff_t>(at),
                   data.begin() + static_cast<std::ptrdiff_t>(at + n));
        at += n;
    } while (at < data.size());
    put_be32(out, adler32(data));
    return out;
}

std::vector<std::uint8_t> encode_rgb(std::uint32_t width, std::uint32_t height, std::span<const std::uint8_t> rgb) {
    if (width == 0 || height == 0 || width > png_max_dimension || height > png_max_dimension) {
        throw std::invalid_argument("png: an image of " + std::to_string(width) + " x " + std::to_string(height) +
                                    " pixels (each side must be 1 .. 2^31 - 1)");
    }
    const std::size_t row = std::size_t{width} * 3;
    if (rgb.size() != row * height) {
        throw std::invalid_argument("png: " + std::to_string(rgb.size()) + " bytes of RGB for " + std::to_string(width) +
                                    " x " + std::to_string(height) + " pixels (needs " +
                                    std::to_string(row * height) + ")");
    }
    // the filtered image: each row behind its filter type byte, 0 (None)
    std::vector<std::uint8_t> raw;
    raw.reserve((row + 1) * height);
    for (std::uint32_t y = 0; y < height; ++y) {
        raw.push_back(0);
        const auto r = rgb.subspan(y * row, row);
        raw.insert(raw.end(), r.begin(), r.end());
    }
    std::vector<std::uint8_t> out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};  // the signature
    std::vector<std::uint8_t> ihdr;
    put_be32(ihdr, width);
    put_be32(ihdr, height);
    ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // bit depth 8, truecolour, deflate, filter 0, no interlace
    put_chunk(out, "IHDR", ihdr);
    put_chunk(out, "IDAT", zlib_stored(raw));
    put_chunk(out, "IEND", {});
    return out;
}

}  // namespace rig::perf::png
