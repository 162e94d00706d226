#pragma once
// The bnxt side of a completion group (rig/group.hpp): one CQ that the send and receive queues of
// many queue pairs name (CREATE_QP scq_cid = rcq_cid = the group's), its notifications on an NQ
// of the group's own (HWRM RING_ALLOC type NQ on the group's MSI-X vector; CREATE_CQ cnq_id), as
// bnxt_re keeps an NQ per vector. Nothing but the group's caller reads either: no event thread.
// A CQE names its queue pair by the qp_handle CREATE_QP gave it.
//
// Events (bnxt_re's path without a kernel: qplib_fp.c bnxt_qplib_service_nq, then the CQ's
// handler, bnxt_re_req_notify_cq):
//   arm(): the vector's eventfd read down to 0; every NQ entry the NIC wrote taken in (a
//   CQ_NOTIFICATION of this CQ means its arming was used: CQ_ARMENA on the privileged page lets
//   its next CQ_ARMALL notify again, bnxt_qplib_armen_db); the NQ re-armed (NQ_ARM at the new
//   consumer, bnxt_qplib_ring_nq_db); then the CQ armed (CQ_ARMALL with its consumer index: a
//   CQE already past it notifies at once, so drain-arm-drain loses none).
//
// Hot path (next, done): the CQ's, nothing more.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "qp/bnxt/completion_queue.hpp"
#include "qp/bnxt/data_path.hpp"
#include "qp/device_words.hpp"

namespace rig::qp::bnxt {

struct notification_queue_memory {
    std::span<std::byte> entries;     // 16-byte NQ entries, a power of two
    std::uint16_t ring_id = 0;        // RING_ALLOC's id: the NQ_ARM doorbell's xid
    qp::register_port arm;            // the privileged page's group NQ_ARM word
    qp::register_port armena;         // the privileged page's CQ_ARMENA word
    int event_fd = -1;                // the NQ's MSI-X vector's eventfd (non-blocking)
};

class group_path {
public:
    using cqe = const std::byte*;
    using member_path = data_path;

    group_path(completion_queue_memory cq, std::uint32_t cqn, std::uint64_t cq_handle, notification_queue_memory nq)
        : cq_(cq, cqn), cqn_(cqn), cq_handle_(cq_handle), nq_(nq),
          nq_entries_(static_cast<std::uint32_t>(nq.entries.size() / 16)) {}

    // The next CQE of any member, if the NIC wrote one.
    bool next(cqe& c) noexcept {
        const std::span<const std::byte> b = cq_.next();
        c = b.data();
        return !b.empty();
    }
    // The queue pair's handle a CQE carries (REQ and TERMINAL: the requester's field; RES_RC:
    // the responder's); 0 (no queue pair's) for a NO_OP or a kind no ring takes.
    static std::uint64_t qp_of(cqe c) noexcept {
        namespace fast = abi::fast;
        const std::uint8_t type = fast::cqe_type(c);
        if (type == abi::CQ_BASE_CQE_TYPE_REQ || type == abi::CQ_BASE_CQE_TYPE_TERMINAL) {
            return fast::req_qp_handle(c);
        }
        return type == abi::CQ_BASE_CQE_TYPE_RES_RC ? fast::res_qp_handle(c) : 0;
    }
    static void route(member_path& p, cqe c) noexcept { p.take_group_cqe(c); }
    // The slots taken since the last call given back: one CQ doorbell per drain.
    void done() noexcept { cq_.done(); }

    void arm() noexcept {
        qp::drain_eventfd(nq_.event_fd);
        if (take_notifications()) {
            store(nq_.armena, abi::fast_doorbell(abi::DBC_DBC_TYPE_CQ_ARMENA, cqn_, 0, false));
        }
        store(nq_.arm, abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, nq_.ring_id, nq_consumer_ % nq_entries_,
                                     ((nq_consumer_ / nq_entries_) & 1) != 0));
        cq_.done();
        cq_.arm();
    }

private:
    // Every new NQ entry taken; true if one was this CQ's notification.
    bool take_notifications() noexcept {
        bool ours = false;
        for (;;) {
            std::byte* e = nq_.entries.data() + std::size_t{nq_consumer_ % nq_entries_} * 16;
            const auto v = std::atomic_ref<std::byte>(e[abi::nqe_v_byte]).load(std::memory_order_acquire);
            if (!abi::nqe_is_new(v, nq_consumer_, nq_entries_)) {
                return ours;
            }
            ::rig::abi::barrier::from_device();   // the entry's other bytes after its valid bit
            const auto cn = abi::decode<abi::nq_cn>(std::span<const std::byte>(e, 16));
            if (cn && cn->type == abi::NQ_CN_TYPE_CQ_NOTIFICATION &&
                (std::uint64_t{cn->cq_handle_high} << 32 | cn->cq_handle_low) == cq_handle_) {
                ours = true;
            }
            ++nq_consumer_;
        }
    }

    // A 64-bit doorbell of the privileged page (trapped on the model: a region write).
    static void store(const qp::register_port& port, std::uint64_t value) noexcept {
        ::rig::abi::barrier::to_device();
        std::array<std::byte, 8> b{};
        ::rig::abi::store_le<std::uint64_t>(b.data(), value);
        static_cast<void>(port.store(b));
    }

    completion_queue cq_;
    std::uint32_t cqn_;
    std::uint64_t cq_handle_;
    notification_queue_memory nq_;
    std::uint32_t nq_entries_;
    std::uint32_t nq_consumer_ = 0;
};

}  // namespace rig::qp::bnxt
