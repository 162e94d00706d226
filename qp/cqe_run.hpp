#pragma once
// The run of CQEs a completion queue has seen written ahead of its consumer index, behind one
// from_device barrier (both families' completion_queue::poll).
//
// rdma-core fences each CQE (providers/mlx5/cq.c get_sw_cqe then udma_from_device_barrier;
// providers/bnxt_re/verbs.c bnxt_re_poll_one), and on x86-64 that lfence waits for every earlier
// load: the fences, not the decoding, were most of a poll (bench-post: mlx5 8.8 -> 4.9 ns per
// CQE on an idle host). The NIC never writes a slot software has not given back, so once their
// valid marks (the owner bit, the toggle bit) are seen the next CQEs stay as read, and one
// barrier after those loads orders every later read of them (abi/barriers.hpp from_device).
#include <cstdint>

#include "abi/barriers.hpp"

namespace rig::qp {

class cqe_run {
public:
    static constexpr std::uint32_t look_ahead = 8;

    // Whether CQE number `ci` (the consumer index, unmasked) may be read: from the run seen
    // before, or from a new one. `written(n)` tells whether CQE n carries the NIC's valid mark;
    // a run stops at the first that does not. Call it once per CQE taken.
    template <class Written>
    bool next(std::uint32_t ci, Written&& written) noexcept {
        if (_seen == 0 && !see(ci, written)) {
            return false;
        }
        --_seen;
        return true;
    }

private:
    // A new run from `ci`, out of line (bench-post: with this loop forced inline into the
    // caller's poll loop the mlx5 poll took 7.0 ns per CQE; out of line 4.2, as the per-family
    // code it replaced).
    template <class Written>
    [[gnu::noinline]] bool see(std::uint32_t ci, Written& written) noexcept {
        std::uint32_t n = 0;
        while (n < look_ahead && written(ci + n)) {
            ++n;
        }
        if (n == 0) {
            return false;
        }
        ::rig::abi::barrier::from_device();   // the valid marks before the rest of those CQEs
        _seen = n;
        return true;
    }

    std::uint32_t _seen = 0;   // CQEs from the consumer index on, seen written behind a barrier
};

}  // namespace rig::qp
