// Fuzzes rig::endpoint::parse (rig/endpoint.hpp): the one-line text a peer sends. Oracle: a text
// parse() takes writes back as the same endpoint (to_string() then parse() is the identity), and
// parse() takes nothing it would not write, case of hex digits and the surrounding blanks it
// drops (a line's end, spaces) aside.
#include <algorithm>
#include <cctype>
#include <string>

#include "test/fuzz/harness.hpp"
#include "rig/endpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text = rig::fuzz::text_of(data, size);
    const auto parsed = rig::endpoint::parse(text);
    if (!parsed) {
        rig::fuzz::require(!parsed.error().empty(), "a refusal names what is wrong");
        return 0;
    }
    std::string_view trimmed = text;   // what parse() drops first
    while (!trimmed.empty() && (trimmed.back() == '\n' || trimmed.back() == '\r' || trimmed.back() == ' ')) {
        trimmed.remove_suffix(1);
    }
    while (!trimmed.empty() && trimmed.front() == ' ') {
        trimmed.remove_prefix(1);
    }
    const std::string written = parsed->to_string();
    const auto again = rig::endpoint::parse(written);
    rig::fuzz::require(again && *again == *parsed, "to_string() then parse() gives the same endpoint");
    rig::fuzz::require(std::ranges::equal(written, trimmed, [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
    }), "parse() takes only the text to_string() writes, hex digits in either case");
    return 0;
}
