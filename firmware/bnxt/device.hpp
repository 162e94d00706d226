#pragma once
// A bnxt (BCM57508, P5) function brought up by the driver itself through HWRM, as far as the
// RoCE command channel needs it, and torn down again (the order of bnxt_en's
// bnxt_fw_init_one_p1/p2 and bnxt_alloc_ctx_mem, then bnxt_re's bnxt_re_dev_init up to the CREQ).
//
//   auto d = device::bring_up(fn, {}).value();  // "bring-up step FUNC_QCAPS: FUNC_QCAPS (0x15): ..."
//   d->mac();  d->creq_ring_id();  d->doorbell_offset();
//   d->teardown();
//
// Bring-up is a named state machine, as firmware/mlx5/hca's: each step has its own deadline
// (device_timeouts) and a failed step gives an error that names it. The steps, in order:
//   VER_GET              VER_GET until DEV_NOT_RDY clears (ready deadline); learns the window,
//                        timeouts, short-command mode; interface 1.x, a P5 chip
//   FUNC_RESET           FUNC_RESET (RESETALL, enables 0; 4x the command timeout)
//   FUNC_QCAPS           FUNC_QCAPS: ROCE_V2_SUPPORTED required, the port's MAC; BS_V2_REQUIRED
//                        refused (only FUNC_BACKING_STORE_CFG is spoken)
//   FUNC_DRV_RGTR        FUNC_DRV_RGTR (OS type, driver version)
//   BACKING_STORE        FUNC_BACKING_STORE_QCAPS, context memory of RoCE size with its
//                        initializers (context_memory.hpp), FUNC_BACKING_STORE_CFG
//   FUNC_RESOURCE_QCAPS  FUNC_RESOURCE_QCAPS (a refusal means the old resource manager: no
//                        FUNC_CFG reservation, as bnxt_hwrm_func_resc_qcaps)
//   FUNC_QCFG            FUNC_QCFG: the doorbell area (P5 PF 0x10000, VF 0x4000; its size)
//   FUNC_CFG             FUNC_CFG reservations: MSI-X (CREQ and one NQ), stat context, VNIC
//   STAT_CTX             STAT_CTX_ALLOC, the RoCE statistics context INITIALIZE_FW names
//   VNIC                 VNIC_ALLOC, VNIC_CFG in RoCE dual mode (bnxt_get_roce_vnic_mode)
//   L2_FILTER            CFA_L2_FILTER_ALLOC: RX, TRAFFIC_ROCE, the port MAC, to the VNIC
//   CREQ                 RING_ALLOC of the CREQ: type NQ, MSI-X, its pages by a PBL
//   with options.roce_channel (on by default; off: an L2-only bring-up), bnxt_re's next steps:
//   RCFW                 the CMDQ mapped, cmdq_init in the mailbox (rcfw.hpp)
//   QUERY_FUNC           QUERY_FUNC: the RoCE limits (side buffer)
//   INITIALIZE_FW        INITIALIZE_FW, P5 form: no context tables, the RoCE stat context,
//                        HW_REQUESTER_RETX_SUPPORTED when QUERY_FUNC says the requester retransmits
//   NQ                   RING_ALLOC of the RoCE NQ the CQs notify (bnxt_re_alloc_res, after
//                        INITIALIZE_FW): type NQ, MSI-X vector nq_msix, its pages by a PBL
//   ASYNC_CR             with rcfw_events: FUNC_CFG async_event_cr = the NQ, so the firmware's
//                        async events (LINK_STATUS_CHANGE, RESET_NOTIFY: FUNC_DRV_RGTR's
//                        async_event_fwd asked for them) land on it, as bnxt_en's
//                        bnxt_hwrm_ring_alloc names its first NQ on P5 (async_events.cpp). A
//                        VF (FUNC_VF_CFG) skips it. Released with the NQ's RING_FREE (bnxt_en
//                        never unsets it: bnxt_hwrm_ring_free frees the NQ under it).
//   ADD_GID              ADD_GID of the MAC's IPv6 link-local GID (its firmware index kept)
//   READY                with rcfw_events: the event thread (events.hpp) started
// A failed bring-up undoes what it did, in teardown order, before it returns the error.
//
// Teardown (the reverse): the event thread stopped, DELETE_GID of the GID bring-up added,
// RING_FREE of the NQ (bnxt_re_free_res before bnxt_qplib_deinit_rcfw), DEINITIALIZE_FW and the CMDQ
// (with the RoCE channel; bnxt_re deletes its GIDs when ib_core cleans the GID table at
// unregistration, bnxt_re_del_gid, before bnxt_re_dev_uninit deinitializes the firmware),
// RING_FREE (CREQ), CFA_L2_FILTER_FREE, VNIC_FREE, STAT_CTX_FREE, FUNC_DRV_UNRGTR, FUNC_RESET,
// then the memory is freed. The last FUNC_RESET is Rig's, not bnxt_en's (bnxt_remove_one
// frees context memory right after FUNC_DRV_UNRGTR): nothing in the HSI says unregistering ends the firmware's use of the backing store, a function reset drops
// every object and the context memory (the model's judgement too), so only after it is the
// memory unmapped. On firmware that stopped answering (a timeout, a failed BAR write) teardown
// sends nothing, completes locally and strands what the firmware may still name: context
// memory, the CREQ's and the NQ's pages, the statistics buffer, the HWRM buffers; stranded()
// lists them.
//
// Events: a CREQ QP_ERROR_NOTIFICATION goes to options.events.qp_error in either mode (in
// polling mode when a command polls the CREQ). With rcfw_events, an event thread takes the NQ's
// CQ notifications (options.events.completion), the firmware's async events on the NQ
// (LINK_STATUS_CHANGE to options.events.port_change, RESET_NOTIFY as the NIC's failure) and the
// CREQ's interrupts, and watches health (options.events.fatal); it runs from READY until
// teardown (events.hpp). Polling mode hears no async event.
//
// Threads: bring_up and teardown from one thread; the accessors from any thread.
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/bnxt/command_trace.hpp"
#include "firmware/bnxt/context_memory.hpp"
#include "firmware/bnxt/error.hpp"
#include "firmware/bnxt/events.hpp"
#include "firmware/bnxt/hwrm.hpp"
#include "firmware/bnxt/rcfw.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware::bnxt {

enum class bring_up_step : std::uint8_t {
    ver_get,
    func_reset,
    func_qcaps,
    drv_rgtr,
    backing_store,
    resource_qcaps,
    func_qcfg,
    func_cfg,
    stat_ctx,
    vnic,
    l2_filter,
    creq,
    rcfw,
    query_func,
    initialize_fw,
    nq,
    async_cr,
    add_gid,
    ready,
};
std::string_view to_string(bring_up_step s) noexcept;  // "BACKING_STORE"

enum class teardown_step : std::uint8_t { delete_gid, nq, deinitialize_fw, creq, l2_filter, vnic, stat_ctx, drv_unrgtr, func_reset, done };
std::string_view to_string(teardown_step s) noexcept;  // "RING_FREE"

struct device_timeouts {
    ms ready{10000};  // VER_GET until DEV_NOT_RDY clears
    ms func_reset{10000};
    ms func_qcaps{5000};
    ms drv_rgtr{5000};
    ms backing_store{10000};
    ms resource_qcaps{5000};
    ms func_qcfg{5000};
    ms func_cfg{5000};
    ms stat_ctx{5000};
    ms vnic{5000};
    ms l2_filter{5000};
    ms creq{5000};
    ms rcfw{5000};
    ms query_func{20000};
    ms initialize_fw{20000};
    ms nq{5000};
    ms async_cr{5000};
    ms add_gid{20000};
    ms teardown_step{5000};  // each teardown request
};

struct device_options {
    device_timeouts timeouts;
    hwrm_options hwrm;
    std::uint32_t creq_entries = 65536;  // BNXT_QPLIB_CREQE_MAX_CNT, a power of two
    std::uint16_t creq_msix = 0;         // the CREQ's MSI-X vector (RING_ALLOC logical_id)
    command_sink trace;                  // both channels' trace from the first request on (empty: off)
    bool roce_channel = true;            // the RCFW steps (RCFW .. ADD_GID)
    rcfw_options rcfw;
    // The RoCE channel in event mode: MSI-X enabled at step RCFW, the CREQ armed, its vector
    // (creq_msix) waking the waiters (rcfw.hpp); disabled again at teardown. Off: polling.
    bool rcfw_events = false;
    std::uint32_t nq_entries = 4096;     // the RoCE NQ's 16-byte entries, a power of two, 256..65536
    std::uint16_t nq_msix = 1;           // the NQ's MSI-X vector (FUNC_CFG reserves 2: CREQ and NQ)
    // MSI-X vectors beyond the CREQ's and the NQ's, reserved by FUNC_CFG and enabled with them
    // (rcfw_events), for NQs of their own (make_nq: a completion group's, rig/group.hpp), as
    // bnxt_re keeps an NQ per vector (bnxt_re_alloc_res, one per MSI-X entry bnxt_en gives it).
    std::uint32_t completion_vectors = 0;
    event_handlers events;               // what the event thread (and the CREQ) report
    std::chrono::milliseconds health_interval{1000};   // the event thread's health look
};

// What QUERY_FUNC says of the RoCE side (creq_query_func_resp_sb), with bnxt_qplib_get_dev_attr's
// adjustments where they change a limit the queue-pair layer uses.
struct roce_caps {
    std::uint32_t max_qp = 0;      // QP1 included (+1)
    std::uint32_t max_qp_wr = 0;   // max_qp_wr - 1 ("driver adds one extra entry")
    std::uint32_t max_cq = 0;
    std::uint32_t max_cqe = 0;
    std::uint32_t max_mr = 0;
    std::uint32_t max_pd = 0;
    std::uint32_t max_gid = 0;
    std::uint8_t max_sge = 0;
    std::uint16_t dev_cap_flags = 0;
    std::uint64_t max_mr_size = 0;
    std::uint32_t max_dpi = 0;     // doorbell pages: CREATE_QP / CREATE_CQ dpi below it
};

struct firmware_versions {
    std::array<std::uint8_t, 3> hwrm_interface{};  // 1.10.3
    std::array<std::uint8_t, 3> hwrm_firmware{};
    std::array<std::uint8_t, 3> roce_firmware{};
    std::string text(const std::array<std::uint8_t, 3>& v) const;  // "230.0.154"
};

class device {
public:
    using clock = hwrm_channel::clock;

    static result<std::unique_ptr<device>> bring_up(driver::function& fn, const device_options& options = {});

    // Not torn down: tears down with the options' deadlines, errors logged.
    ~device();
    device(const device&) = delete;
    device& operator=(const device&) = delete;

    // Idempotent: a second call does nothing and returns the first one's result.
    result<void> teardown();

    const firmware_versions& versions() const noexcept { return _versions; }
    std::uint16_t chip_num() const noexcept { return _chip_num; }
    std::array<std::uint8_t, 6> mac() const noexcept { return _mac; }
    std::uint16_t fid() const noexcept { return _fid; }
    std::uint16_t port_mtu() const noexcept { return _mtu; }
    std::uint64_t doorbell_offset() const noexcept { return _db_offset; }  // in BAR2
    // The L2 doorbell area's end in BAR2 (FUNC_QCFG l2_doorbell_bar_size_kb, page aligned; the
    // whole BAR2 when that is 0, past BAR2 or not above doorbell_offset: bnxt_hwrm_func_qcfg's
    // db_size). A user DPI's page lies beyond it (docs/bnxt-data-path.md).
    std::uint64_t doorbell_size() const noexcept { return _db_size; }
    std::uint32_t stat_ctx_id() const noexcept { return _stat_ctx.value_or(0xffffffff); }
    std::uint32_t vnic_id() const noexcept { return _vnic.value_or(0xffff); }
    std::uint16_t creq_ring_id() const noexcept { return _creq_id.value_or(0xffff); }
    std::uint64_t creq_iova() const noexcept { return _creq_iova; }
    std::uint32_t creq_entries() const noexcept { return _options.creq_entries; }
    std::byte* creq_memory() const noexcept { return _creq.data(); }
    // The RoCE NQ (step NQ): CREATE_CQ cnq_id.
    std::uint16_t nq_ring_id() const noexcept { return _nq_id.value_or(0xffff); }
    std::uint64_t nq_iova() const noexcept { return _nq_iova; }
    std::uint32_t nq_entries() const noexcept { return _options.nq_entries; }
    std::byte* nq_memory() const noexcept { return _nq.data(); }
    // The MSI-X vectors enabled (rcfw_events), and vector k's eventfd (the function owns it).
    std::uint32_t vectors() const noexcept { return static_cast<std::uint32_t>(_irq_fds.size()); }
    int vector_fd(std::uint32_t k) const { return _irq_fds.at(k); }
    // Whether vector k is the CREQ's or the NQ's (not one for make_nq).
    bool own_vector(std::uint32_t k) const noexcept { return k == _options.creq_msix || k == _options.nq_msix; }
    // An NQ of its own on MSI-X vector `msix` (RING_ALLOC type NQ, as step NQ's): `entries`
    // 16-byte entries (a power of two, 256..65536), its pages mapped. free_nq: RING_FREE, then
    // the pages unmapped; refused by the firmware: kept, the queue unchanged; unanswered: the
    // pages stranded, the queue gone.
    struct notification_queue {
        std::uint16_t id = 0;
        driver::dma_memory memory;   // ring pages, then the PBL page
        std::uint64_t iova = 0;
        std::uint32_t entries = 0;
        std::uint16_t msix = 0;
        bool alive() const noexcept { return static_cast<bool>(memory); }
    };
    result<notification_queue> make_nq(std::uint32_t entries, std::uint16_t msix, clock::time_point by);
    result<void> free_nq(notification_queue& q, clock::time_point by);
    // The ring FUNC_CFG named async_event_cr (step ASYNC_CR: the NQ); none without it.
    std::optional<std::uint16_t> async_event_ring() const noexcept { return _async_cr; }
    // The event thread (rcfw_events, from READY until teardown); null without it.
    const bnxt::events* event_thread() const noexcept { return _events.get(); }
    const context_memory* contexts() const noexcept { return _ctx.get(); }
    bool resource_manager() const noexcept { return _new_resource_manager; }
    const roce_caps& roce() const noexcept { return _roce; }
    // ADD_GID's firmware index of the link-local GID (MODIFY_QP sgid_index), and the GID.
    std::optional<std::uint32_t> gid_index() const noexcept { return _gid_index; }
    std::array<std::uint8_t, 16> gid() const noexcept { return _gid; }
    rcfw_channel* rcfw() noexcept { return _rcfw.get(); }

    // The HWRM channel while the device is up; after teardown: misuse (std::invalid_argument).
    hwrm_channel& hwrm();
    stranded_memory& stranded_registry() noexcept { return *_stranded; }
    // Every memory the firmware may still name (the registry's list).
    std::vector<stranded_region> stranded() const { return _stranded->report(); }
    // The firmware stopped answering: the first such error.
    std::optional<error> failure() const;
    bool torn_down() const noexcept { return _torn_down; }
    bring_up_step reached() const noexcept { return _reached; }

private:
    device(driver::function& fn, const device_options& options);
    result<void> run_steps();
    result<void> step(bring_up_step s, clock::time_point by);
    result<void> ver_get(clock::time_point by);
    result<void> func_qcaps(clock::time_point by);
    result<void> drv_rgtr(clock::time_point by);
    result<void> backing_store(clock::time_point by);
    result<void> func_qcfg(clock::time_point by);
    result<void> func_cfg(clock::time_point by);
    result<void> stat_ctx(clock::time_point by);
    result<void> vnic(clock::time_point by);
    result<void> l2_filter(clock::time_point by);
    result<void> creq(clock::time_point by);
    result<void> nq(clock::time_point by);
    result<void> async_cr(clock::time_point by);
    result<std::uint16_t> alloc_ring(std::uint32_t entries, std::uint16_t msix, driver::dma_memory& memory,
                                     std::uint64_t& iova, const char* what, clock::time_point by);
    result<void> roce_step(bring_up_step s, clock::time_point by);
    result<void> start_events();
    void on_creq_async(std::span<const std::byte, 16> entry);
    result<void> undo();
    void undo_roce(std::optional<error>& first);
    void free_ring(teardown_step s, std::optional<std::uint16_t>& id, driver::dma_memory& memory, std::uint64_t iova,
                   const std::string& what, std::optional<error>& first);
    result<void> ring_free(std::uint16_t id, clock::time_point by);   // RING_FREE of an NQ-type ring
    bool dead() const;
    result<driver::dma_memory> mapped(std::size_t bytes, std::uint64_t& iova, const char* what);

    driver::function& _fn;
    device_options _options;
    std::unique_ptr<stranded_memory> _stranded;
    std::unique_ptr<hwrm_channel> _hwrm;
    std::unique_ptr<context_memory> _ctx;
    bring_up_step _reached = bring_up_step::ver_get;
    bool _registered = false;
    bool _backing_store_given = false;
    bool _new_resource_manager = false;
    bool _vf = false;
    firmware_versions _versions;
    std::uint16_t _chip_num = 0;
    std::uint16_t _fid = 0xffff;
    std::array<std::uint8_t, 6> _mac{};
    std::uint16_t _mtu = 0;
    std::uint64_t _db_offset = 0;
    std::uint64_t _db_size = 0;
    driver::dma_memory _stats;
    std::uint64_t _stats_iova = 0;
    std::optional<std::uint32_t> _stat_ctx;
    std::optional<std::uint32_t> _vnic;
    std::optional<std::uint64_t> _l2_filter;
    driver::dma_memory _creq;      // ring pages, then the PBL page
    std::uint64_t _creq_iova = 0;  // of the ring's first page
    std::optional<std::uint16_t> _creq_id;
    driver::dma_memory _nq;        // ring pages, then the PBL page
    std::uint64_t _nq_iova = 0;
    std::optional<std::uint16_t> _nq_id;
    std::optional<std::uint16_t> _async_cr;   // FUNC_CFG async_event_cr (step ASYNC_CR)
    std::unique_ptr<rcfw_channel> _rcfw;
    std::unique_ptr<bnxt::events> _events;
    std::vector<int> _irq_fds;     // rcfw_events: the MSI-X eventfds by vector
    bool _fw_initialized = false;
    bool _irqs_enabled = false;   // rcfw_events: MSI-X enabled by step RCFW
    roce_caps _roce;
    std::optional<std::uint32_t> _gid_index;
    std::array<std::uint8_t, 16> _gid{};
    bool _torn_down = false;
    std::optional<error> _teardown_error;
};

}  // namespace rig::firmware::bnxt
