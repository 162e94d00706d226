// rig-perf --sim's CPU placement (placement.hpp).
#include "tools/rig-perf/placement.hpp"

namespace rig::perf {

std::optional<sim_placement> place_sim() {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) < 2) {
        return std::nullopt;
    }
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &allowed)) {
            last = c;
        }
    }
    sim_placement p{last, {}, allowed};
    CPU_ZERO(&p.model);
    CPU_SET(last, &p.model);
    CPU_CLR(last, &p.others);
    return p;
}

bool run_on(const cpu_set_t& cpus) noexcept {
    return ::sched_setaffinity(0, sizeof cpus, &cpus) == 0;
}

}  // namespace rig::perf
