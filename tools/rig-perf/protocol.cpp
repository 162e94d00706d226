// The passive side's bound on the whole run (protocol.hpp).
#include "tools/rig-perf/protocol.hpp"

#include <algorithm>

namespace rig::perf {

std::chrono::milliseconds passive_wait(const options& o, const std::vector<std::uint64_t>& sizes,
                                       std::chrono::milliseconds margin) {
    using std::chrono::milliseconds;
    if (o.duration) {
        return std::chrono::duration_cast<milliseconds>(*o.duration) + margin;
    }
    // Linux Soft-RoCE in a TCG guest receives at 2-10 MiB/s with round trips of milliseconds
    // (test/interop): a read_bw -a of a perftest client on rxe ran past a 100 MiB/s bound
    constexpr double per_message_us = 1000;
    constexpr double slowest_bytes_per_us = 1.0 * 1048576 / 1e6;  // 1 MiB/s
    double us = 0;
    for (std::uint64_t size : sizes) {
        us += static_cast<double>(o.iterations) * o.queue_pairs *
              (per_message_us + static_cast<double>(size) / slowest_bytes_per_us);
    }
    // A day at most: past that a silent peer is no better told apart from a slow one.
    const double ms = std::min(us / 1000, 86'400'000.0);
    return milliseconds(static_cast<milliseconds::rep>(ms)) + margin;
}

}  // namespace rig::perf
