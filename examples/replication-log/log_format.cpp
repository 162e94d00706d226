// The log's records: written by the leader, checked by each follower before it acknowledges
// them, and the byte comparison of the final check (replication.hpp).
#include <algorithm>
#include <cstring>

#include "replication.hpp"

namespace replog {

namespace {

// splitmix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number generators", OOPSLA
// 2014): the payload's pattern, a function of the sequence, so any follower can tell a record
// that is not the one the leader wrote.
std::uint64_t next_pattern(std::uint64_t& state) noexcept {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// FNV-1a's 64-bit step (IETF draft-eastlake-fnv) taken over 8-byte words, then the tail bytes:
// a word per multiply, so a follower checks a 64 KiB record in about 8 000 steps.
std::uint64_t checksum(const std::byte* p, std::size_t n, std::uint64_t seed) noexcept {
    constexpr std::uint64_t prime = 0x100000001b3ull;
    std::uint64_t h = 0xcbf29ce484222325ull ^ seed;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, p + i, 8);
        h = (h ^ w) * prime;
    }
    for (; i < n; ++i) {
        h = (h ^ static_cast<std::uint64_t>(p[i])) * prime;
    }
    return h;
}

}  // namespace

std::size_t write_record(std::span<std::byte> log, std::size_t at, std::uint64_t sequence, std::uint32_t length) {
    const std::size_t span = record_span(length);
    std::byte* payload = log.data() + at + sizeof(record_header);
    std::uint64_t state = sequence;
    std::size_t i = 0;
    for (; i + 8 <= length; i += 8) {
        const std::uint64_t w = next_pattern(state);
        std::memcpy(payload + i, &w, 8);
    }
    if (i < length) {
        const std::uint64_t w = next_pattern(state);
        std::memcpy(payload + i, &w, length - i);
    }
    std::memset(payload + length, 0, span - sizeof(record_header) - length);
    const record_header h{.length = length, .sequence = sequence, .checksum = checksum(payload, length, sequence)};
    std::memcpy(log.data() + at, &h, sizeof h);
    return span;
}

outcome<void> check_records(std::span<const std::byte> log, std::size_t from, std::size_t to,
                            std::uint64_t& next_sequence) {
    const auto bad = [&](std::size_t at, const std::string& what) {
        return std::unexpected("record at log offset " + std::to_string(at) + ": " + what);
    };
    if (to > log.size()) {
        return bad(from, "the valid end " + std::to_string(to) + " is past the log's " + std::to_string(log.size()));
    }
    for (std::size_t at = from; at < to;) {
        record_header h;
        std::memcpy(&h, log.data() + at, sizeof h);
        if (h.magic != record_magic) {
            return bad(at, "no record header (magic " + std::to_string(h.magic) + ")");
        }
        if (h.sequence != next_sequence) {
            return bad(at, "sequence " + std::to_string(h.sequence) + ", expected " + std::to_string(next_sequence));
        }
        if (at + record_span(h.length) > to) {
            return bad(at, "length " + std::to_string(h.length) + " runs past the valid end " + std::to_string(to));
        }
        if (checksum(log.data() + at + sizeof h, h.length, h.sequence) != h.checksum) {
            return bad(at, "payload checksum differs (sequence " + std::to_string(h.sequence) + ")");
        }
        ++next_sequence;
        at += record_span(h.length);
    }
    return {};
}

std::optional<std::size_t> first_difference(std::span<const std::byte> a, std::span<const std::byte> b,
                                            std::size_t n) {
    n = std::min({n, a.size(), b.size()});
    // memcmp a MiB at a time, then the byte inside the differing MiB
    constexpr std::size_t chunk = 1 << 20;
    for (std::size_t at = 0; at < n; at += chunk) {
        const std::size_t k = std::min(chunk, n - at);
        if (std::memcmp(a.data() + at, b.data() + at, k) != 0) {
            const auto m = std::mismatch(a.begin() + static_cast<std::ptrdiff_t>(at),
                                         a.begin() + static_cast<std::ptrdiff_t>(at + k),
                                         b.begin() + static_cast<std::ptrdiff_t>(at));
            return static_cast<std::size_t>(m.first - a.begin());
        }
    }
    return std::nullopt;
}

}  // namespace replog
