// bnxt control plane, completion groups (rig/group.hpp): an NQ of the group's own on a free MSI-X
// vector (HWRM RING_ALLOC type NQ, logical_id the vector: firmware/bnxt device::make_nq), one CQ
// whose notifications go to it (CREATE_CQ cnq_id), with the doorbells of a doorbell block of its
// own, which the group's queue pairs name for both rings (control_qp.cpp). bnxt_re's shape: an NQ
// per vector (bnxt_re_alloc_res), CQs spread over them; here each group has one, so that its
// vector's eventfd is the group's alone.
#include "qp/bnxt/control.hpp"  // first: see qp/mlx5/data_path.hpp

#include <bit>
#include <string>
#include <utility>

#include "qp/bnxt/group_path.hpp"
#include "qp/bnxt/queue_memory.hpp"

namespace rig::qp::bnxt {

namespace {
// 256 entries, the smallest NQ the device makes: the group's one CQ notifies at most once per arm.
constexpr std::uint32_t group_nq_entries = 256;
}  // namespace

std::uint8_t control::log_max_cq() const {
    const std::uint32_t max_cqe = _device->roce().max_cqe;
    return static_cast<std::uint8_t>(max_cqe != 0 ? std::bit_width(max_cqe) - 1 : 0);
}

// The first enabled vector that is neither the CREQ's nor the NQ's and that no group holds.
std::optional<std::uint16_t> control::take_vector() {
    const std::uint32_t vectors = _device->vectors();
    _vector_used.resize(vectors, false);
    for (std::uint32_t k = 0; k < vectors; ++k) {
        if (!_device->own_vector(k) && !_vector_used[k]) {
            _vector_used[k] = true;
            return static_cast<std::uint16_t>(k);
        }
    }
    return std::nullopt;
}

// A word of the privileged doorbell page: mapped, or (the model traps the page) a region write.
qp::register_port control::privileged_word(std::size_t word) {
    const std::uint64_t offset = _device->doorbell_offset() + word;
    return {.mapped = _bar2.covers(offset, 8) ? _bar2.base + offset : nullptr,
            .fn = &_fn,
            .bar = driver::region::bar2,
            .offset = offset};
}

result<void> control::make_group(detail::group_state& g) {
    const std::optional<std::uint16_t> vector = take_vector();
    if (!vector) {
        return std::unexpected(plain_error(error_kind::os, "no free MSI-X vector for a completion group: all " +
                                                               std::to_string(_vector_used.size() > 2 ? _vector_used.size() - 2 : 0) +
                                                               " kept for groups in use (nic_options::completion_vectors)"));
    }
    auto o = std::make_unique<group_objects>();
    const auto give_back = [&](error e) -> result<void> {
        g.family = std::move(o);
        static_cast<void>(release_group(g));
        return std::unexpected(std::move(e));
    };
    g.vector = *vector;   // release_group frees it
    auto nq = _device->make_nq(group_nq_entries, *vector, by());
    if (!nq) {
        return give_back(refused(nq.error()));
    }
    o->nq = std::move(*nq);
    o->block = take_block();
    if (!o->block) {
        return give_back(plain_error(error_kind::os, "no free doorbell block for the group's CQ: all " +
                                                         std::to_string(_max_blocks) + " in use"));
    }
    const fw::cq_params p{.entries = g.entries, .nq_ring = o->nq.id, .dpi = dpi_of(*o->block), .handle = next_cq_handle()};
    auto cq = fw::cq::create(commands(), _fn, stranded_registry(), p, by());
    if (!cq) {
        return give_back(refused(cq.error()));
    }
    o->cq = std::move(*cq);
    std::byte* block = block_address(*o->block);
    const int fd = _device->vector_fd(*vector);
    g.cq = o->cq.id();
    g.event_fd = fd;
    g.path.emplace<group_path>(
        completion_queue_memory{o->cq.entries(), block + doorbell_word::send_cq, block + doorbell_word::send_cq_arm},
        o->cq.id(), o->cq.handle(),
        notification_queue_memory{{o->nq.memory.data(), std::size_t{o->nq.entries} * 16}, o->nq.id,
                                  privileged_word(doorbell_word::group_nq_arm), privileged_word(doorbell_word::armena),
                                  fd});
    g.family = std::move(o);
    return {};
}

// The CQ first (it names the NQ), then the NQ, the block and the vector. A refusal while the
// firmware answers keeps what is left until close.
result<void> control::release_group(detail::group_state& g) {
    if (g.family) {
        auto& o = static_cast<group_objects&>(*g.family);
        if (o.cq.alive()) {
            if (auto r = o.cq.destroy(commands(), _fn, stranded_registry(), by()); !r) {
                error e = refused(r.error());
                if (o.cq.alive()) {
                    return std::unexpected(std::move(e));
                }
            }
        }
        if (o.nq.alive()) {
            if (auto r = _device->free_nq(o.nq, by()); !r) {
                error e = refused(r.error());
                if (o.nq.alive()) {
                    return std::unexpected(std::move(e));
                }
            }
        }
        if (o.block) {
            _blocks.at(*o.block) = false;
            o.block.reset();
        }
    }
    if (g.vector < _vector_used.size()) {
        _vector_used[g.vector] = false;
    }
    return {};
}

}  // namespace rig::qp::bnxt
