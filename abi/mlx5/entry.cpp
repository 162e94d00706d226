// The cold half of entry.hpp: refusal messages, kept out of line so the encoder stays small.
#include "abi/mlx5/entry.hpp"

#include <stdexcept>
#include <string>

namespace rig::mlx5::abi::detail {

void refuse(const char* what, std::int64_t value) {
    const char* range = "";
    std::string_view w = what;
    if (w == "qp") {
        range = " (must be in [0, 2^24-1])";
    } else if (w == "index") {
        range = " (must not be negative)";
    } else if (w == "length") {
        range = " (must be in [0, 2^31-1])";
    } else if (w == "key") {
        range = " (must be in [0, 2^32-1])";
    } else if (w == "address") {
        range = " (must not be negative)";
    } else if (w == "receive stride") {
        range = " (must be a power of two of at least 16 bytes)";
    } else if (w == "scatter entries") {
        range = " (more than the receive slot holds)";
    }
    throw std::invalid_argument("mlx5 entry: " + std::string(what) + " " + std::to_string(value) +
                                " is refused" + range);
}

void refuse_place(std::size_t at, std::size_t size, std::size_t unit) {
    throw std::invalid_argument("mlx5 entry: byte " + std::to_string(at) + " of a " +
                                std::to_string(size) + "-byte buffer is not the start of a whole " +
                                std::to_string(unit) + "-byte slot");
}

void refuse_inline(std::size_t bytes) {
    throw std::invalid_argument("mlx5 entry: " + std::to_string(bytes) +
                                " inline bytes are refused (at most " + std::to_string(max_inline) +
                                " fit one block)");
}

}  // namespace rig::mlx5::abi::detail
