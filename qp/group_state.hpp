#pragma once
// What the NIC keeps for each completion group (rig/group.hpp is the handle): its CQ's number and
// size, its queue pairs by number, the rings whose results are due but did not fit the caller's
// last poll, and the family's side (a variant, as a queue pair's data path). Internal to qp/.
#include "qp/state.hpp"  // first: see qp/mlx5/data_path.hpp

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "qp/bnxt/group_path.hpp"
#include "qp/mlx5/group_path.hpp"

namespace rig::detail {

using group_path = std::variant<std::monostate, qp::mlx5::group_path, qp::bnxt::group_path>;

struct group_state {
    std::uint32_t cq = 0;             // the CQ's number
    std::uint32_t entries = 0;        // CQEs the CQ holds
    std::uint32_t reserved = 0;       // ring slots of its queue pairs (each may need a CQE)
    std::uint8_t log_ring = 6;        // each queue pair's rings hold 2^log_ring entries
    std::uint16_t vector = 0;         // its EQ's MSI-X vector
    int event_fd = -1;                // that vector's eventfd (the function owns it)
    std::unique_ptr<family_objects> family;
    group_path path;
    // poll/arm/wait hold it, as make_qp(group) and the destroy of a member do.
    std::mutex lock;
    std::unordered_map<std::uint64_t, qp_state*> members;  // live queue pairs by group_key
    // Rings (queue pair, send?) with results due that the caller's span had no room for.
    std::vector<std::pair<qp_state*, bool>> ready;
    std::size_t ready_head = 0;
    // Set by the NIC's event thread: a member's failure, or the NIC's, is to be taken in.
    std::atomic<bool> settle{false};
    bool destroyed = false;
};

// `f` on the family's side of `g` (no virtual call).
template <class F>
[[gnu::always_inline]] inline decltype(auto) on_group(group_state& g, F&& f) {
    if (auto* p = std::get_if<qp::mlx5::group_path>(&g.path)) {
        return f(*p);
    }
    if (auto* p = std::get_if<qp::bnxt::group_path>(&g.path)) {
        return f(*p);
    }
    no_data_path();
}

}  // namespace rig::detail
