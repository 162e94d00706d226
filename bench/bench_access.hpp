#pragma once
// A queue pair and a region over plain memory, without a NIC, for the post benchmarks
// (bench/post_bench.cpp, post_bench_bnxt.cpp): the post path never reaches the NIC, so a handle
// whose NIC is a stand-in address measures the API's own cost (checks, dispatch) on top of the
// family's queue.
#include "qp/qp.hpp"
#include "qp/region.hpp"

namespace rig::detail {
struct bench_access {
    static queue_pair make_qp(nic* n, qp_state* s) { return queue_pair(n, s); }
    static region make_region(nic* n, region_state* s) { return region(n, s); }
};
}  // namespace rig::detail
