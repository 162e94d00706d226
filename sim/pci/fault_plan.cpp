// The fault plan's parse and arming (fault_plan.hpp).
#include "sim/pci/fault_plan.hpp"

#include <cctype>
#include <charconv>
#include <string>
#include <vector>

#include "abi/bits.hpp"

namespace rig::sim::pci {

namespace {

constexpr std::string_view fail_form = "expected [CHANNEL:]OP:STATUS[:SYNDROME]";

// A whole-string unsigned number, decimal or 0x hex; nullopt when it is not one. Past 64 bits
// it reads as the largest (out of every range).
std::optional<std::uint64_t> plain_number(std::string_view s) {
    int base = 10;
    if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s.remove_prefix(2);
        base = 16;
    }
    if (s.empty() || std::isxdigit(static_cast<unsigned char>(s[0])) == 0) {
        return std::nullopt;
    }
    std::uint64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
    if (end != s.data() + s.size() || (ec != std::errc{} && ec != std::errc::result_out_of_range)) {
        return std::nullopt;
    }
    return ec == std::errc::result_out_of_range ? ~std::uint64_t{0} : v;
}

// `what` 'TEXT' as a number in lo..hi, or the message saying why not.
std::expected<std::uint32_t, std::string> field(std::string_view what, std::string_view text, std::uint32_t lo,
                                                std::uint32_t hi) {
    const auto v = plain_number(text);
    if (!v) {
        return std::unexpected(std::string(what) + " '" + std::string(text) + "' is not a number (decimal or 0x hex)");
    }
    if (*v < lo || *v > hi) {
        return std::unexpected(std::string(what) + " '" + std::string(text) + "' is out of range " + abi::hex(lo) +
                               ".." + abi::hex(hi));
    }
    return static_cast<std::uint32_t>(*v);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> parts;
    for (std::size_t from = 0;;) {
        const auto at = s.find(sep, from);
        parts.push_back(s.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
        if (at == std::string_view::npos) {
            return parts;
        }
        from = at + 1;
    }
}

std::string channel_names(const fault_space& space) {
    std::string names;
    for (const fault_channel& c : space.channels) {
        names += (names.empty() ? "" : ", ") + std::string(c.name);
    }
    return names;
}

}  // namespace

std::expected<command_failure, std::string> parse_fault_fail(std::string_view text, const fault_space& space) {
    std::vector<std::string_view> parts = split(text, ':');
    command_failure f;
    // a channel name starts with a letter, a number with a digit
    if (!parts.empty() && !parts[0].empty() && std::isalpha(static_cast<unsigned char>(parts[0][0])) != 0) {
        const std::string_view name = parts[0];
        unsigned k = 0;
        while (k < space.channels.size() && space.channels[k].name != name) {
            ++k;
        }
        if (k == space.channels.size()) {
            return std::unexpected(std::string(space.family) + " has no channel '" + std::string(name) +
                                   "' (its channels: " + channel_names(space) + ")");
        }
        f.channel = k;
        parts.erase(parts.begin());
    }
    if (parts.size() < 2 || parts.size() > 3) {
        return std::unexpected(std::string(fail_form));
    }
    const fault_channel& c = space.channels[f.channel];
    const auto opcode = field(c.opcode_name, parts[0], 0, c.max_opcode);
    if (!opcode) {
        return std::unexpected(opcode.error());
    }
    const auto status = field(c.status_name, parts[1], 1, c.max_status);
    if (!status) {
        return std::unexpected(status.error());
    }
    f.opcode = *opcode;
    f.status = *status;
    f.syndrome = c.default_syndrome;
    if (parts.size() == 3) {
        if (c.max_syndrome == 0) {
            return std::unexpected(std::string(space.family) + " channel " + std::string(c.name) +
                                   " takes no syndrome (expected " + std::string(c.name) + ":OP:STATUS)");
        }
        const auto syndrome = field("syndrome", parts[2], 0, c.max_syndrome);
        if (!syndrome) {
            return std::unexpected(syndrome.error());
        }
        f.syndrome = *syndrome;
    }
    return f;
}

std::expected<std::uint32_t, std::string> parse_fault_fatal(std::string_view text, const fault_space& space) {
    return field(space.fatal_name, text, space.min_fatal, space.max_fatal);
}

std::optional<fault_kind> fault_arm::strike(std::uint64_t completed) noexcept {
    if (_what == fault_kind::none || _struck || completed < _after) {
        return std::nullopt;
    }
    _struck = true;
    return _what;
}

}  // namespace rig::sim::pci
