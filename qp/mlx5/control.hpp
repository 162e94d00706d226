#pragma once
// The mlx5 control plane behind rig::nic (qp/control.hpp): firmware::mlx5::hca::bring_up
// (rdma-core's mlx5_vfio_alloc_context), then one UAR (the queue pairs' doorbells and the CQs' arm
// doorbells, BAR0 page `uar`, mapped write-combining: kernel uar.c) and one protection domain
// shared by every region and queue pair of the NIC; regions are MTT memory keys (rdma-core
// mlx5_vfio_reg_mr), queue pairs an RC QP with a send and a receive CQ (hw/mlx5/qp.c). Internal to
// qp/.
//
// A command that timed out or met a fatal error leaves the firmware possibly holding memory:
// the command queue is failed then (nothing more is sent: every later command is refused at
// once) and what it may name is stranded (firmware/mlx5/objects.hpp).
#include "qp/state.hpp"  // first: see qp/mlx5/data_path.hpp

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "driver/function.hpp"
#include "firmware/mlx5/hca.hpp"
#include "firmware/mlx5/objects.hpp"
#include "qp/control.hpp"
#include "qp/group_state.hpp"
#include "qp/mlx5/bfreg.hpp"

namespace rig::qp::mlx5 {

namespace fw = ::rig::firmware::mlx5;

// A receive WQE of 16 << 1 = 32 bytes: one data segment and the end-of-list segment, or the two
// a 2^31-byte message takes (abi write_receive). Every queue pair's (control_qp.cpp); bench-scale
// sizes the model's receive shadow by it.
inline constexpr std::uint8_t receive_stride_log = 1;

// The firmware objects of one queue pair, and of one region.
struct qp_objects final : detail::family_objects {
    fw::cq send_cq;
    fw::cq receive_cq;
    fw::qp qp;
};
struct region_objects final : detail::family_objects {
    fw::mkey key;
};
// A completion group's: its EQ (on its own MSI-X vector) and the CQ its queue pairs share.
struct group_objects final : detail::family_objects {
    fw::eq eq;
    fw::cq cq;
};

class control final : public detail::control_plane {
public:
    // The control_factory of mlx5 (nic.cpp's family table).
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
    result<void> make_group(detail::group_state& g) override;          // control_group.cpp
    result<void> release_group(detail::group_state& g) override;
    std::uint8_t log_max_cq() const override;
    result<void> to_reset(detail::qp_state& s) override;
    result<void> reset_to_init(detail::qp_state& s) override;
    result<void> init_to_rtr(detail::qp_state& s, const endpoint& peer, std::uint32_t path_mtu_bytes) override;
    result<void> rtr_to_rts(detail::qp_state& s) override;
    result<qp_info> query(const detail::qp_state& s) override;
    result<void> release_qp(detail::qp_state& s) override;

    std::vector<stranded_region> stranded() const override;
    bool failed() const override { return _hca && _hca->failed(); }
    bool torn_down() const override { return !_hca || _hca->torn_down(); }
    result<void> close() override;

private:
    template <class Control>
    friend result<std::unique_ptr<detail::control_plane>> detail::start_control(std::unique_ptr<Control>,
                                                                                std::string_view,
                                                                                const nic_options&,
                                                                                detail::family_events);
    control(driver::function& fn, const nic_options& options)
        : _fn(fn), _command_timeout(options.command_timeout), _copy(options.copy_to_doorbell) {}
    result<void> start(std::string_view where, const nic_options& options, detail::family_events events);
    result<void> nic_objects();  // BAR0 mapped, UAR and its bfregs, PD
    result<void> make_bfregs();
    // The refusal as the API's error, after note(): nothing more is sent after a timeout.
    error refused(const fw::error& e);
    void note(const fw::error& e);
    fw::deadline by() const { return fw::command_queue::clock::now() + _command_timeout; }
    fw::command_queue& commands() { return _hca->commands(); }
    fw::stranded_memory& stranded_registry() { return _hca->stranded_registry(); }
    void set_data_path(detail::qp_state& s, const qp_objects& o, const fw::cq& send_cq, const fw::cq& receive_cq);
    std::byte* uar_page() const;
    std::optional<std::uint16_t> take_vector();

    // MSI-X vectors of completion groups' EQs: vector k (1..) in use.
    std::vector<bool> _vector_used;

    driver::function& _fn;
    std::chrono::milliseconds _command_timeout;
    std::unique_ptr<fw::hca> _hca;
    std::unique_ptr<fw::doorbell_records> _records;  // every CQ's and QP's record, 64 a page
    driver::bar_mapping _bar0;
    std::optional<std::uint32_t> _uar;
    std::optional<std::uint32_t> _pd;
    std::array<std::byte, 6> _mac{};
    std::array<std::byte, 16> _gid{};
    std::uint32_t _next_bfreg = 0;
    // The UAR's bfregs, each shared by the queue pairs given it (set_data_path); kept as long as
    // the control plane, which outlives every queue pair (nic_state destroys them first).
    doorbell_copy _copy;
    std::vector<std::unique_ptr<bfreg>> _bfregs;
};

}  // namespace rig::qp::mlx5
