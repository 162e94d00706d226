// rig-perf --sim's placement (tools/rig-perf/placement.hpp): the model on the highest CPU
// this thread may use, client and server on the others; nothing with one CPU. The test narrows its
// own thread's affinity to build each case and puts it back.
#include <sched.h>

#include <vector>

#include <catch2/catch.hpp>

#include "tools/rig-perf/placement.hpp"

namespace {

struct affinity_restorer {
    cpu_set_t saved;
    affinity_restorer() { REQUIRE(::sched_getaffinity(0, sizeof saved, &saved) == 0); }
    ~affinity_restorer() { ::sched_setaffinity(0, sizeof saved, &saved); }
};

std::vector<int> cpus_of(const cpu_set_t& s) {
    std::vector<int> v;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &s)) {
            v.push_back(c);
        }
    }
    return v;
}

}  // namespace

TEST_CASE("rig-perf --sim placement: the model on the highest allowed CPU, client and server on the others; one "
          "CPU: none",
          "[unit][perf]") {
    affinity_restorer r;
    const std::vector<int> all = cpus_of(r.saved);
    REQUIRE_FALSE(all.empty());

    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(all.front(), &one);
    REQUIRE(rig::perf::run_on(one));
    CHECK_FALSE(rig::perf::place_sim().has_value());

    if (all.size() < 2) {
        WARN("one CPU here: the two-CPU case is not run");
        return;
    }
    REQUIRE(rig::perf::run_on(r.saved));
    const auto p = rig::perf::place_sim();
    REQUIRE(p.has_value());
    CHECK(p->core_cpu == all.back());
    CHECK(cpus_of(p->model) == std::vector<int>{all.back()});
    const std::vector<int> others(all.begin(), all.end() - 1);
    CHECK(cpus_of(p->others) == others);

    // run_on moves this thread there; a set of no CPU is refused and changes nothing
    REQUIRE(rig::perf::run_on(p->others));
    cpu_set_t now;
    REQUIRE(::sched_getaffinity(0, sizeof now, &now) == 0);
    CHECK(cpus_of(now) == others);
    cpu_set_t none;
    CPU_ZERO(&none);
    CHECK_FALSE(rig::perf::run_on(none));
    REQUIRE(::sched_getaffinity(0, sizeof now, &now) == 0);
    CHECK(cpus_of(now) == others);
}
