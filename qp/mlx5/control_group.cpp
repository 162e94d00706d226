// mlx5 control plane, completion groups (rig/group.hpp): an EQ of the group's own on a free MSI-X
// vector (CREATE_EQ with no async event asked for: only the COMP events of the CQs that name it
// reach it, PRM "Event Queue"), and one CQ naming that EQ (cqc.c_eqn), which the group's queue
// pairs name for both rings (control_qp.cpp). rdma-core's shape without a kernel: the kernel
// keeps one completion EQ per vector (mlx5_core eq.c create_comp_eqs); here each group has one,
// so that its vector's eventfd is the group's alone.
#include "qp/mlx5/control.hpp"  // first: see qp/mlx5/data_path.hpp

#include <bit>
#include <string>
#include <utility>

#include "abi/mlx5/doorbell.hpp"

namespace rig::qp::mlx5 {

namespace mabi = ::rig::mlx5::abi;

namespace {
// 2^6 EQEs, the smallest EQ firmware/mlx5's events take: a group's EQ holds at most one EQE per
// arm of its one CQ.
constexpr std::uint8_t log_group_eq = 6;
}  // namespace

std::uint8_t control::log_max_cq() const { return _hca->caps().log_max_cq_sz; }

// The first vector after the NIC's own (0) that no group holds, or none.
std::optional<std::uint16_t> control::take_vector() {
    const std::uint32_t vectors = _hca->event_queue()->vectors();
    _vector_used.resize(vectors, false);
    for (std::uint32_t k = 1; k < vectors; ++k) {
        if (!_vector_used[k]) {
            _vector_used[k] = true;
            return static_cast<std::uint16_t>(k);
        }
    }
    return std::nullopt;
}

result<void> control::make_group(detail::group_state& g) {
    const std::optional<std::uint16_t> vector = take_vector();
    if (!vector) {
        const std::uint32_t vectors = _hca->event_queue()->vectors();
        return std::unexpected(plain_error(
            error_kind::os, "no free MSI-X vector for a completion group: " + std::to_string(vectors > 0 ? vectors - 1 : 0) +
                                " kept for groups, all in use (nic_options::completion_vectors)"));
    }
    auto objects = std::make_unique<group_objects>();
    g.vector = *vector;   // release_group frees it
    // A refused make gives back what it took, as release_group does (bnxt's the same).
    const auto give_back = [&](const fw::error& e) -> result<void> {
        error out = refused(e);
        g.family = std::move(objects);
        static_cast<void>(release_group(g));
        return std::unexpected(std::move(out));
    };
    // On the UAR of the NIC's own EQ, as the kernel keeps its completion EQs on its priv UAR:
    // the model traps that page, seeing each EQ's doorbell store in order (a polled page shows
    // only a word's last store per look, which two EQs sharing it would lose: sim/mlx5 events.cpp).
    const std::uint32_t eq_uar = _hca->uar();
    auto eq = fw::eq::create(commands(), _fn, stranded_registry(),
                             {.log_size = log_group_eq, .uar = eq_uar, .vector = *vector, .event_bitmask = {}}, by());
    if (!eq) {
        return give_back(eq.error());
    }
    objects->eq = std::move(*eq);
    const auto log_cq = static_cast<std::uint8_t>(std::countr_zero(g.entries));
    auto cq = fw::cq::create(commands(), _fn, stranded_registry(), *_records,
                             {.log_size = log_cq, .uar = *_uar, .eqn = objects->eq.eqn()}, by());
    if (!cq) {
        return give_back(cq.error());
    }
    objects->cq = std::move(*cq);
    std::byte* const uar = uar_page();
    const int fd = _hca->event_queue()->vector_fd(*vector);
    g.cq = objects->cq.cqn();
    g.event_fd = fd;
    const std::uint64_t eq_doorbell = std::uint64_t{eq_uar} * mabi::uar_page_size + mabi::uar::eq_doorbell_arm;
    const qp::register_port port{.mapped = _bar0.covers(eq_doorbell, 4) ? _bar0.base + eq_doorbell : nullptr,
                                 .fn = &_fn,
                                 .bar = driver::region::bar0,
                                 .offset = eq_doorbell};
    g.path.emplace<group_path>(
        completion_queue_memory{objects->cq.entries(), {objects->cq.doorbell_record(), 8}, uar}, objects->cq.cqn(),
        event_queue_memory{objects->eq.entries(), objects->eq.eqn(), port, fd});
    g.family = std::move(objects);
    return {};
}

result<void> control::release_group(detail::group_state& g) {
    if (!g.family) {
        return {};
    }
    auto& o = static_cast<group_objects&>(*g.family);
    // A refusal keeps the object (the firmware answered no: kept until close); one the firmware
    // may still name is stranded by the object itself and counts as gone.
    const auto destroy = [&](auto& object) -> result<void> {
        if (!object.alive()) {
            return {};
        }
        if (auto r = object.destroy(commands(), _fn, stranded_registry(), by()); !r) {
            error e = refused(r.error());
            if (object.alive()) {
                return std::unexpected(std::move(e));
            }
        }
        return {};
    };
    // The CQ first: it names the EQ (PRM: an EQ a CQ is attached to is not destroyed).
    if (auto r = destroy(o.cq); !r) {
        return r;
    }
    if (auto r = destroy(o.eq); !r) {
        return r;
    }
    if (g.vector < _vector_used.size()) {
        _vector_used[g.vector] = false;
    }
    return {};
}

}  // namespace rig::qp::mlx5
