#pragma once
// The HWRM firmware of a bnxt (BCM57508, P5 "Thor") function model: what the ChiMP processor
// does with one request (bnxt_hsi.h; what bnxt_en's bnxt_hwrm.c sends). Transport-free: the
// function model (function_model.hpp) hands it the bytes the driver wrote into the BAR0 window when
// the trigger (0x100) is written; the firmware fetches a short command's full request by DMA,
// executes it, and DMA-writes the response to the request's resp_addr, the valid byte last.
//
// Channel rules (bnxt_hsi.h struct input/output):
//  - seq_id and req_type are echoed; resp_len is the response's full length; the last byte is
//    HWRM_RESP_VALID_KEY, written after the rest. One command at a time (the caller serialises).
//  - A window whose bytes 2-3 are 0x4321 is a short command (hwrm_short_input): the full
//    request (`size` bytes, at most max_ext_req_len) is read at req_addr. A request shorter than
//    its command's layout is read as if the missing bytes were zero (older drivers send shorter
//    requests: the kernel's 256-byte legacy FUNC_BACKING_STORE_CFG); one longer is cut.
//  - Refusals (the response is an hwrm_err_output, cmd_err one of `cmd_err` below):
//      short command when options.short_cmd_supported is false ... INVALID_PARAMS, short_unsupported
//      a window request when short commands are required (VER_GET excepted: a driver learns the
//      requirement from it) .................................... INVALID_PARAMS, short_required
//      a window request whose command is longer than the window . INVALID_PARAMS, longer_than_window
//      short size < 16 or > max_ext_req_len, or req_type differing from the full request's
//                                                                 INVALID_PARAMS, bad_length
//      during DEV_NOT_RDY (options.not_ready_time after reset) every request but VER_GET
//                                                                 BUSY, not_ready
//      an unknown req_type ....................................... CMD_NOT_SUPPORTED (0xffff)
//      bad fields: INVALID_PARAMS / INVALID_ENABLES / INVALID_FLAGS; limits: RESOURCE_ALLOC_ERROR.
//  - A resp_addr (or req_addr) the driver did not map is a DMA fault: the DMA space refuses and
//    records it, nothing is written, and the outcome says so (a driver then times out, as on a
//    card whose IOMMU blocks the write).
//
// Commands: VER_GET, FUNC_RESET, FUNC_QCAPS, FUNC_QCFG, FUNC_CFG, FUNC_DRV_RGTR, FUNC_DRV_UNRGTR,
// FUNC_RESOURCE_QCAPS, FUNC_BACKING_STORE_QCAPS, FUNC_BACKING_STORE_CFG (context_memory.cpp),
// RING_ALLOC, RING_FREE, STAT_CTX_ALLOC, STAT_CTX_FREE, VNIC_ALLOC, VNIC_FREE, VNIC_CFG,
// CFA_L2_FILTER_ALLOC, CFA_L2_FILTER_FREE (resources.cpp), PORT_PHY_QCFG, PORT_PHY_QCAPS,
// QUEUE_QPORTCFG, FW_SET_TIME (port.cpp). Every other opcode
// (the _V2 backing store, QUEUE_QPORTCFG, ERROR_RECOVERY_QCFG, FW_SET_TIME, …) gets
// CMD_NOT_SUPPORTED: FUNC_QCAPS does not offer BS_V2.
//
// Context memory (bnxt.c bnxt_alloc_ctx_mem, context_memory.cpp) is real: FUNC_BACKING_STORE_CFG
// checks every enabled type's level, page size, entry size and count against QCAPS, walks its page
// directory by DMA (every PTE/PDE needs PTU_PTE_VALID) and keeps the pages in a ledger that watches
// the DMA space: a page unmapped while the firmware owns it is a context_violation, and so is an
// entry whose initializer byte (QCAPS ctx_kind_initializer at init_offset*4, for the types in
// ctx_init_mask) the driver did not write. roce_backing_store() says whether the memory is
// RoCE-sized.
//
// The RoCE command channel (rcfw.cpp, roce_hsi.h, qplib_rcfw.c): cmdq_init from the BAR0 mailbox,
// the CMDQ read by DMA from the consumer to the producer, completions on the CREQ NQ;
// QUERY_VERSION, QUERY_FUNC, INITIALIZE_FW, DEINITIALIZE_FW, ADD_GID, DELETE_GID; CQs, keys and QPs
// (rcfw_objects.cpp, rcfw_modify_qp.cpp); other opcodes complete INVALID_CMD before INITIALIZE_FW
// and NOT_IMPLEMENTED after it (rcfw_doorbell).
//
// Not thread-safe: the function model serialises calls; the ledger has its own lock.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "abi/bnxt/hwrm.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "abi/bnxt/ids.hpp"
#include "sim/bnxt/roce_objects.hpp"
#include "sim/object_changes.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace rig::sim::bnxt {

// The cmd_err byte of the model's refusals (hwrm_err_output @14). A card's cmd_err values are
// firmware-private; these name the model's reasons, never 0 for a refusal.
enum class cmd_err : std::uint8_t {
    none = 0,
    short_unsupported = 0x01,
    short_required = 0x02,
    longer_than_window = 0x03,
    bad_length = 0x04,
    not_ready = 0x05,
    bad_field = 0x06,          // a field out of its range or naming nothing
    unknown_enables = 0x07,    // an enables bit the model does not implement
    no_resources = 0x08,       // a limit of QCAPS / FUNC_CFG reached
    unknown_object = 0x09,     // a ring / stat ctx / VNIC / filter id that names nothing
    bad_page_table = 0x0a,     // a PTE/PDE not valid, or unreadable by DMA
    too_small = 0x0b,          // backing store: fewer entries than required
    too_large = 0x0c,          // backing store: more entries, or pages, than allowed
    bad_entry_size = 0x0d,     // backing store: an entry size differing from QCAPS
    in_use = 0x0e,             // freeing an object another one still names
};

struct firmware_options {
    // ---- VER_GET ----
    std::uint8_t hwrm_intf_maj = 1, hwrm_intf_min = 10, hwrm_intf_upd = 3;   // HSI 1.10.3
    std::uint8_t hwrm_fw_maj = 230, hwrm_fw_min = 0, hwrm_fw_bld = 154;
    std::uint8_t roce_fw_maj = 230, roce_fw_min = 0, roce_fw_bld = 154;
    std::uint16_t chip_num = ::rig::bnxt::abi::CHIP_NUM_57508;
    std::uint8_t chip_rev = 1, chip_metal = 1;
    std::uint16_t max_req_win_len = 128;   // the BAR0 window (HWRM_MAX_REQ_LEN)
    std::uint16_t max_resp_len = 704;      // HWRM_MAX_RESP_LEN
    // VER_GET's def_req_timeout: what the firmware asks drivers to wait per request (Thor: 500 ms,
    // DFLT_HWRM_CMD_TIMEOUT). A model built with ThreadSanitizer runs its handlers several times
    // slower (FUNC_BACKING_STORE_CFG walks megabytes of context pages), and asks for the time it
    // needs through the same field, as firmware does.
#if defined(__SANITIZE_THREAD__)
    std::uint16_t def_req_timeout_ms = 5000;
#else
    std::uint16_t def_req_timeout_ms = 500;
#endif
    std::uint16_t max_req_timeout_s = 40;
    std::uint16_t max_ext_req_len = 1024;  // a short command's full request, at most
    bool short_cmd_supported = true;       // dev_caps_cfg SHORT_CMD_SUPPORTED
    bool short_cmd_required = false;       // dev_caps_cfg SHORT_CMD_REQUIRED (implies supported)
    // After construction and every reset, VER_GET reports DEV_NOT_RDY this long (and other
    // requests get BUSY).
    std::chrono::milliseconds not_ready_time{0};
    // ---- the function (FUNC_QCAPS / FUNC_QCFG / FUNC_RESOURCE_QCAPS) ----
    std::uint16_t fid = 0;
    std::array<std::uint8_t, 6> mac{0x02, 0x52, 0x49, 0x47, 0x50, 0x00};
    bool roce = true;                      // ROCE_V1/V2_SUPPORTED
    std::uint16_t mtu = 9000;
    std::uint16_t max_rsscos_ctx = 64, max_cmpl_rings = 128, max_tx_rings = 128,
                  max_rx_rings = 128, max_l2_ctxs = 64, max_vnics = 64, max_stat_ctx = 256,
                  max_hw_ring_grps = 128, max_msix = 64;
    std::uint32_t max_ring_entries = 1u << 20;   // RING_ALLOC length, at most
    // BAR2 (bnxt_hsi.h hwrm_func_qcfg_output): legacy_l2_db_size_kb * 1 KiB is db_offset
    // (bnxt_en overrides it to 0x10000 on a P5 PF, the same); l2_doorbell_bar_size_kb the L2
    // doorbell area.
    std::uint16_t legacy_l2_db_size_kb = 64;
    std::uint16_t l2_doorbell_bar_size_kb = 128;
    std::uint64_t bar2_bytes = 4u << 20;   // the function's BAR2: DPI pages after the L2 area
    // ---- the RoCE channel (rcfw.cpp) ----
    std::uint32_t max_gid = 256;           // QUERY_FUNC max_gid: the ADD_GID table's entries
    // ---- the port (PORT_PHY_QCFG) ----
    bool link_up = true;
    std::uint16_t link_speed = ::rig::bnxt::abi::PORT_PHY_QCFG_RESP_LINK_SPEED_100GB;
    // ---- context memory (FUNC_BACKING_STORE_QCAPS) ----
    std::uint32_t qp_max_entries = 4096;
    std::uint16_t qp_min_qp1_entries = 64, qp_max_l2_entries = 256, qp_entry_size = 512;
    std::uint16_t srq_max_l2_entries = 256;
    std::uint32_t srq_max_entries = 8192;
    std::uint16_t srq_entry_size = 128;
    std::uint16_t cq_max_l2_entries = 256;
    std::uint32_t cq_max_entries = 8192;
    std::uint16_t cq_entry_size = 128;
    std::uint16_t vnic_max_vnic_entries = 64, vnic_max_ring_table_entries = 64,
                  vnic_entry_size = 64;
    std::uint32_t stat_max_entries = 256;
    std::uint16_t stat_entry_size = 256;
    std::uint16_t tqm_entry_size = 16;
    std::uint32_t tqm_min_entries_per_ring = 64, tqm_max_entries_per_ring = 16384;
    std::uint8_t tqm_entries_multiple = 1, tqm_fp_rings_count = 8;
    std::uint32_t mrav_max_entries = 32768;
    std::uint16_t mrav_entry_size = 64;
    std::uint16_t mrav_num_entries_units = 0;
    std::uint32_t tim_max_entries = 8192;
    std::uint16_t tim_entry_size = 16;
    // The initializer: for the types in ctx_init_mask (QP 0x1, SRQ 0x2, CQ 0x4, VNIC 0x8,
    // STAT 0x10, MRAV 0x20) byte init_offset*4 of every entry must hold ctx_kind_initializer
    // when the memory is given (bnxt.c bnxt_init_ctx_mem); offsets in 4-byte units.
    std::uint8_t ctx_kind_initializer = 0xff;
    std::uint16_t ctx_init_mask = 0x3f;
    std::uint8_t qp_init_offset = 0, srq_init_offset = 0, cq_init_offset = 0,
                 vnic_init_offset = 0, stat_init_offset = 0, mrav_init_offset = 0;
};

// What one request did (for the function model's log and for tests).
struct outcome {
    bool responded = false;        // a response was DMA-written
    bool short_command = false;
    std::uint16_t req_type = 0;
    std::uint16_t seq_id = 0;
    std::uint16_t error_code = 0;
    std::uint8_t cmd_err = 0;
    std::uint64_t resp_addr = 0;
    std::string fault;             // why nothing was written ("" when responded)
};

// A context page the driver took away while the firmware owned it, or gave uninitialized.
struct context_violation {
    std::uint64_t iova = 0;
    std::string what;
};

// The context pages the firmware owns (data pages and page-table pages), watching the DMA
// space as sim/mlx5's page ledger watches firmware pages. Its own lock: unmaps arrive on the
// server's thread.
class context_ledger final : public vfio_user::unmap_observer {
public:
    void unmapped(std::uint64_t iova, std::uint64_t size) override;
    void report(std::uint64_t iova, std::string what);

    mutable std::mutex lock;
    struct page {
        std::uint64_t bytes;
        std::string type;   // "QP", "SRQ", "CQ", "VNIC", "STAT", "TQM_SP", "TQM_RING0".., "MRAV", "TIM"
    };
    std::map<std::uint64_t, page> pages;   // page IOVA -> its size and the context type it backs
    std::vector<context_violation> violations;
};

// A ring RING_ALLOC made (the CREQ and RoCE NQs are type NQ).
struct ring {
    std::uint8_t type = 0;
    std::uint32_t length = 0;          // entries (16 bytes each)
    std::uint64_t page_tbl_addr = 0;
    std::uint8_t page_size = 0;        // log2 (depth >= 1)
    std::uint8_t depth = 0;
    std::vector<std::uint64_t> pages;  // the ring's pages (depth 0: one, contiguous)
    std::uint16_t logical_id = 0;
    std::uint8_t int_mode = 0;
    std::uint16_t cmpl_ring_id = 0xffff;
    std::uint16_t nq_ring_id = 0xffff;
    std::uint32_t stat_ctx_id = 0xffffffff;
    std::uint32_t producer = 0;        // the model's next entry (async events)
    std::uint64_t cq_handle = 0;       // RING_ALLOC cq_handle (an L2 completion ring's)
    // The interrupt (interrupts.cpp): NQ_ARM asks for one at the ring's next entry (entries
    // written while not armed wait for the next arm, which raises at once when behind them).
    bool armed = false;
    std::uint64_t last_doorbell = 0;   // the last NQ / NQ_ARM doorbell taken (tests)
    // The IOVA of entry i (nullopt: past the ring's memory).
    std::optional<std::uint64_t> entry_address(std::uint32_t i) const;
};

struct stat_ctx {
    std::uint64_t dma_addr = 0;
    std::uint32_t period_ms = 0;
    bool roce = false;
};

struct vnic {
    std::uint32_t flags = 0;    // VNIC_CFG flags (ROCE_DUAL / ROCE_ONLY)
    bool configured = false;
    std::uint16_t default_rx_ring = 0xffff, default_cmpl_ring = 0xffff, mru = 0;
};

struct l2_filter {
    std::array<std::uint8_t, 6> mac{};
    std::array<std::uint8_t, 6> mask{};
    std::uint16_t vnic = 0;
    std::uint8_t traffic = 0;   // 0 NO_ROCE_L2, 1 L2, 2 ROCE (flags bits 4-5)
};

// One configured context type.
struct context_area {
    std::uint32_t entries = 0;
    std::uint16_t entry_size = 0;
    std::uint64_t page_bytes = 0;
    std::uint8_t level = 0;
    std::uint32_t l2_entries = 0;            // QP: the L2 and QP1 entries among them
    std::vector<std::uint64_t> pages;        // data pages, in order
    std::vector<std::uint64_t> table_pages;  // PTE/PDE pages
};

class firmware {
public:
    using clock = std::chrono::steady_clock;
    explicit firmware(firmware_options options = {});

    // One request: `window` holds the BAR0 window as the trigger found it (max_req_win_len
    // bytes). `dma` is the function's view of client memory; nullptr: nothing is mapped.
    // `inject` (a fault): the request is fetched and answered with that error, not run.
    struct injected_failure {
        std::uint16_t error_code;
        std::uint8_t cmd_err;
    };
    outcome run(std::span<const std::byte> window, vfio_user::dma_space* dma,
                std::optional<injected_failure> inject = std::nullopt);

    // Function reset (FLR, VFIO reset, the client's going): every object, reservation,
    // registration and the context memory dropped, DEV_NOT_RDY again for not_ready_time.
    void reset();

    // An HWRM async event written (or not) and the MSI-X vector it raises now (its ring armed).
    struct event_delivery {
        bool written = false;
        std::optional<std::uint16_t> vector;
    };
    // Writes a LINK_STATUS_CHANGE async event (data1 bit 0: link up) into the async event
    // completion ring (FUNC_CFG async_event_cr) when the driver registered for event 0 at
    // FUNC_DRV_RGTR (port.cpp).
    event_delivery set_link(bool up, vfio_user::dma_space* dma);
    // Writes async event `e` (its id registered at FUNC_DRV_RGTR, a ring named by FUNC_CFG
    // async_event_cr): on an NQ (P5: bnxt.c bnxt_hwrm_ring_alloc names its first NQ, and
    // bnxt_poll_p5 hands NQ entries that are no CQ notification to bnxt_hwrm_handler) as the
    // NQ's next entry, announced by its vector when armed; on an L2 completion ring as its next
    // entry, with no interrupt (the model's judgement: an L2 ring's NQ notification is not
    // modelled). Nothing written: no ring, not registered, DMA refused.
    event_delivery async_event(::rig::bnxt::abi::hwrm_async_event_cmpl e, vfio_user::dma_space* dma);
    // The firmware's reset notice (RESET_NOTIFY, function_model's fatal fault): event_data1 the
    // driver's action (IFDOWN when fatal, else STOP_TX_QUEUE), `reason` (1..5,
    // ASYNC_EVENT_CMPL_RESET_NOTIFY_EVENT_DATA1_REASON_CODE_*) and `min_wait_ds` as the delay;
    // timestamp_lo/hi the minimum and maximum wait in deciseconds (bnxt_async_event_process).
    event_delivery reset_notify(std::uint8_t reason, std::uint16_t min_wait_ds, std::uint16_t max_wait_ds,
                                vfio_user::dma_space* dma);

    // ---- interrupts of the firmware's NQ rings (interrupts.cpp) ----
    // A doorbell of the privileged page that names an NQ ring (the CREQ, RoCE NQs, an async
    // event NQ): NQ_ARM arms its interrupt (bnxt_qplib_ring_nq_db arm), NQ acknowledges and masks
    // it (bnxt_qplib_rcfw_stop_irq's "Mask h/w interrupts"); an arm whose index is behind the
    // ring's producer raises at once (`raise`). false: no NQ doorbell (the data path's).
    bool nq_doorbell(std::uint64_t value, std::optional<std::uint16_t>& raise);
    // Entries were just written to NQ ring `ring`: its MSI-X vector when armed (the arm is
    // spent), else nullopt and the ring waits for its next arm.
    std::optional<std::uint16_t> announce(std::uint16_t ring);

    // ---- the RoCE command channel (rcfw.cpp, roce_hsi.h) ----
    // The CMDQ trigger (BAR0 0x700) was written 1: `mailbox` is the 0x104-byte mailbox at
    // 0x600 (cmdq_init at 0, the producer at 0xC). A producer with FIRMWARE_FIRST_FLAG (bit 31)
    // (re)starts the channel from cmdq_init (CMDQ pages, size, CREQ ring id); then every command
    // from the firmware's consumer up to the producer runs and completes on the CREQ (type
    // QP_EVENT, status, cookie, event = opcode, the valid bit by pass, written last). Returns the
    // MSI-X vectors to raise (the CREQ's logical_id when its int_mode is MSI-X). `inject` (may be
    // null): the next command of that opcode completes with that status and does not run; the
    // optional is emptied when that happened (otherwise it waits for a later doorbell).
    using rcfw_injection = std::optional<std::pair<std::uint8_t, std::uint8_t>>;
    std::vector<std::uint16_t> rcfw_doorbell(std::span<const std::byte> mailbox, vfio_user::dma_space* dma,
                                             rcfw_injection* inject = nullptr);
    struct gid_entry {
        std::array<std::uint8_t, 16> gid{};     // wire order (ADD_GID's reversal undone)
        std::array<std::uint8_t, 6> src_mac{};  // wire order (the pair swap undone)
        std::uint16_t vlan = 0;                 // ADD_GID's vlan word: id, tpid, vlan_en
        std::uint16_t ipid = 0;
        std::optional<std::uint16_t> stats_ctx; // stats_ctx_id when stats_ctx_valid
    };
    struct rcfw_state {
        bool enabled = false;          // a valid cmdq_init was taken
        std::uint32_t slots = 0;       // CMDQ size in 16-byte slots
        std::vector<std::uint64_t> pages;   // the CMDQ's pages (level 0: one contiguous area)
        std::uint8_t level = 0;
        std::uint16_t creq_ring = 0xffff;
        std::uint32_t consumer = 0;    // the next slot the firmware reads
        std::uint32_t creq_producer = 0;
        bool initialized = false;      // INITIALIZE_FW succeeded (and no DEINITIALIZE_FW since)
        // ADD_GID's table: max_gid slots from INITIALIZE_FW on, the slot index is the xid
        // ADD_GID answers and DELETE_GID names; emptied by DEINITIALIZE_FW and reset.
        std::vector<std::optional<gid_entry>> gids;
        // The RoCE objects (roce_objects.hpp, rcfw_objects.cpp), by id; emptied by
        // DEINITIALIZE_FW and reset.
        std::map<std::uint32_t, roce_cq> cqs;
        std::map<std::uint32_t, roce_key> keys;
        std::map<std::uint32_t, roce_qp> qps;
        std::uint64_t completed = 0;
        std::string last_error;        // why the last cmdq_init or command could not be taken
    };
    const rcfw_state& rcfw() const noexcept { return _rcfw; }

    // The NIC moved queue pair `qpn` to the error state (its data path, next issue): the QP is
    // ERR and a QP_ERROR_NOTIFICATION (the reasons, the consumer indices) goes on the CREQ.
    // Returns the MSI-X vectors to raise; nothing when there is no such QP or no channel.
    std::vector<std::uint16_t> rcfw_qp_error(std::uint32_t qpn, std::uint8_t req_reason, std::uint8_t res_reason,
                                             std::uint16_t sq_cons, std::uint16_t rq_cons, vfio_user::dma_space* dma);

    // ---- for the data path (datapath.hpp) ----
    // Bumped by every RoCE command (run, refused or failed by a fault) and every start of the
    // channel: the data path then follows the objects again.
    std::uint64_t roce_changes() const noexcept { return _roce_changes; }
    // The QPs, CQs and keys RoCE commands made, changed or destroyed since the data path last
    // took them, or all after a new channel (sim/object_changes.hpp).
    object_changes take_changes() { return _changes.take(); }
    // Writes a 16-byte NQ entry at the producer of NQ ring `ring` (the CREQ's producer when it is
    // the CREQ), its valid bit (byte 8 bit 0: 1 on the first pass through the ring, as
    // NQE_CMP_VALID reads it) written after the rest. false: no such NQ, or the IOMMU refused.
    bool nq_post(std::uint16_t ring, std::span<std::byte, 16> entry, vfio_user::dma_space* dma);
    // The MSI-X vector NQ ring `ring` raises: its logical_id when its int_mode is MSI-X.
    std::optional<std::uint16_t> nq_vector(std::uint16_t ring) const;

    // ---- inspection ----
    const firmware_options& options() const noexcept { return _o; }
    bool ready() const noexcept { return clock::now() >= _ready_at; }
    bool registered() const noexcept { return _registered; }
    const std::array<std::uint32_t, 8>& async_event_fwd() const noexcept { return _async_fwd; }
    const std::map<std::uint16_t, ring>& rings() const noexcept { return _rings; }
    const std::map<std::uint32_t, stat_ctx>& stat_ctxs() const noexcept { return _stats; }
    const std::map<std::uint32_t, vnic>& vnics() const noexcept { return _vnics; }
    const std::map<std::uint64_t, l2_filter>& l2_filters() const noexcept { return _filters; }
    // The configured context types by name (context_ledger::page::type)
    const std::map<std::string, context_area>& context() const noexcept { return _ctx; }
    // QP, SRQ, CQ, MRAV and TIM configured, with QP entries beyond the L2 and QP1 ones: what
    // bnxt_en gives when RoCE is on (bnxt.c bnxt_alloc_ctx_mem); RoCE objects need it.
    bool roce_backing_store() const noexcept;
    // A VNIC in ROCE_DUAL or ROCE_ONLY mode and a TRAFFIC_ROCE filter for the port MAC to it
    // (docs/hardware.md): RoCE frames are delivered only then.
    bool roce_receive_ready() const noexcept;
    std::size_t context_pages() const;
    std::vector<context_violation> context_violations() const;
    std::uint64_t commands_executed() const noexcept { return _executed; }
    std::optional<std::uint16_t> async_event_ring() const noexcept { return _async_cr; }

    // ---- the request being executed (hwrm.cpp; public for the per-command files) ----
    struct call;

private:
    // hwrm.cpp
    bool fetch(std::span<const std::byte> window, vfio_user::dma_space* dma, call& c, outcome& o);
    void dispatch(call& c);
    void respond(call& c, outcome& o);
    void ver_get(call& c);
    void func_reset(call& c);
    void func_qcaps(call& c);
    void func_qcfg(call& c);
    void func_drv_rgtr(call& c);
    void func_drv_unrgtr(call& c);
    // resources.cpp
    void func_resource_qcaps(call& c);
    void func_cfg(call& c);
    void ring_alloc(call& c);
    void ring_free(call& c);
    void stat_ctx_alloc(call& c);
    void stat_ctx_free(call& c);
    void vnic_alloc(call& c);
    void vnic_free(call& c);
    void vnic_cfg(call& c);
    void cfa_l2_filter_alloc(call& c);
    void cfa_l2_filter_free(call& c);
    // port.cpp
    void port_phy_qcfg(call& c);
    void port_phy_qcaps(call& c);
    void queue_qportcfg(call& c);
    void fw_set_time(call& c);
    bool read_ring_pages(call& c, ring& r);
    bool ring_references_valid(call& c, const ::rig::bnxt::abi::hwrm_ring_alloc_input& in, ring& r);
    std::optional<std::uint32_t> ring_limit(std::uint8_t type) const noexcept;
    std::uint32_t limit(std::uint32_t max, std::optional<std::uint32_t> reserved) const noexcept;
    std::size_t rings_of(std::uint8_t type) const;
    // context_memory.cpp
    void backing_store_qcaps(call& c);
    void backing_store_cfg(call& c);
    void drop_context();
    void drop_objects();
    // rcfw.cpp
    bool rcfw_start(std::span<const std::byte> mailbox, vfio_user::dma_space* dma);
    std::optional<std::uint64_t> cmdq_slot_address(std::uint32_t slot) const;
    bool rcfw_complete(vfio_user::dma_space* dma, std::span<std::byte, 16> entry);
    std::uint8_t rcfw_execute(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                              std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_query_func(const ::rig::bnxt::abi::cmdq_base& base, vfio_user::dma_space* dma,
                                 std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_initialize_fw(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_add_gid(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_delete_gid(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry);
    std::vector<std::uint16_t> creq_vectors();   // announce(the CREQ)
    std::uint32_t max_dpi() const noexcept;
    // rcfw_objects.cpp: CQs, keys, QPs and their context entries
    std::uint8_t rcfw_object_command(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                     std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_create_cq(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_destroy_cq(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_allocate_mrw(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_register_mr(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_deregister_mr(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_deallocate_key(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_create_qp(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_destroy_qp(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    std::uint8_t rcfw_query_qp(std::span<const std::byte> cmd, vfio_user::dma_space* dma, std::array<std::byte, 16>& entry);
    // rcfw_modify_qp.cpp
    std::uint8_t rcfw_modify_qp(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry);
    // The IOVA of context entry `index` of a type ("QP", "CQ", "MRAV"); nothing past its pages.
    std::optional<std::uint64_t> context_entry(const char* type, std::uint32_t index) const;
    // Writes an object's context record into its entry (or, with kind 0, the entry's initial
    // bytes back); false when the IOMMU refused (the driver unmapped memory the firmware owns).
    bool write_context(const char* type, std::uint32_t index, std::uint8_t kind, std::uint64_t handle,
                       vfio_user::dma_space* dma);
    void drop_roce_objects();
    rcfw_state _rcfw;
    std::uint64_t _roce_changes = 0;
    object_changes _changes;

    firmware_options _o;
    clock::time_point _ready_at;
    bool _registered = false;
    std::array<std::uint32_t, 8> _async_fwd{};
    std::optional<std::uint16_t> _async_cr;
    std::map<std::uint16_t, ring> _rings;
    std::map<std::uint32_t, stat_ctx> _stats;
    std::map<std::uint32_t, vnic> _vnics;
    std::map<std::uint64_t, l2_filter> _filters;
    std::uint64_t _next_filter = 1;
    // FUNC_CFG reservations (nullopt: none made, the QCAPS maximum applies)
    struct reservations {
        std::optional<std::uint32_t> cmpl_rings, tx_rings, rx_rings, vnics, stat_ctxs, msix,
            rsscos_ctxs, l2_ctxs;
    } _reserved;
    std::uint16_t _mtu = 0, _mru = 0;
    std::uint16_t _cache_line = 64;   // FUNC_CFG CACHE_LINESIZE
    std::optional<::rig::bnxt::abi::hwrm_fw_set_time_input> _clock_set;   // FW_SET_TIME's last time
    std::map<std::string, context_area> _ctx;
    std::shared_ptr<context_ledger> _ledger = std::make_shared<context_ledger>();
    std::uint64_t _executed = 0;
};

}  // namespace rig::sim::bnxt
