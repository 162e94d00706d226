#pragma once
// What the post benchmarks share (bench/post_bench.cpp, post_bench_bnxt.cpp): a queue pair and a
// region over plain memory, without a NIC — the post path never reaches the NIC, so a handle
// whose NIC is a stand-in address measures the API's own cost (checks, dispatch) on top of the
// family's queue — and the helpers of their timed rounds (median: every bench's).
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "rig/qp.hpp"
#include "rig/region.hpp"

namespace rig::bench {

// `n` zeroed bytes, page-aligned (a ring, a doorbell record, a page standing in for a doorbell page).
inline std::byte* page(std::size_t n) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(4096, (n + 4095) / 4096 * 4096));
    std::memset(p, 0, n);
    return p;
}

using clock_type = std::chrono::steady_clock;
inline double ns(clock_type::duration d) { return std::chrono::duration<double, std::nano>(d).count(); }

// The median of the rounds: what a preemption or a neighbour's burst does not move.
inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// One 64-byte RDMA WRITE of the `off`th byte of `r` through the public API, as the post benches'
// rows time it: OneCall, queue_pair::write (its checks and its doorbell in one call); otherwise
// post_write, the caller ringing for its batch.
template <bool OneCall>
[[gnu::always_inline]] inline void api_write_entry(queue_pair& q, const region& r, std::size_t off, const remote& to,
                                                   signaled sig) {
    if constexpr (OneCall) {
        q.write(r, off, 64, to, 0, sig);
    } else {
        q.post_write(r, off, 64, to, 0, sig);
    }
}

}  // namespace rig::bench

namespace rig::detail {
struct bench_access {
    static queue_pair make_qp(nic* n, qp_state* s) { return queue_pair(n, s); }
    static region make_region(nic* n, region_state* s) { return region(n, s); }
};
}  // namespace rig::detail
