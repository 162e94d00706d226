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
#include <array>
#include <atomic>
#include <cstddef>

#include "abi/barriers.hpp"

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

    // Stores the held bytes, in the order they were held.
    void publish() noexcept {
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
};

}  // namespace rig::sim::vfio_user
