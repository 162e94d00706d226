#pragma once
// The store every family's data path makes to a doorbell register: one 64-bit write to a mapped
// BAR page (over VFIO, or the model's shared page over vfio-user) that the compiler may not
// split, merge or drop (volatile, naturally aligned). A doorbell must reach the device as one
// 8-byte write (mlx5: the kernel's include/linux/mlx5/doorbell.h mlx5_write64, rdma-core's
// mmio_write64_be in providers/mlx5/qp.c; bnxt: the kernel's writeq
// in qplib_res.h bnxt_qplib_ring_db). Ordering is the caller's business (abi/barriers.hpp).
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>

#include "driver/function.hpp"

namespace rig::qp {

// `bytes` holds, in host memory order, the 8 bytes the register must receive.
inline void store_register(std::byte* reg, std::uint64_t bytes) noexcept {
    *reinterpret_cast<volatile std::uint64_t*>(reg) = bytes;
}

// A register of the rare paths (an event queue's re-arm, a completion group's NQ doorbells),
// reached by a store into its mapped BAR page, or by the PCI layer's region write where the back
// end does not map that page (the model traps it so that it sees every store in order: sim/mlx5's
// trapped UAR page, sim/bnxt's privileged doorbell page). Never on a data path's hot path.
struct register_port {
    std::byte* mapped = nullptr;        // the register in a mapped page, or null
    driver::function* fn = nullptr;     // else: a region write through it
    driver::region bar = driver::region::bar0;
    std::uint64_t offset = 0;           // the register's offset in the BAR

    // `bytes` (4 or 8) as the register must receive them, in memory order; false when the
    // region write was refused (the function is gone).
    bool store(std::span<const std::byte> bytes) const noexcept {
        if (mapped != nullptr) {
            if (bytes.size() == 8) {
                std::uint64_t v = 0;
                std::memcpy(&v, bytes.data(), 8);
                store_register(mapped, v);
            } else {
                std::uint32_t v = 0;
                std::memcpy(&v, bytes.data(), 4);
                std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(mapped)).store(v, std::memory_order_relaxed);
            }
            return true;
        }
        return fn != nullptr && fn->region_write(bar, offset, bytes).has_value();
    }
};

// Reads an eventfd (non-blocking) down to 0: the events so far taken in before a re-arm (a
// completion group's vector, qp/mlx5/group_path.hpp, qp/bnxt/group_path.hpp), or the removal
// request's count (qp/removal.cpp).
inline void drain_eventfd(int fd) noexcept {
    std::uint64_t count = 0;
    while (::read(fd, &count, sizeof count) == static_cast<ssize_t>(sizeof count)) {
    }
}

// Misuse check for the places given to a queue: aligned, not null.
inline void check_aligned(const void* p, std::size_t align, const char* what) {
    if (p == nullptr || reinterpret_cast<std::uintptr_t>(p) % align != 0) {
        throw std::invalid_argument(std::string(what) + " is not " + std::to_string(align) +
                                    "-byte aligned");
    }
}

}  // namespace rig::qp
