#pragma once
// The world the roce-frame harness (frame.cpp) runs in, built once per process: one function's
// client memory (a memfd mapped into a vfio-user DMA space at `iova_base`, as a client maps it),
// its registered regions, and a wire with the function's port and one uplink, the port frames
// from outside arrive by (sim/roce/udp_port.hpp attaches one the same way). The layout is the
// harness's oracle too: where each region's bytes lie in the buffer (host_of), so that every
// byte the engine changes can be traced to a region and an access that may change it.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "abi/roce/packet.hpp"
#include "sim/roce/memory.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "test/fuzz/harness.hpp"

namespace rig::fuzz::roce {

namespace sr = rig::sim::roce;
namespace proto = rig::roce;

inline constexpr std::size_t page_bytes = 4096;
inline constexpr std::size_t buffer_pages = 16;
inline constexpr std::size_t buffer_bytes = page_bytes * buffer_pages;
inline constexpr std::uint64_t iova_base = 0x4000'0000;
inline constexpr std::uint64_t va_base = 0x7f00'0000'0000;   // where "the application" sees the buffer
inline constexpr std::uint32_t our_pd = 7;

// The regions. Pages of the buffer no region lists (2, 5, 7, 10, 12, 15, and most of 11 and 13)
// are canaries: nothing may ever write them.
struct area {
    std::uint32_t key;
    std::uint32_t pd;
    std::uint64_t start;   // VA
    std::uint64_t length;
    std::uint8_t rights;
    std::vector<std::size_t> pages;   // buffer pages holding it, in VA order; empty: no host bytes
    std::size_t page_offset;          // where its first byte lies in pages[0]
};

enum key : std::uint32_t {
    lkey = 0x11,       // pages 0-1: the requester's local buffers (READ responses land here)
    rkey = 0x22,       // pages 3-4: remote read and write
    rcvkey = 0x33,     // pages 8-9: receive buffers
    readonly = 0x44,   // page 6: remote read only (a remote WRITE must be refused)
    scattered = 0x55,  // a page list: 7000 bytes from byte 256 of page 13, then page 11
    foreign = 0x66,    // page 14: remote read and write, but another protection domain's
    unmapped = 0x77,   // 4 GiB of IOVA no window holds: every DMA faults
};

inline const std::array<area, 7>& areas() {
    using sr::access_local_write, sr::access_remote_read, sr::access_remote_write;
    constexpr auto rw = static_cast<std::uint8_t>(access_local_write | access_remote_read | access_remote_write);
    static const std::array<area, 7> all{{
        {lkey, our_pd, va_base, 2 * page_bytes, access_local_write, {0, 1}, 0},
        {rkey, our_pd, va_base + 3 * page_bytes, 2 * page_bytes, rw, {3, 4}, 0},
        {rcvkey, our_pd, va_base + 8 * page_bytes, 2 * page_bytes, access_local_write, {8, 9}, 0},
        {readonly, our_pd, va_base + 6 * page_bytes, page_bytes, access_remote_read, {6}, 0},
        {scattered, our_pd, va_base + 0x10'0000 + 256, 7000, rw, {13, 11}, 256},
        {foreign, our_pd + 1, va_base + 14 * page_bytes, page_bytes, rw, {14}, 0},
        {unmapped, our_pd, 0x1000'0000'0000, std::uint64_t{1} << 32, rw, {}, 0},
    }};
    return all;
}

inline const area* area_of(std::uint32_t k) {
    for (const area& a : areas()) {
        if (a.key == k) {
            return &a;
        }
    }
    return nullptr;
}

// The buffer offset of the byte at `va` of `a`, if it lies in `a` and in the buffer.
inline std::optional<std::size_t> host_of(const area& a, std::uint64_t va) {
    if (va < a.start || va - a.start >= a.length || a.pages.empty()) {
        return std::nullopt;
    }
    const std::uint64_t at = va - a.start + a.page_offset;
    return a.pages[at / page_bytes] * page_bytes + at % page_bytes;
}

// Marks in `allowed` the buffer bytes of [va, va + n) that lie in region `k` (clipped to it).
inline void allow(std::vector<std::uint8_t>& allowed, std::uint32_t k, std::uint64_t va, std::uint64_t n) {
    const area* a = area_of(k);
    if (a == nullptr || a->pages.empty() || n == 0) {
        return;
    }
    const std::uint64_t from = std::max(va, a->start);
    const std::uint64_t end = va + n < va ? a->start + a->length : std::min(va + n, a->start + a->length);
    for (std::uint64_t v = from; v < end; ++v) {
        allowed[*host_of(*a, v)] = 1;
    }
}

// The once-per-process world (never destroyed: the process ends with it).
struct bench {
    int fd = -1;
    std::byte* host = nullptr;
    sim::vfio_user::dma_space dma;
    sr::memory mem{dma};
    sr::wire wire;
    std::unique_ptr<sr::port> nic;       // the function's port
    std::unique_ptr<sr::port> outside;   // the uplink: what it transmits comes from another host
    static constexpr sr::mac_address nic_mac{std::byte{0x02}, std::byte{0}, std::byte{0},
                                             std::byte{0}, std::byte{0}, std::byte{0x01}};
    static constexpr sr::mac_address peer_mac{std::byte{0x02}, std::byte{0}, std::byte{0},
                                              std::byte{0}, std::byte{0}, std::byte{0x99}};

    bench() {
        fd = ::memfd_create("rig-fuzz-roce", MFD_CLOEXEC);
        require(fd >= 0 && ::ftruncate(fd, static_cast<off_t>(buffer_bytes)) == 0, "bench: a memfd for client memory");
        void* p = ::mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        require(p != MAP_FAILED, "bench: the buffer mapped");
        host = static_cast<std::byte*>(p);
        require(dma.map(iova_base, buffer_bytes, true, true, fd, 0) == 0, "bench: the DMA window");
        for (const area& a : areas()) {
            sr::region r;
            r.key = a.key;
            r.pd = a.pd;
            r.start = a.start;
            r.length = a.length;
            r.rights = a.rights;
            if (a.pages.empty()) {
                r.base_iova = 0x10'0000'0000;   // outside every window
            } else if (a.key == scattered) {
                for (std::size_t pg : a.pages) {
                    r.pages.push_back(iova_base + pg * page_bytes);
                }
                r.page_offset = a.page_offset;
            } else {
                r.base_iova = iova_base + a.pages[0] * page_bytes;
            }
            mem.register_region(std::move(r));
        }
        nic = wire.attach(nic_mac);
        nic->guard_unmaps(dma);   // responses carry payload by reference into it, as the model's do
        outside = wire.attach_uplink();
    }

    std::span<std::byte> buffer() const { return {host, buffer_bytes}; }

    // Every buffer byte a fixed function of its offset, so that a leak is recognisable.
    void fill() const {
        static const std::vector<std::byte> pattern = [] {
            std::vector<std::byte> p(buffer_bytes);
            for (std::size_t i = 0; i < buffer_bytes; ++i) {
                p[i] = static_cast<std::byte>((i * 131 + (i >> 8)) & 0xff);
            }
            return p;
        }();
        std::memcpy(host, pattern.data(), buffer_bytes);
    }

    static bench& get() {
        static bench& b = *new bench;
        return b;
    }
};

// The GIDs: ::ffff:10.0.0.1 and ::ffff:10.0.0.99, or fd00::1 and fd00::99.
inline proto::gid gid_of(bool v6, std::uint8_t host_id) {
    proto::gid g{};
    if (v6) {
        g[0] = std::byte{0xfd};
    } else {
        g[10] = g[11] = std::byte{0xff};
        g[12] = std::byte{10};
    }
    g[15] = std::byte{host_id};
    return g;
}

}  // namespace rig::fuzz::roce
