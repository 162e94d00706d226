#pragma once
// The data path's memory barriers, named by purpose and defined once for every family.
//
// Names and bodies follow rdma-core's util/udma_barrier.h, which defines one macro per use:
//  - to_device   (udma_to_device_barrier):   stores to host memory the device will DMA-read
//                (work entries) are visible before the store that tells it to look (the
//                doorbell record). x86-64 keeps stores in order (TSO): a compiler barrier.
//                aarch64: `dmb oshst`.
//  - from_device (udma_from_device_barrier): after we saw the device's "valid" mark (a CQE's
//                owner bit), loads of the rest of what it wrote are not satisfied earlier.
//                x86-64: `lfence`; aarch64: `dmb oshld`.
//  - mmio_start  (mmio_wc_start):            before a store to a write-combining MMIO page, all
//                earlier stores (DMA memory and uncached MMIO) are ordered ahead of it; implies
//                to_device. rdma-core defines it as mmio_flush_writes on every architecture.
//  - mmio_flush  (mmio_flush_writes):        the write-combining buffer is flushed, so the
//                doorbell leaves the CPU now and before any later MMIO store.
//                x86-64: `sfence`; aarch64: `dsb st`.
// Each is also a compiler barrier ("memory" clobber): the compiler must not move plain loads and
// stores across it, which is what keeps the ring stores ahead of the doorbell record store.

namespace rig::qp::barrier {

#if defined(__x86_64__) || defined(__i386__)
inline void to_device() noexcept { asm volatile("" ::: "memory"); }
inline void from_device() noexcept { asm volatile("lfence" ::: "memory"); }
inline void mmio_flush() noexcept { asm volatile("sfence" ::: "memory"); }
#elif defined(__aarch64__)
inline void to_device() noexcept { asm volatile("dmb oshst" ::: "memory"); }
inline void from_device() noexcept { asm volatile("dmb oshld" ::: "memory"); }
inline void mmio_flush() noexcept { asm volatile("dsb st" ::: "memory"); }
#else
#error "rig::qp::barrier: no barriers defined for this architecture (see util/udma_barrier.h)"
#endif

inline void mmio_start() noexcept { mmio_flush(); }

}  // namespace rig::qp::barrier
