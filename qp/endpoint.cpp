#include "rig/endpoint.hpp"

#include <charconv>
#include <cstdio>
#include <optional>

namespace rig {

namespace {

constexpr std::uint32_t max_24 = 0xffffff;

std::string hex_digits(std::uint64_t v, int digits) {
    static constexpr char d[] = "0123456789abcdef";
    std::string s(static_cast<std::size_t>(digits), '0');
    for (int i = digits - 1; i >= 0; --i) {
        s[static_cast<std::size_t>(i)] = d[v & 15];
        v >>= 4;
    }
    return s;
}

std::optional<unsigned> hex_value(char c) {
    if (c >= '0' && c <= '9') return static_cast<unsigned>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<unsigned>(c - 'A' + 10);
    return std::nullopt;
}

// `count` groups of `width` hex digits separated by `sep`, into bytes (big-endian per group).
template <std::size_t N>
bool parse_groups(std::string_view s, std::size_t count, std::size_t width, char sep, std::array<std::byte, N>& out) {
    if (s.size() != count * width + (count - 1)) {
        return false;
    }
    std::size_t byte = 0;
    for (std::size_t g = 0; g < count; ++g) {
        const std::string_view group = s.substr(g * (width + 1), width);
        if (g + 1 < count && s[g * (width + 1) + width] != sep) {
            return false;
        }
        for (std::size_t i = 0; i < width; i += 2) {
            const auto hi = hex_value(group[i]);
            const auto lo = hex_value(group[i + 1]);
            if (!hi || !lo) {
                return false;
            }
            out[byte++] = static_cast<std::byte>(*hi << 4 | *lo);
        }
    }
    return byte == N;
}

std::expected<std::uint32_t, std::string> parse_24(std::string_view name, std::string_view v) {
    if (v.size() < 3 || v.substr(0, 2) != "0x") {
        return std::unexpected(std::string(name) + " \"" + std::string(v) + "\" is not 0x-prefixed hex");
    }
    std::uint32_t n = 0;
    const auto [end, ec] = std::from_chars(v.data() + 2, v.data() + v.size(), n, 16);
    if (ec != std::errc{} || end != v.data() + v.size()) {
        return std::unexpected(std::string(name) + " \"" + std::string(v) + "\" is not 0x-prefixed hex");
    }
    if (n > max_24) {
        return std::unexpected(std::string(name) + " " + std::string(v) + " does not fit 24 bits");
    }
    // to_string() writes exactly six digits: taking "0x12" or "0x0000012" too would give one
    // endpoint many texts (endpoint.hpp: one length, no ambiguity). Found by test/fuzz/peer/endpoint.
    if (v.size() != 2 + 6) {
        return std::unexpected(std::string(name) + " \"" + std::string(v) + "\" is not 0x and six hex digits");
    }
    return n;
}

}  // namespace

std::string endpoint::to_string() const {
    std::string s(prefix);
    s += " qp=0x" + hex_digits(qp, 6);
    s += " psn=0x" + hex_digits(psn, 6);
    s += " gid=";
    for (std::size_t i = 0; i < gid.size(); i += 2) {
        if (i > 0) s += ':';
        s += hex_digits(static_cast<unsigned>(gid[i]) << 8 | static_cast<unsigned>(gid[i + 1]), 4);
    }
    s += " mac=";
    for (std::size_t i = 0; i < mac.size(); ++i) {
        if (i > 0) s += ':';
        s += hex_digits(static_cast<unsigned>(mac[i]), 2);
    }
    return s;
}

std::expected<endpoint, std::string> endpoint::parse(std::string_view text) {
    auto fail = [&](const std::string& why) {
        return std::unexpected("endpoint \"" + std::string(text.substr(0, 120)) + "\": " + why);
    };
    // Surrounding whitespace (a trailing newline from a socket or file) is not part of it.
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
        text.remove_suffix(1);
    }
    while (!text.empty() && text.front() == ' ') {
        text.remove_prefix(1);
    }
    std::array<std::string_view, 5> word{};
    std::size_t n = 0;
    for (std::size_t at = 0; at <= text.size();) {
        const std::size_t sp = std::min(text.find(' ', at), text.size());
        if (n == word.size()) {
            return fail("more than five words");
        }
        word[n++] = text.substr(at, sp - at);
        at = sp + 1;
    }
    if (n != word.size() || word[0] != prefix) {
        return fail("expected \"" + std::string(prefix) + " qp=… psn=… gid=… mac=…\"");
    }
    auto value = [&](std::size_t i, std::string_view key) -> std::optional<std::string_view> {
        if (word[i].substr(0, key.size()) != key || word[i].size() <= key.size() || word[i][key.size()] != '=') {
            return std::nullopt;
        }
        return word[i].substr(key.size() + 1);
    };
    endpoint e;
    const auto qp_text = value(1, "qp");
    const auto psn_text = value(2, "psn");
    const auto gid_text = value(3, "gid");
    const auto mac_text = value(4, "mac");
    if (!qp_text || !psn_text || !gid_text || !mac_text) {
        return fail("fields must be qp=, psn=, gid=, mac= in that order");
    }
    auto q = parse_24("qp", *qp_text);
    if (!q) return fail(q.error());
    auto p = parse_24("psn", *psn_text);
    if (!p) return fail(p.error());
    e.qp = *q;
    e.psn = *p;
    if (!parse_groups(*gid_text, 8, 4, ':', e.gid)) {
        return fail("gid must be 8 groups of 4 hex digits separated by ':'");
    }
    if (!parse_groups(*mac_text, 6, 2, ':', e.mac)) {
        return fail("mac must be 6 groups of 2 hex digits separated by ':'");
    }
    return e;
}

}  // namespace rig
