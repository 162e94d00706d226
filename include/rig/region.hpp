#pragma once
/// @file
/// A region: DMA memory of this process registered with one NIC (docs/guide.md, "Regions"). Its
/// bytes are plain memory (`data()`); the NIC reaches them through the region's key, locally for
/// every queue pair of the NIC and, when its access allows, remotely for a peer that holds
/// `remote(at)`.
///
/// @code
///   rig::region r = nic->allocate(1 << 20, rig::access::remote).value();
///   std::memcpy(r.data(), "hello", 5);
///   peer_gets(r.remote(0));   // {address, key}: plain data for the peer's write/read
///   r.deregister();
/// @endcode
///
/// The family registers it with its firmware under one key (mlx5: an MTT memory key, bnxt: an MR
/// by ALLOCATE_MRW + REGISTER_MR), local write always (receives and reads land in it), remote
/// read/write as `access` says. A region is a
/// handle: copies name the same registration, which the NIC owns; a region must not be used
/// after its NIC is destroyed. close() deregisters every region left.
#include "rig/config.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

#include "rig/error.hpp"

namespace rig {

class nic;
namespace detail {
struct region_state;
struct bench_access;  // bench/post_bench.cpp
}

/// What a peer may do with a region (local access is always granted).
enum class access : std::uint8_t {
    local = 0,         ///< no remote access
    remote_read = 1,   ///< a peer may read it
    remote_write = 2,  ///< a peer may write it
    remote = 3,  ///< remote read and write
};
/// Whether access `a` grants everything `b` asks for.
constexpr bool allows(access a, access b) noexcept {
    return (static_cast<unsigned>(a) & static_cast<unsigned>(b)) == static_cast<unsigned>(b);
}

/// Bytes of a peer's region, as the peer exported them (region::remote): the device address
/// and the key its NIC checks.
struct remote {
    std::uint64_t address = 0;  ///< the device address (IOVA) of the first byte
    std::uint32_t key = 0;      ///< the region's key (rkey)
    friend bool operator==(const remote&, const remote&) = default;
};

/// Memory the application already has (nic::register_memory): `bytes` (whole 4 KiB pages), and
/// the file it is mapped from when it has one (a memfd, a hugetlbfs file: `fd` at `fd_offset`).
struct app_memory {
    std::span<std::byte> bytes;   ///< the memory, page-aligned, whole 4 KiB pages
    int fd = -1;                  ///< the file it is mapped from (-1: none)
    std::uint64_t fd_offset = 0;  ///< where `bytes` begins in that file
};

/// DMA memory of this process registered with one NIC (above); a handle, copies name the same
/// registration.
class RIG_API region {
public:
    region() = default;

    /// Its first byte. Misuse (std::invalid_argument) on an empty or deregistered handle, as for
    /// every accessor below.
    std::byte* data() const;
    /// Its length in bytes.
    std::size_t size() const;
    /// Its bytes.
    std::span<std::byte> bytes() const { return {data(), size()}; }
    /// What a peer may do with it.
    rig::access access() const;
    std::uint32_t key() const;        ///< lkey == rkey
    std::uint64_t address() const;    ///< the device address (IOVA) of byte 0
    /// Byte `at` for a peer: misuse if deregistered or at > size().
    ::rig::remote remote(std::size_t at) const;

    /// Whether it is registered (not empty, not deregistered).
    bool registered() const noexcept;
    /// The NIC it is registered with (null for an empty handle).
    rig::nic* owner() const noexcept { return _nic; }

    /// The NIC forgets the key and the memory is freed (the application's own memory: unmapped
    /// from the NIC and left to it): Ok, or the firmware's refusal, after which the region stays
    /// registered. Misuse if already deregistered.
    result<void> deregister();

    friend bool operator==(const region& a, const region& b) noexcept { return a._state == b._state; }

private:
    friend class nic;
    friend class queue_pair;
    friend struct detail::bench_access;
    region(rig::nic* n, detail::region_state* s) noexcept : _nic(n), _state(s) {}
    const detail::region_state& live(const char* call) const;

    rig::nic* _nic = nullptr;
    detail::region_state* _state = nullptr;
};

}  // namespace rig
