#pragma once
// Where rig-perf --sim runs its three busy processes: the device model (its core thread spins
// while traffic flows), the client and the server (each spins on its completions or, in a
// latency test, on the last byte of its buffer). With fewer CPUs than spinners the scheduler
// picks who shares, and the figures follow its pick: write_lat's t_typical measured 6.3-9.8 us
// when the model had a CPU of its own and 12-15 us when it shared one with the client or the
// server, from run to run of the same command on two CPUs (docs/architecture.md, "Where --sim
// runs"). So --sim decides: the model on one CPU of the set this process may run on
// (sched_getaffinity, so that `taskset` still bounds it), its core thread pinned there, and the
// client and the server on the others. The model's other threads (firmware, vfio-user) go with
// its core, not with the client and server: they take the lock a function's data path takes, and
// on the client's CPU a holder was preempted by the spinning client or server for 1-5 ms while
// the core waited for it (send_bw's first size at 45-64 % of the second; with them on the core's
// CPU, where only the core can preempt them and it then waits on the lock, 72-88 %, in one
// interleaved set of six runs each, latency and write_bw the same). With one CPU there is
// nothing to decide.
#include <sched.h>

#include <optional>

namespace rig::perf {

struct sim_placement {
    int core_cpu;      // the model core's thread (rig-nicsim --core-cpu)
    cpu_set_t model;   // the model's process: core_cpu alone
    cpu_set_t others;  // the client (this process) and the server
};

// The placement for the CPUs this thread may run on: the model on the highest of them, the
// client and the server on the others; nullopt when there are fewer than two (or the set cannot be read).
std::optional<sim_placement> place_sim();

// sched_setaffinity of the calling thread (or, after fork, of the child) to `cpus`; false if
// the kernel refused it (a cpuset that changed meanwhile): the run goes on unplaced.
// Async-signal-safe: one system call, so a forked child may call it before exec.
bool run_on(const cpu_set_t& cpus) noexcept;

}  // namespace rig::perf
