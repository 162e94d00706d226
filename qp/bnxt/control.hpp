#pragma once
// The bnxt control plane behind rig::nic (qp/control.hpp): firmware::bnxt::device::bring_up
// (as bnxt_en's bnxt_fw_init_one and bnxt_re's bnxt_re_dev_init do it: HWRM, context memory, the
// CREQ, the RoCE channel, the NQ, the link-local GID), then BAR2 mapped once (the doorbell pages,
// uncached) and one protection domain shared by every region and queue pair of the NIC (a number:
// there is no PD command, qplib_res.c bnxt_qplib_alloc_pd); regions are MRs (ALLOCATE_MRW +
// REGISTER_MR), queue pairs an RC QP with a send and a receive CQ that notify the NIC's NQ
// (roce_hsi.h cmdq_*). Internal to qp/.
//
// Doorbells (docs/bnxt-data-path.md, "Rig's layout"): each queue pair owns a 64-byte doorbell
// block; block b lies in DPI first_user_dpi + b / 64 at offset (b % 64) x 64, first_user_dpi =
// (L2 doorbell area - db_offset) / 4 KiB. Its QP and both CQs name that DPI. A block comes back
// for reuse when its queue pair's objects are all destroyed.
//
// Completion events: each CQ gets a cq_handle unique in the NIC, mapped back to its CQ id when
// the NQ notifies it. A CREQ QP_ERROR_NOTIFICATION fails the queue pair (family_events
// qp_failure with code 0xc0, CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION).
//
// A command that timed out (or a channel the event thread failed) leaves the firmware possibly
// holding memory: the channel is stopped then (every later command is refused at once) and what
// it may name is stranded (firmware/bnxt/objects.hpp).
#include "qp/state.hpp"  // first: see qp/mlx5/data_path.hpp

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "driver/function.hpp"
#include "firmware/bnxt/device.hpp"
#include "firmware/bnxt/objects.hpp"
#include "qp/control.hpp"
#include "qp/group_state.hpp"

namespace rig::qp::bnxt {

namespace fw = ::rig::firmware::bnxt;

// Static WQE mode's SGEs (qplib_fp.c: sq_sge and rq_sge of the device's max_sge, 6): a receive
// WQE of 32 + 6 x 16 = 128 bytes, the data path's (docs/bnxt-data-path.md "Queues"). Every
// queue pair's (control_qp.cpp); bench-scale sizes the model's receive shadow by it.
inline constexpr std::uint8_t wqe_sges = 6;

// The firmware objects of one queue pair, and of one region.
struct qp_objects final : detail::family_objects {
    fw::cq send_cq;
    fw::cq receive_cq;
    fw::qp qp;
    std::optional<std::uint32_t> block;   // its doorbell block, until its objects are all gone
    std::uint32_t path_mtu_bytes = 0;     // what INIT->RTR set (RTR->RTS starts the sends with it)
};
struct region_objects final : detail::family_objects {
    fw::mr key;
};
// A completion group's: its NQ (on its own MSI-X vector), the CQ its queue pairs share, and the
// doorbell block of that CQ's doorbells.
struct group_objects final : detail::family_objects {
    fw::device::notification_queue nq;
    fw::cq cq;
    std::optional<std::uint32_t> block;
};

class control final : public detail::control_plane {
public:
    // The control_factory of bnxt (nic.cpp's family table).
    static result<std::unique_ptr<detail::control_plane>> open(driver::function& fn, std::string_view where,
                                                                const nic_options& options,
                                                                detail::family_events events);
    ~control() override;

    std::array<std::byte, 6> mac() const override { return _mac; }
    std::array<std::byte, 16> gid() const override { return _gid; }
    std::uint32_t path_mtu() const override;
    std::uint8_t log_max_ring() const override;

    result<void> register_memory(detail::region_state& r) override;
    result<void> deregister_memory(detail::region_state& r) override;

    result<void> make_qp(detail::qp_state& s, std::uint8_t log_ring, const detail::group_state* group) override;
    result<void> make_group(detail::group_state& g) override;        // control_group.cpp
    result<void> release_group(detail::group_state& g) override;
    std::uint8_t log_max_cq() const override;
    result<void> to_reset(detail::qp_state& s) override;
    result<void> reset_to_init(detail::qp_state& s) override;
    result<void> init_to_rtr(detail::qp_state& s, const endpoint& peer, std::uint32_t path_mtu_bytes) override;
    result<void> rtr_to_rts(detail::qp_state& s) override;
    result<qp_info> query(const detail::qp_state& s) override;
    result<void> release_qp(detail::qp_state& s) override;

    std::vector<stranded_region> stranded() const override;
    bool failed() const override;
    bool torn_down() const override { return !_device || _device->torn_down(); }
    result<void> close() override;

    // The DPI of the first user doorbell page: (L2 doorbell area - db_offset) / 4 KiB.
    std::uint32_t first_user_dpi() const noexcept { return _first_user_dpi; }

private:
    template <class Control>
    friend result<std::unique_ptr<detail::control_plane>> detail::start_control(std::unique_ptr<Control>,
                                                                                std::string_view,
                                                                                const nic_options&,
                                                                                detail::family_events);
    control(driver::function& fn, const nic_options& options) : _fn(fn), _command_timeout(options.command_timeout) {}
    result<void> start(std::string_view where, const nic_options& options, detail::family_events events);
    fw::device_options device_options_of(const nic_options& o, detail::family_events events);
    result<void> nic_objects();  // BAR2 mapped, the doorbell pages, PD
    // The refusal as the API's error, after note(): nothing more is sent after a timeout.
    error refused(const fw::error& e);
    void note(const fw::error& e);
    fw::deadline by() const { return fw::deadline::clock::now() + _command_timeout; }
    fw::rcfw_channel& commands() { return *_device->rcfw(); }
    ::rig::firmware::stranded_memory& stranded_registry() { return _device->stranded_registry(); }

    // Doorbell blocks (control_qp.cpp).
    std::optional<std::uint32_t> take_block();
    void give_back_block(qp_objects& o);
    std::uint32_t dpi_of(std::uint32_t block) const noexcept { return _first_user_dpi + block / blocks_per_page; }
    std::byte* block_address(std::uint32_t block) const noexcept;
    result<void> make_cqs(qp_objects& o, std::uint32_t entries, std::uint32_t dpi);
    void enable_arming(std::uint32_t cqn);
    void set_data_path(detail::qp_state& s, const qp_objects& o, const fw::cq& send_cq, const fw::cq& receive_cq);
    std::optional<std::uint16_t> take_vector();
    qp::register_port privileged_word(std::size_t word);
    // MSI-X vectors of completion groups' NQs: vector k in use (the CREQ's and the NQ's never).
    std::vector<bool> _vector_used;
    // Completion events: the NQ's cq_handle back to the CQ's id.
    void on_notification(std::uint64_t cq_handle);
    std::uint64_t next_cq_handle();
    void forget_cq(const fw::cq& c);

    static constexpr std::uint32_t blocks_per_page = 64;

    driver::function& _fn;
    std::chrono::milliseconds _command_timeout;
    std::unique_ptr<fw::device> _device;
    driver::bar_mapping _bar2;
    std::optional<fw::pd_numbers> _pds;
    std::optional<std::uint32_t> _pd;
    std::array<std::byte, 6> _mac{};
    std::array<std::byte, 16> _gid{};
    std::uint32_t _first_user_dpi = 0;
    std::uint32_t _max_blocks = 0;
    std::vector<bool> _blocks;             // taken, by block number
    std::uint64_t _next_qp_handle = 0;
    mutable std::mutex _handles_lock;      // the event thread reads _cq_by_handle
    std::unordered_map<std::uint64_t, std::uint32_t> _cq_by_handle;
    std::uint64_t _next_handle = 0;
    std::function<void(std::uint32_t cqn)> _completion;   // the NIC's and the user's hooks
};

}  // namespace rig::qp::bnxt
