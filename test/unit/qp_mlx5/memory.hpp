#pragma once
// Plain, aligned host memory standing in for the rings, doorbell records and UAR page that a
// real function (BAR0) or the model (shared UAR pages) provides.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

namespace rig::test {

struct aligned_bytes {
    struct free_it {
        void operator()(std::byte* p) const noexcept { std::free(p); }
    };
    std::unique_ptr<std::byte, free_it> p;
    std::size_t n;

    explicit aligned_bytes(std::size_t size, std::byte fill = std::byte{0})
        : p(static_cast<std::byte*>(std::aligned_alloc(4096, (size + 4095) / 4096 * 4096))),
          n(size) {
        std::memset(p.get(), static_cast<int>(fill), n);
    }
    std::span<std::byte> span() const noexcept { return {p.get(), n}; }
    std::byte* data() const noexcept { return p.get(); }
};

}  // namespace rig::test
