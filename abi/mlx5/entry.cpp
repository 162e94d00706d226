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
    } else if (w == "message length") {
        range = " (must be in [0, 2^31]: two data segments at 2^31)";
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

void check(const local& l, std::int64_t length_limit) {
    if (l.address < 0) {
        refuse("address", l.address);
    }
    if (l.bytes < 0 || l.bytes > length_limit) {
        refuse(length_limit == max_length ? "length" : "message length", l.bytes);
    }
    if (!valid_key(l.key)) {
        refuse("key", l.key);
    }
}

void check(const remote& r) {
    if (r.address < 0) {
        refuse("address", r.address);
    }
    if (!valid_key(r.key)) {
        refuse("key", r.key);
    }
}

// Called only once the hot path's combined predicate failed: names the first bad value, in the
// order the seed lists the refusals. For a READ the local is the destination, the remote the
// source; inline data has no local.
void refuse_entry(std::size_t at, std::size_t size, std::int64_t qp, std::int64_t index,
                  std::int64_t l_address, std::int64_t l_bytes, std::int64_t l_key,
                  std::int64_t r_address, std::int64_t r_key, std::size_t inline_bytes,
                  bool check_local, std::int64_t length_limit) {
    if (at % entry_size != 0 || at > size || size - at < entry_size) {
        refuse_place(at, size, entry_size);
    }
    if (qp < 0 || qp > max_qp) {
        refuse("qp", qp);
    }
    if (index < 0) {
        refuse("index", index);
    }
    if (inline_bytes > max_inline) {
        refuse_inline(inline_bytes);
    }
    if (check_local) {
        check(local{l_address, l_bytes, l_key}, length_limit);
    }
    check(remote{r_address, r_key});
    throw std::logic_error("mlx5 entry: refuse_entry found nothing to refuse");
}

}  // namespace rig::mlx5::abi::detail
