#pragma once
// What the NIC keeps for each region and queue pair (rig/nic.hpp owns them; region and
// queue_pair are handles): the family-neutral part the API's checks and the event plumbing
// use, what the family's control plane keeps of its firmware objects (family_objects, opaque
// here), and the family's data path (a variant: queue_pair dispatches on its index, never by a
// virtual call). Internal to qp/.
#include "qp/mlx5/data_path.hpp"  // first: abi/mlx5/ifc before abi/mlx5 data-path headers (its comment)
#include "qp/bnxt/data_path.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <variant>

#include "driver/dma_memory.hpp"
#include "rig/completion.hpp"
#include "rig/endpoint.hpp"
#include "rig/region.hpp"

namespace rig::detail {

// What a family's control plane keeps of one region or queue pair: its firmware objects.
struct family_objects {
    virtual ~family_objects() = default;
};

struct group_state;  // qp/group_state.hpp

struct region_state {
    driver::dma_memory memory;  // empty once freed, or once stranded by the control plane
    std::uint64_t iova = 0;
    std::size_t bytes = 0;
    rig::access rights = rig::access::local;
    std::uint32_t key = 0;      // lkey == rkey
    bool registered = false;    // false once deregistered (or stranded at close)
    std::unique_ptr<family_objects> family;
};

// Each family's data path; monostate until make_qp filled it (a handle never sees that).
using data_path = std::variant<std::monostate, qp::mlx5::data_path, qp::bnxt::data_path>;

struct qp_state {
    std::uint32_t number = 0;      // the queue pair's number (24 bits)
    std::uint32_t send_cq = 0;     // its completion queues' numbers (completion events)
    std::uint32_t receive_cq = 0;
    std::unique_ptr<family_objects> family;
    data_path path;
    std::uint32_t psn = 0;
    endpoint peer{};          // what the last successful connect connected it to
    bool connected = false;
    bool dirty = false;       // a connect stopped part-way: the next one resets first
    bool destroyed = false;   // destroy() was called (Ok or not): the handle is dead
    // Set by the NIC's event thread: the failure the NIC reported for this queue pair, in the
    // family's code (mlx5: the EQE's event type); 0: none. The data path reads it before taking
    // in the completions (qp::reported_event; seed: "a queue pair fails ... when the NIC reports
    // its failure").
    std::atomic<std::uint8_t> nic_event{0};
    // Completion events of the send and receive CQs, counted by the NIC's event thread; the
    // `_seen` counts are the waiting thread's: each event it takes in moves the CQ's arm
    // sequence number on before the next arm (rdma-core mlx5_cq_event: arm_sn++), so the
    // completion queue itself is touched by one thread only.
    std::atomic<std::uint32_t> send_events{0};
    std::atomic<std::uint32_t> receive_events{0};
    std::uint32_t send_events_seen = 0;
    std::uint32_t receive_events_seen = 0;
    // The completion group both rings complete to (rig/group.hpp), or null: its own CQs; and
    // what the group's CQEs name it by (mlx5: the QP number; bnxt: the CREATE_QP qp_handle).
    group_state* group = nullptr;
    std::uint64_t group_key = 0;
    // Whether each ring (send, receive) waits in its group's ready list.
    bool queued[2] = {false, false};
};

[[noreturn, gnu::cold]] void no_data_path();
// An entry's error as the API's error (qp.cpp; a completion group's too). Only on a failure.
[[gnu::cold]] error entry_failure(side s, const qp::entry_error& e);

// `f` on the family's data path of `s`: a compare of the variant's index and a direct call.
// (A NIC has one family: in a process driving both, each queue pair's branch is predicted.)
template <class F>
[[gnu::always_inline]] inline decltype(auto) on_path(qp_state& s, F&& f) {
    if (auto* p = std::get_if<qp::mlx5::data_path>(&s.path)) {
        return f(*p);
    }
    if (auto* p = std::get_if<qp::bnxt::data_path>(&s.path)) {
        return f(*p);
    }
    no_data_path();
}
template <class F>
[[gnu::always_inline]] inline decltype(auto) on_path(const qp_state& s, F&& f) {
    if (const auto* p = std::get_if<qp::mlx5::data_path>(&s.path)) {
        return f(*p);
    }
    if (const auto* p = std::get_if<qp::bnxt::data_path>(&s.path)) {
        return f(*p);
    }
    no_data_path();
}

// The slots of both rings of `s`: the CQ entries its completions may take at once.
inline std::uint32_t ring_slots(const qp_state& s) {
    return on_path(s, [](const auto& p) { return p.entries(true).slots() + p.entries(false).slots(); });
}

}  // namespace rig::detail
