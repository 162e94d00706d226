#pragma once
// What a rig::nic holds (rig/nic.hpp keeps only a pointer to it, so the installed header names
// none of the PCI layer's or the families' types and the library can change this without
// breaking an application built against an older librig.so.0).
#include <condition_variable>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "rig/nic.hpp"

namespace rig::detail {

struct nic_state {
    nic_options options;
    std::unique_ptr<driver::function> fn;
    std::unique_ptr<control_plane> control;  // the family's: commands, objects, events
    std::uint8_t log_ring = 12;
    std::mt19937 random;
    mutable std::mutex lock;
    bool closed = false;
    std::optional<result<void>> close_result;
    std::list<std::unique_ptr<region_state>> regions;
    std::list<std::unique_ptr<qp_state>> qps;
    std::list<std::unique_ptr<group_state>> groups;
    std::vector<group_state*> live_groups;  // under event_lock: the groups on_fatal wakes
    // The event thread's view: never held while a command runs (a command may wait on that
    // thread), so the handler cannot deadlock against a control call.
    std::mutex event_lock;
    std::map<std::uint32_t, qp_state*> by_qpn;
    std::map<std::uint32_t, std::atomic<std::uint32_t>*> events_by_cqn;  // a QP's CQ -> its counter
    // Where wait() sleeps: the event thread notifies after a completion event, a queue pair's
    // failure or the NIC's failure.
    std::mutex wake_lock;
    std::condition_variable wake;
    // The removal watch: the request IRQ's eventfd (the function owns it), an eventfd that stops
    // the thread, and close()'s word to a removal waiting for it.
    int request_fd = -1;
    int removal_stop_fd = -1;
    std::thread removal_thread;
    std::mutex removal_lock;
    std::condition_variable removal_closed;
    std::atomic<bool> closed_for_removal{false};   // close() finished (taken without lock)
};

// The library's own ways into a NIC that the public API does not offer.
struct nic_access {
    // Caller memory (memfd pages this process owns) registered whole; the NIC owns it from now
    // on and frees it at deregister (tests: a region over driver::dma_memory). Misuse: empty
    // memory, the NIC closed.
    static result<region> register_memory(nic& n, driver::dma_memory memory, access a);
};

}  // namespace rig::detail
