#pragma once
// The two kinds of store the mlx5 data path makes to memory the device reads on its own:
// a 32-bit doorbell-record word in host memory, and a 64-bit write to a UAR register (BAR0 over
// VFIO, or the model's shared UAR page over vfio-user). Each is one store the compiler may not
// split, merge or drop (volatile, naturally aligned): the device reads the record at any time,
// and a UAR doorbell write must reach it as one 8-byte write (the kernel's
// include/linux/mlx5/doorbell.h mlx5_write64; rdma-core's mmio_write64_be). Ordering is the
// caller's business (abi/barriers.hpp).
#include <cstddef>
#include <cstdint>

#include "qp/device_words.hpp"

namespace rig::qp::mlx5 {

// `value` is already in device byte order (big-endian), as its bytes must lie in memory.
inline void store_record(std::byte* word, std::uint32_t value) noexcept {
    *reinterpret_cast<volatile std::uint32_t*>(word) = value;
}

// store_register and check_aligned: qp/device_words.hpp (every family's).
using qp::check_aligned;
using qp::store_register;

}  // namespace rig::qp::mlx5
