#pragma once
// The bytes a driver polls to learn that an entry the device wrote is there (an mlx5 CQE's
// op_own, a bnxt CQE's toggle byte), held back while a data-path pass writes a run of entries
// and then stored together, in the order their entries were written.
//
// Why: a driver waiting for completions spins on the line of the entry it expects. Written
// entry by entry, each entry's body store took that line back from the poller, which read it
// again while the next entry was written, so every line crossed between the cores twice (the
// mlx5 model's 64 B WRITE spent a third of its time there: bench-model, issue 17). With the
// valid bytes held, the poller keeps looking at the first entry of the run while the rest are
// written, and the run's lines cross once.
//
// The order a driver sees is a card's: every held entry's body is visible before its valid
// byte, and the valid bytes become visible in the order the entries were written (a store-store
// barrier before each: abi/barriers.hpp model_publish; a card's posted writes keep that order,
// PCIe base spec 2.4.1). The addresses are host addresses of the pass's pinned DMA view
// (dma_space::writable): publish() before the pin goes, and before any event or interrupt
// that announces the entries.
//
// The bodies of the entries after the first of a run may instead be written as whole lines of
// non-temporal stores (stream, x86-64), a not-valid value where the valid byte goes, the valid
// byte held as any other: no body store of the model then waits for the poller's line. A
// card's CQE is one posted 64-byte write that takes the line from the poller's cache without
// reading it; the model's ordinary stores needed each line first, and a run of CQEs behind a
// driver reading ahead (its CPU's prefetchers) stalled the model's store buffer on those
// transfers (bench-model, mlx5 64 B WRITE every entry signalled: 161-307 ns of model CPU a
// message, bimodal from run to run; 156-196 streamed). publish() fences the streamed bodies
// (model_streamed: non-temporal stores keep no order) before it stores the held bytes, so the
// order a driver sees stays a card's. A run's first entry is written in place as before
// (idle()): a pass with one entry (a latency test's) pays no fence, which waits for the line to
// reach memory (one-way latency +0.12 us when every entry was streamed).
#include <array>
#include <atomic>
#include <cstddef>
#include <span>

#include "abi/barriers.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace rig::sim::vfio_user {

class polled_bytes {
public:
    static constexpr std::size_t capacity = 64;

    // Holds `value` for the byte at `at`, publishing what is held first when full.
    void hold(std::byte* at, std::byte value) noexcept {
        if (_held == capacity) {
            publish();
        }
        _bytes[_held++] = {at, value};
    }

    // Nothing held or streamed since the last publish(): the next entry starts a run.
    bool idle() const noexcept { return _held == 0 && !_streamed; }

#if defined(__x86_64__)
    static constexpr bool streams = true;
    // Writes `entry` at `line` (64-byte aligned: one cache line) with non-temporal stores; the
    // valid byte in it must say not valid: the held one, stored by publish(), says valid.
    void stream(std::byte* line, std::span<const std::byte, 64> entry) noexcept {
        for (std::size_t i = 0; i < 64; i += 16) {
            _mm_stream_si128(reinterpret_cast<__m128i*>(line + i),
                             _mm_loadu_si128(reinterpret_cast<const __m128i*>(entry.data() + i)));
        }
        _streamed = true;
    }
#else
    static constexpr bool streams = false;
#endif

    // Fences the streamed entries, then stores the held bytes, in the order they were held.
    void publish() noexcept {
        if (_streamed) {
            ::rig::abi::barrier::model_streamed();
            _streamed = false;
        }
        for (std::size_t i = 0; i < _held; ++i) {
            ::rig::abi::barrier::model_publish();
            std::atomic_ref<std::byte>(*_bytes[i].at).store(_bytes[i].value, std::memory_order_relaxed);
        }
        _held = 0;
    }

private:
    struct held {
        std::byte* at;
        std::byte value;
    };
    std::array<held, capacity> _bytes{};
    std::size_t _held = 0;
    bool _streamed = false;   // stream() since the last publish()
};

}  // namespace rig::sim::vfio_user
