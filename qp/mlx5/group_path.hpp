#pragma once
// The mlx5 side of a completion group (rig/group.hpp): one CQ that the send and receive queues of
// many queue pairs name (cqc of each QP: cqn_snd = cqn_rcv = the group's), and an EQ of the
// group's own (CREATE_EQ on the group's MSI-X vector, no async events) that the CQ's completion
// events go to (cqc.c_eqn). Nothing but the group's caller reads either: no event thread.
//
// Events (rdma-core's completion channel without a kernel: ibv_get_cq_event, ibv_ack_cq_events,
// ibv_req_notify_cq; the kernel's mlx5_eq_comp_int does the EQ part there):
//   arm(): the vector's eventfd read down to 0; every EQE the NIC wrote taken in (a COMP EQE of
//   this CQ moves its arm sequence number on, rdma-core mlx5_cq_event); the EQ's consumer index
//   written back with arming (UAR + 0x40: one interrupt for the next EQE); then the CQ armed for
//   its next completion (qp/mlx5/completion_queue.hpp). A CQE written after the caller's last
//   poll and before the CQ's arm makes the NIC raise the event at once (PRM "Completion Event
//   Generation": armed with CQEs past the consumer index), so drain-arm-drain loses none.
//
// Hot path (next): the CQ's poll, nothing more.
#include <poll.h>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "abi/mlx5/ifc/eqe.hpp"
#include "qp/mlx5/completion_queue.hpp"
#include "qp/device_words.hpp"
#include "qp/mlx5/data_path.hpp"

namespace rig::qp::mlx5 {

struct event_queue_memory {
    std::span<std::byte> entries;  // 2^n 64-byte EQEs, owner bits initialised to 1
    std::uint32_t eqn = 0;
    qp::register_port doorbell;    // the EQ's UAR page + 0x40 (arm)
    int event_fd = -1;             // the EQ's MSI-X vector's eventfd (non-blocking)
};

class group_path {
public:
    using cqe = abi::completion;
    using member_path = data_path;

    group_path(completion_queue_memory cq, std::uint32_t cqn, event_queue_memory eq)
        : cq_(cq, cqn), cqn_(cqn), eq_(eq), eq_log_(static_cast<std::uint32_t>(std::countr_zero(
                                                  eq.entries.size() / ::rig::mlx5::ifc::eqe::size_bytes))) {}

    // The next CQE of any member, if the NIC wrote one.
    bool next(cqe& c) noexcept { return cq_.poll(c); }
    static std::uint32_t qp_of(const cqe& c) noexcept { return c.qpn; }
    // The slots taken since the last call given back (the consumer index once per drain).
    void done() noexcept { cq_.done(); }
    // A member's CQE to its ring (data_path::take_group_cqe).
    static void route(member_path& p, const cqe& c) noexcept { p.take_group_cqe(c); }

    void arm() noexcept {
        qp::drain_eventfd(eq_.event_fd);
        take_events();
        ring_eq_doorbell();
        cq_.arm();
    }

private:
    // Every EQE software owns: the CQ's events counted (its arm sequence number), the rest
    // (none is asked for) passed over.
    void take_events() noexcept {
        namespace ifc = ::rig::mlx5::ifc;
        constexpr std::size_t eqe_bytes = ifc::eqe::size_bytes;
        const std::uint32_t mask = (1u << eq_log_) - 1;
        for (;;) {
            std::byte* const e = eq_.entries.data() + std::size_t{eq_ci_ & mask} * eqe_bytes;
            const auto owner = std::atomic_ref<std::byte>(e[ifc::eqe::owner.byte_offset()]).load(std::memory_order_acquire);
            if (!ifc::eqe_owned_by_software(std::to_integer<std::uint8_t>(owner), eq_ci_, eq_log_)) {
                return;
            }
            ::rig::abi::barrier::from_device();
            const std::span<const std::byte> eqe(e, eqe_bytes);
            const auto type = static_cast<ifc::event_type>(::rig::abi::get(eqe, ifc::eqe::event_type));
            const auto cqn = ::rig::abi::get(eqe, ifc::eqe::event_data(ifc::event_auto::comp_event(ifc::comp_event::cq_number)));
            if (type == ifc::event_type::comp && cqn == cqn_) {
                cq_.event();
            }
            ++eq_ci_;
        }
    }

    // The one function that writes the group EQ's doorbell: be32 (eqn << 24) | ci, arming. A
    // refused region write (the function gone) is the NIC's failure, which its event thread
    // reports; the group's next wait looks again within its interval.
    void ring_eq_doorbell() noexcept {
        ::rig::abi::barrier::from_device();  // the EQEs read before the NIC may reuse their slots
        std::array<std::byte, 4> word{};
        ::rig::abi::store_be<std::uint32_t>(word.data(), abi::eq_doorbell(eq_.eqn, eq_ci_));
        static_cast<void>(eq_.doorbell.store(word));
        ::rig::abi::barrier::mmio_flush();
    }

    completion_queue cq_;
    std::uint32_t cqn_;
    event_queue_memory eq_;
    std::uint32_t eq_log_;
    std::uint32_t eq_ci_ = 0;
};

}  // namespace rig::qp::mlx5
