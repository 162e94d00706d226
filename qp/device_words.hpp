#pragma once
// The store every family's data path makes to a doorbell register: one 64-bit write to a mapped
// BAR page (over VFIO, or the model's shared page over vfio-user) that the compiler may not
// split, merge or drop (volatile, naturally aligned). A doorbell must reach the device as one
// 8-byte write (mlx5: reference/mlx5.md §4.1 "use 8-byte doorbells"; bnxt: the kernel's writeq
// in qplib_res.h bnxt_qplib_ring_db). Ordering is the caller's business (abi/barriers.hpp).
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace rig::qp {

// `bytes` holds, in host memory order, the 8 bytes the register must receive.
inline void store_register(std::byte* reg, std::uint64_t bytes) noexcept {
    *reinterpret_cast<volatile std::uint64_t*>(reg) = bytes;
}

// Misuse check for the places given to a queue: aligned, not null.
inline void check_aligned(const void* p, std::size_t align, const char* what) {
    if (p == nullptr || reinterpret_cast<std::uintptr_t>(p) % align != 0) {
        throw std::invalid_argument(std::string(what) + " is not " + std::to_string(align) +
                                    "-byte aligned");
    }
}

}  // namespace rig::qp
