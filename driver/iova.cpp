#include "driver/iova.hpp"

#include <algorithm>

namespace rig::driver {

iova_allocator::iova_allocator(std::vector<range> allowed, std::uint64_t limit, std::uint64_t floor) {
    for (const range& r : allowed) {
        const std::uint64_t first = std::max(r.first, std::max<std::uint64_t>(floor, 1));
        const std::uint64_t last = std::min(r.last, limit);
        if (first <= last) {
            _free[first] = last;
        }
    }
}

std::optional<std::uint64_t> iova_allocator::allocate(std::uint64_t bytes, std::uint64_t align) {
    if (bytes == 0 || align == 0 || (align & (align - 1)) != 0) {
        return std::nullopt;
    }
    for (auto it = _free.begin(); it != _free.end(); ++it) {
        const std::uint64_t first = it->first;
        const std::uint64_t last = it->second;
        const std::uint64_t start = (first + align - 1) & ~(align - 1);
        if (start < first || start > last || last - start < bytes - 1) {
            continue;
        }
        const std::uint64_t end = start + bytes - 1;
        _free.erase(it);
        if (start > first) {
            _free[first] = start - 1;
        }
        if (end < last) {
            _free[end + 1] = last;
        }
        _used[start] = bytes;
        return start;
    }
    return std::nullopt;
}

bool iova_allocator::release(std::uint64_t iova, std::uint64_t bytes) {
    const auto u = _used.find(iova);
    if (u == _used.end() || u->second != bytes) {
        return false;
    }
    _used.erase(u);
    std::uint64_t first = iova;
    std::uint64_t last = iova + bytes - 1;
    auto next = _free.lower_bound(first);
    if (next != _free.end() && next->first == last + 1) {
        last = next->second;
        next = _free.erase(next);
    }
    if (next != _free.begin()) {
        auto prev = std::prev(next);
        if (prev->second + 1 == first) {
            first = prev->first;
            _free.erase(prev);
        }
    }
    _free[first] = last;
    return true;
}

std::uint64_t iova_allocator::free_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [first, last] : _free) {
        n += last - first + 1;
    }
    return n;
}

}  // namespace rig::driver
