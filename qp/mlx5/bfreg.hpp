#pragma once
// One BlueFlame register ("bfreg") of a UAR page and what every send queue ringing through it
// shares: the register, which of its two halves the next doorbell goes to, when a doorbell copies
// its entry in (BlueFlame), and a lock taken once more than one queue pair rings through it.
// rdma-core keeps the same per bfreg, not per QP (providers/mlx5/mlx5.h struct mlx5_bf: reg,
// offset, buf_size, need_lock, lock) and rings it in one function (qp.c post_send_db):
//
//   [lock if need_lock] mmio_wc_start; mlx5_bf_copy of the WQE when nreq == 1 and the bfreg is
//   BlueFlame-capable and (inline or prefer_bf) and it fits a half, else the ctrl segment's first
//   8 bytes as one 64-bit store; mmio_flush_writes; offset ^= buf_size; [unlock]
//
// Two halves used in turn: a doorbell never lands in the buffer the device may still be reading
// the previous copy from. The flush stays inside the lock (post_send_db's comment): a doorbell
// held in one CPU's write-combining buffer must not reach the device after a later one another
// CPU flushed first. The offset is the bfreg's, so two queue pairs sharing a bfreg alternate its
// halves between them.
//
// When the lock is taken: rdma-core fixes need_lock per bfreg when the context is made
// (mlx5.c need_uuar_lock: the shared "medium" bfregs lock, the dedicated low-latency ones do not;
// the kernel's hw/mlx5/qp.c hands the medium ones to many QPs). Rig hands a UAR's four bfregs
// to its queue pairs in turn (control_qp.cpp), so a bfreg becomes shared when its second queue
// pair is made, and stays so (sticky, as a fixed need_lock). The first queue pair may be ringing
// unlocked at that moment; the second one rings only after make_qp returned, which waited for
// the firmware's CREATE_QP (and a connect waits for three more commands), so in practice the
// unlocked ring has ended; the offset is an atomic so that even then no access is a data race.
// rdma-core keeps bfreg 0 of its first UAR for BlueFlame-less, lock-free use (buf_size 0: it
// never toggles); Rig uses the four alike, the lock covering the shared ones.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "abi/barriers.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "abi/spin_lock.hpp"
#include "qp/mlx5/device_words.hpp"

namespace rig::qp::mlx5 {

namespace abi = ::rig::mlx5::abi;
namespace barrier = ::rig::abi::barrier;

// When a doorbell of exactly one new entry copies it into the register (rig::doorbell_copy on
// mlx5): never (rdma-core MLX5_SHUT_UP_BF=1), an inline entry only (MLX5_POST_SEND_PREFER_BF=0:
// the `inl` of post_send_db), any entry (prefer_bf, rdma-core's default).
enum class copy_rule : std::uint8_t { never, inline_entries, single_entries };

class bfreg {
public:
    // `reg`: the register (UAR page + abi::bfreg_offset), 8-byte aligned; `half`: bf_reg_size / 2,
    // a multiple of 8, and at least one 64-byte block when `rule` copies (rdma-core copies only
    // what fits: size <= buf_size / 16). Misuse throws std::invalid_argument.
    bfreg(std::byte* reg, std::size_t half, copy_rule rule = copy_rule::never);
    bfreg(const bfreg&) = delete;
    bfreg& operator=(const bfreg&) = delete;

    // A queue pair rings through this bfreg from now on (under the NIC's lock). The second one
    // makes it shared: every ring takes the lock from then on.
    void add_user() noexcept {
        if (users_.fetch_add(1, std::memory_order_relaxed) >= 1) {
            shared_.store(true, std::memory_order_release);
        }
    }
    std::uint32_t users() const noexcept { return users_.load(std::memory_order_relaxed); }
    bool shared() const noexcept { return shared_.load(std::memory_order_acquire); }
    // The half the next doorbell goes to: 0 or half().
    std::size_t offset() const noexcept { return offset_.load(std::memory_order_relaxed); }
    std::byte* reg() const noexcept { return reg_; }
    std::size_t half() const noexcept { return half_; }
    copy_rule rule() const noexcept { return rule_; }

    // The lock a shared bfreg's rings take (Lockable): for whoever must keep rings out a while.
    void lock() noexcept { lock_.lock(); }
    void unlock() noexcept { lock_.unlock(); }

    // The doorbell, after the record word was stored: `entry` is the last posted entry's 64-byte
    // block in the ring (8-byte aligned); `copy`: the whole block, else its first 8 bytes. A shared
    // bfreg's ring is out of line: a call inside the unshared one would keep the caller's values
    // in callee-saved registers, pushed and popped on every ring (bench-post: +1.5 ns a post).
    [[gnu::always_inline]] void ring(const std::byte* entry, bool copy) noexcept {
        if (shared_.load(std::memory_order_acquire)) [[unlikely]] {
            ring_shared(entry, copy);
        } else {
            ring_alone(entry, copy);
        }
    }

private:
    [[gnu::always_inline]] void ring_alone(const std::byte* entry, bool copy) noexcept {
        barrier::mmio_start();   // the record before the register (rdma-core: mmio_wc_start)
        const std::size_t at = offset_.load(std::memory_order_relaxed);
        if (copy) {
            copy_block(reg_ + at, entry);
        } else {
            std::uint64_t first8;
            std::memcpy(&first8, entry, 8);
            store_register(reg_ + at, first8);
        }
        barrier::mmio_flush();   // out of the write-combining buffer (inside the lock when shared)
        offset_.store(at ^ half_, std::memory_order_relaxed);
    }
    // The same under the lock (rdma-core mmio_wc_spinlock ... mlx5_spin_unlock).
    [[gnu::noinline]] void ring_shared(const std::byte* entry, bool copy) noexcept;
    // 64 bytes as 8 ascending 64-bit stores, never memcpy (rdma-core mlx5_bf_copy: memcpy may use
    // string instructions that do not keep the order; mmio_memcpy_x64's generic body, the one
    // x86-64 builds use, is eight mmio_write64_be). Volatile stores are neither merged nor reordered
    // by the compiler; the write-combining buffer merges them into one burst.
    [[gnu::always_inline]] static void copy_block(std::byte* to, const std::byte* from) noexcept {
#pragma GCC unroll 8   // eight stores in a row, as mmio_memcpy_x64 writes them (g++ -O2 kept a loop)
        for (std::size_t i = 0; i < abi::bf_copy_block; i += 8) {
            std::uint64_t v;
            std::memcpy(&v, from + i, 8);
            store_register(to + i, v);
        }
    }

    std::byte* reg_;
    std::size_t half_;
    copy_rule rule_;
    std::atomic<bool> shared_{false};
    // spins with the pause hint, then yields (a holder preempted on a 2-core host gets its CPU
    // back): rdma-core's pthread spinlock (mlx5_spinlock)
    ::rig::abi::spin_lock lock_;
    std::atomic<std::size_t> offset_{0};
    std::atomic<std::uint32_t> users_{0};
};

}  // namespace rig::qp::mlx5
