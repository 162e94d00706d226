#pragma once
// The memory barriers of every layer that talks to a device (qp/'s data path, firmware/'s command
// queue and event queues, the device model's DMA), named by purpose and defined once: nothing
// else in the tree may use std::atomic_thread_fence, __sync_synchronize or a fence instruction
// (test/unit/source_rules checks it).
//
// Names and bodies follow rdma-core's util/udma_barrier.h, which defines one macro per use:
//  - to_device   (udma_to_device_barrier):   stores to host memory the device will DMA-read
//                (work entries, a command entry) are visible before the store that tells it to
//                look (the doorbell record, the ownership byte). x86-64 keeps stores in order
//                (TSO): a compiler barrier. aarch64: `dmb oshst` (the outer-shareable domain is
//                the one a PCIe device's DMA observes; `dmb ishst` orders for other CPUs only).
//  - from_device (udma_from_device_barrier): after we saw the device's "valid" mark (a CQE's
//                owner bit, an EQE's or command entry's ownership), loads of the rest of what it
//                wrote are not satisfied earlier, and no later store (a slot given back) passes
//                them. x86-64: `lfence`; aarch64: `dmb oshld` (orders loads before later loads
//                and stores).
//  - mmio_start  (mmio_wc_start):            before a store to a write-combining MMIO page, all
//                earlier stores (DMA memory and uncached MMIO) are ordered ahead of it; implies
//                to_device. rdma-core defines it as mmio_flush_writes on every architecture.
//  - mmio_flush  (mmio_flush_writes):        the write-combining buffer is flushed, so the
//                doorbell leaves the CPU now and before any later MMIO store.
//                x86-64: `sfence`; aarch64: `dsb st`.
//  - model_publish: the device model's side of a DMA write (sim/): the body's stores are visible
//                before the store of the byte the driver polls (a CQE's op_own, a command's
//                ownership). A card gets this order from PCIe (posted writes of one function stay
//                in order, PCIe base spec §2.4.1); a model writing with CPU stores needs a
//                store-store barrier, for the driver's CPUs: x86-64 a compiler barrier, aarch64
//                `dmb ishst`.
//  - model_streamed: after entries the model wrote whole with non-temporal stores
//                (sim/vfio_user/polled_bytes.hpp stream), they are visible before any later store
//                (the next entry's valid byte, an event): x86-64 keeps no order for non-temporal
//                stores (SDM vol. 3 §9.2.2), `sfence`; aarch64 (no streamed entries) `dmb ishst`.
// Each is also a compiler barrier ("memory" clobber): the compiler must not move plain loads and
// stores across it, which is what keeps the ring stores ahead of the doorbell record store.

namespace rig::abi::barrier {

#if defined(__x86_64__) || defined(__i386__)
inline void to_device() noexcept { asm volatile("" ::: "memory"); }
inline void from_device() noexcept { asm volatile("lfence" ::: "memory"); }
inline void mmio_flush() noexcept { asm volatile("sfence" ::: "memory"); }
inline void model_publish() noexcept { asm volatile("" ::: "memory"); }
inline void model_streamed() noexcept { asm volatile("sfence" ::: "memory"); }
#elif defined(__aarch64__)
inline void to_device() noexcept { asm volatile("dmb oshst" ::: "memory"); }
inline void from_device() noexcept { asm volatile("dmb oshld" ::: "memory"); }
inline void mmio_flush() noexcept { asm volatile("dsb st" ::: "memory"); }
inline void model_publish() noexcept { asm volatile("dmb ishst" ::: "memory"); }
inline void model_streamed() noexcept { asm volatile("dmb ishst" ::: "memory"); }
#else
#error "rig::abi::barrier: no barriers defined for this architecture (see util/udma_barrier.h)"
#endif

inline void mmio_start() noexcept { mmio_flush(); }

}  // namespace rig::abi::barrier
