#pragma once
// The data path of a bnxt (BCM57508, P5) function model: doorbells, work entries, completions
// and completion events of the function's RC queue pairs, carried by the family-neutral RC
// engine (sim/roce) over a wire. The contract with the driver is docs/bnxt-data-path.md
// (docs/architecture.md, "The device model", "Hot path rules"); sim/mlx5/datapath.hpp is the same
// structure for ConnectX.
//
// The wire's model core (sim/roce/model_core.hpp) runs passes of this function's data path, one
// per round (step). Each pass holds the function model's lock, so commands and the data path
// never interleave. A pass:
//  1. follows the firmware's object tables when a command ran since the last pass (or the
//     function was reset): registered MR keys become sim::roce::memory regions (key, pd, va,
//     bytes, rights from REGISTER_MR's access, pages); RC QPs in RTR/RTS get an rc_qp configured
//     from their MODIFY_QP attributes; a QP in RESET, destroyed or connected again loses it;
//  2. looks at every 8-byte word of the privileged doorbell page and of every DPI page a QP or
//     CQ names (BAR2 shared memory, doorbells.cpp), takes each non-zero word by an atomic
//     exchange with 0 and decodes it (abi dbc_dbc): SQ/RQ producers, CQ consumers and arms, NQ
//     arms; a doorbell naming nothing of its DPI is ignored and counted;
//  3. fetches the new receive and send WQEs of each QP from its queue memory by DMA, parses
//     them (wqe.cpp) and posts them to the rc_qp;
//  4. runs the RC engine (frames in, timers, frames out); a go-back-N first finds the WQE it
//     restarts in by the driver's PSN search entry (doorbells.cpp datapath::locate);
//  5. writes the rc_qps' completions as 32-byte CQEs (cqe.cpp), toggle bit by pass over the
//     ring, never over a CQE the driver has not consumed (held back in the rc_qp meanwhile);
//     an armed CQ's CQE puts an nq_cn on its NQ and raises the NQ's MSI-X vector when armed;
//     a QP whose rc_qp failed goes to ERR with a CREQ QP_ERROR_NOTIFICATION.
// Files: datapath.cpp (pass, objects), doorbells.cpp (steps 2-3), wqe.cpp (parsing), cqe.cpp
// (step 5).
//
// The data path allocates nothing per entry, throws nothing and logs nothing below warn; object
// changes (step 1) are the control path.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "abi/roce/packet.hpp"
#include "sim/bnxt/roce_objects.hpp"
#include "sim/roce/engine.hpp"
#include "sim/roce/memory.hpp"
#include "sim/roce/model_core.hpp"
#include "sim/roce/rc_qp.hpp"
#include "sim/roce/wire.hpp"
#include "sim/roce/work.hpp"
#include "sim/roce/worklist.hpp"
#include "sim/vfio_user/polled_bytes.hpp"

namespace rig::sim::vfio_user {
class dma_space;
}

namespace rig::sim::bnxt {

class function_model;

// The rc_qp rings of an RC QP of sq_entries static-mode send WQEs and rq_entries receives of
// rq_sge SGEs (datapath::configure; bench-scale's memory rows): the engine's rings are powers of
// two, a receive holds what parse_receive_wqe takes (rq_sge, the static WQE's 6 at most), and
// the sends not yet completed, sq_entries at most, each hold 6 SGEs or 96 inline bytes at most.
roce::qp_config rc_rings(std::uint32_t sq_entries, std::uint32_t rq_entries, std::uint8_t rq_sge) noexcept;

// What a pass found in one static-mode send WQE (wqe.cpp): the request, or that it is malformed.
struct parsed_send {
    roce::send_request request;
    bool malformed = false;   // completes with LOCAL_QP_OPERATION_ERR and fails the QP
};

// Parses the 128-byte send WQE in `wqe` (SEND, RDMA WRITE, RDMA READ; SGEs or inline).
// `index` is its SQ slot (echoed in the completion); `signal_all`: every WQE completes
// (function_options::aggregate_requester_cqes off). Malformed: another wqe_type, wqe_size under
// 2 or over the 8 slots, more than 6 SGEs, a zero lkey, inline on a READ or over 96 bytes,
// wqe_size not matching the SGEs or inline bytes, length not their sum. Only what the entry uses
// is written into `out` (the rc_qp reads no SGE past sge_count, no inline byte past inline_bytes).
void parse_send_wqe(std::span<const std::byte> wqe, std::uint32_t index, bool signal_all, parsed_send& out) noexcept;
// `out` as a malformed entry at SQ slot `index` (a WQE the card could not read, too).
void malformed_send(std::uint32_t index, parsed_send& out) noexcept;
// Parses one RQ WQE (32 + 16 x rq_sge bytes). false: malformed (wqe_type not RCV, more SGEs
// than `max_sge` or 6, a zero lkey on a non-empty SGE). `wr_id` gets the header's wr_id.
bool parse_receive_wqe(std::span<const std::byte> wqe, std::uint32_t max_sge, std::uint32_t index,
                       roce::receive_request& out, std::uint32_t& wr_id) noexcept;

class datapath final : public roce::station {
public:
    // Attaches a port under the function's MAC and joins the wire's model core. Misuse (the MAC
    // already on the wire) throws std::invalid_argument. May be made with the function's lock held.
    datapath(function_model& fn, roce::wire& w);
    // Leaves the core (no pass runs after), then the port leaves the wire. Never with the
    // function's lock held: the core may be waiting for it.
    ~datapath();
    datapath(const datapath&) = delete;
    datapath& operator=(const datapath&) = delete;

    // Counters for tests and logs.
    std::uint64_t passes() const noexcept { return _passes.load(std::memory_order_relaxed); }
    std::uint64_t wqes_fetched() const noexcept { return _wqes.load(std::memory_order_relaxed); }
    std::uint64_t cqes_written() const noexcept { return _cqes.load(std::memory_order_relaxed); }
    std::uint64_t notifications() const noexcept { return _notes.load(std::memory_order_relaxed); }
    // Frames that arrived while the function had no RC queue pair (dropped, as a card does).
    std::uint64_t frames_dropped() const noexcept { return _dropped.load(std::memory_order_relaxed); }
    // Objects (QPs, CQs, keys) followed after commands: each command's own, or every one of the
    // function's when all tables are followed (follow.cpp).
    std::uint64_t objects_followed() const noexcept { return _followed.load(std::memory_order_relaxed); }
    // Retransmissions located by the driver's PSN search entry, and ones it could not locate
    // (the WQE failed: docs/bnxt-data-path.md "Queues").
    std::uint64_t retransmissions_located() const noexcept { return _located.load(std::memory_order_relaxed); }
    std::uint64_t retransmissions_refused() const noexcept { return _refused.load(std::memory_order_relaxed); }

    // One pass, with the function model's lock held (roce::station).
    bool step(roce::clock::time_point now) noexcept override;
    // A command ran (the firmware's thread, the function's lock held): its objects are followed
    // now, before the driver sees it complete, as a card's command changes the QP context
    // before its completion; the rc_qp of a QP that reached RTR is built here, not in the pass
    // that carries the first doorbell (rig-perf's first-size transient, issue 17). The core is
    // woken to run a round soon (model_core::stay_busy).
    void command_ran();
    // A doorbell stored into the trapped privileged page (dpi 0), which the pass does not poll
    // (function_model::privileged_write_locked), lock held.
    void take_doorbell(std::uint32_t dpi, std::uint64_t value);

private:
    // What RTR and RTS connected an rc_qp to; another one means the QP went through RESET
    // between two passes (a reconnect): its rc_qp is made again.
    struct connection {
        std::uint32_t dest_qp = 0, rq_psn = 0, sq_psn = 0;
        std::array<std::uint8_t, 6> dest_mac{};
        std::array<std::uint8_t, 16> dgid{};
        std::uint8_t mtu = 0;
        std::uint64_t sq_page = 0;   // the SQ's first page: a QP made again under the same id
        bool same_path(const connection& o) const noexcept {
            return dest_qp == o.dest_qp && rq_psn == o.rq_psn && dest_mac == o.dest_mac && dgid == o.dgid &&
                   mtu == o.mtu && sq_page == o.sq_page;
        }
    };
    // The object pointers below point into the firmware's tables (std::map nodes). Only a
    // command or a reset changes those tables, both between passes with the lock held, and every
    // object they made, changed or destroyed is followed before the next pass runs
    // (follow_objects: the objects the firmware listed, every one after a reset or a new channel).
    static constexpr std::uint32_t no_page = ~0u;
    struct cq_slot {
        std::uint32_t id = 0;
        const roce_cq* cq = nullptr;
        std::uint64_t page = 0;        // the CQ's first page: a CQ made again under the same id
        std::uint32_t entries = 0;     // its size, kept here: `cq` dangles once the CQ is gone
        std::uint32_t producer = 0;    // next CQE, modulo 2 x entries (the pass is the toggle)
        std::uint32_t consumer = 0;    // the driver's, from its CQ doorbells, modulo 2 x entries
        bool armed = false;
        std::uint32_t counted_dpi = no_page;   // the doorbell page it counts in _page_users
    };
    struct qp_slot;
    // The chip's lookup of a retransmission's WQE by the driver's PSN search entry (P5 without
    // hardware retransmission: QUERY_FUNC's host PSN table), set on the QP's rc_qp (doorbells.cpp).
    struct psn_search final : roce::retransmit_locator {
        datapath* dp = nullptr;
        qp_slot* slot = nullptr;
        roce::completion_status locate(const roce::retransmission& r) noexcept override;
    };
    struct qp_slot {
        std::uint32_t id = 0;
        const roce_qp* q = nullptr;
        cq_slot* send_cq = nullptr;
        cq_slot* receive_cq = nullptr;
        connection conn;
        std::unique_ptr<roce::rc_qp> rc;
        // WQE positions modulo 2 x the ring (index plus epoch): taken by the model, produced by
        // the driver (its last doorbell)
        std::uint32_t sq_taken = 0, sq_produced = 0, rq_taken = 0, rq_produced = 0;
        std::vector<std::uint32_t> wr_ids;   // the wr_id of the RQ WQE in each slot
        bool reported = false;               // the QP's error went to the CREQ
        roce::completion_status send_error = roce::completion_status::success;
        roce::completion_status receive_error = roce::completion_status::success;
        std::uint16_t sq_cons = 0, rq_cons = 0;   // the slots after the last completions
        psn_search psn;                           // the rc_qp's retransmit_locator
        bool retransmit_lost = false;             // a retransmission could not be located
        bool fetching = false;                    // in _fetch
        bool attended = false;                    // in _attend
        std::uint32_t counted_dpi = no_page;      // the doorbell page it counts in _page_users
        // What its rc_qp tells the data path (roce::qp_host), on the pass's thread.
        struct host final : roce::qp_host {
            datapath* dp = nullptr;
            qp_slot* slot = nullptr;
            void needs_attention() noexcept override { dp->attend(*slot); }
            void receive_wanted() noexcept override {
                if (slot->rc && slot->q != nullptr) {
                    dp->fetch_receives(*slot, *slot->q);
                }
            }
        } host;
    };

    // datapath.cpp, all with the function model's lock held
    bool pass(roce::clock::time_point now);
    void follow_link();
    bool drop_arrivals(roce::clock::time_point now) noexcept;
    // follow.cpp: every table (after a reset or a new channel), or just the objects the commands
    // changed (firmware::take_changes)
    void follow_objects();
    void follow_all();
    void follow_keys();
    void follow_key(std::uint32_t key);
    // what a registered key was registered as: a key registered again differently is followed
    struct key_state {
        std::uint32_t pd;
        std::uint64_t va, bytes;
        std::uint8_t access;
        std::uint64_t first_page;
        std::size_t pages;
        bool operator==(const key_state&) const = default;
    };
    static key_state state_of(const roce_key& k) noexcept;
    std::map<std::uint32_t, key_state>::iterator forget_key_if_changed(std::map<std::uint32_t, key_state>::iterator it);
    void register_key(std::uint32_t key, const roce_key& k);
    void follow_cqs();
    void follow_cq(std::uint32_t id);
    void follow_cq_slot(cq_slot& c, std::uint32_t id, const roce_cq& cq);
    void touch(const queue_memory& m, bool for_write) noexcept;
    void follow_qps();
    void follow_qp(std::uint32_t id);
    void follow_qp_state(qp_slot& s, std::uint32_t id, const roce_qp& q);
    void drop_qp(qp_slot& s, bool rings_too) noexcept;
    // The doorbell pages a pass polls, counted by the QPs and CQs that name them.
    void count_page(std::uint32_t& counted, std::uint32_t dpi);
    void uncount_page(std::uint32_t& counted) noexcept;
    void list_pages();
    // The lists a pass walks instead of every QP (a pass costs what moves, not the number of
    // QPs: issue 17, bench-scale): made again from scratch when every table is followed, a
    // changed QP's own place otherwise (list).
    void index_objects();
    void list(qp_slot& s);
    void want_fetch(qp_slot& s) noexcept { _fetch.add(s); }
    void attend(qp_slot& s) noexcept { _attend.add(s); }
    bool fetch_produced();
    bool attend_slots();
    bool configure(qp_slot& s, const roce_qp& q);
    void to_rts(qp_slot& s, const roce_qp& q);
    static connection connection_of(const roce_qp& q);
    // doorbells.cpp
    bool poll_doorbells();
    void doorbell(std::uint32_t dpi, std::uint64_t value);
    void ignore() noexcept;
    void producer(qp_slot& s, bool send, std::uint32_t index, bool epoch);
    bool consumer(cq_slot& c, std::uint32_t index, bool epoch) noexcept;
    void arm_cq(cq_slot& c);
    bool fetch_sends(qp_slot& s, const roce_qp& q);
    bool fetch_receives(qp_slot& s, const roce_qp& q);
    bool read_queue(const queue_memory& m, std::uint64_t offset, std::span<std::byte> out) const noexcept;
    roce::completion_status locate(qp_slot& s, const roce::retransmission& r) noexcept;
    // cqe.cpp
    bool drain_completions(qp_slot& s);
    bool write_cqe(cq_slot& c, std::span<std::byte, 32> cqe);
    bool send_cqe(qp_slot& s, const roce::completion& c);
    bool receive_cqe(qp_slot& s, const roce::completion& c);
    static std::uint32_t room(const cq_slot& c) noexcept;
    void notify(cq_slot& c);
    void raise(std::uint16_t vector);
    void report_error(qp_slot& s);

    function_model& _fn;
    std::unique_ptr<roce::port> _port;
    std::unique_ptr<roce::memory> _memory;   // over the server's DMA space, once attached
    roce::memory::runs _host_runs;   // kept from pass to pass (roce/memory.hpp)
    vfio_user::dma_space* _dma = nullptr;
    std::unique_ptr<roce::engine> _engine;   // made with the GID of the first QP that reaches RTR (made_for)
    std::map<std::uint32_t, qp_slot> _qps;
    roce::worklist<qp_slot, &qp_slot::fetching> _fetch;   // the slots with WQEs produced and not taken
    roce::worklist<qp_slot, &qp_slot::attended> _attend;  // the slots whose rc_qp asked to be looked at
    std::map<std::uint32_t, cq_slot> _cqs;
    std::map<std::uint32_t, key_state> _keys;   // the keys registered in _memory
    std::vector<std::uint32_t> _pages;          // the DPI pages polled: 0 and every QP's and CQ's
    std::map<std::uint32_t, std::uint32_t> _page_users;   // DPI -> QPs and CQs that name it
    bool _link_seen = true;                     // the port's link at the last pass
    std::uint64_t _seen_commands = ~std::uint64_t{0};
    std::uint64_t _seen_roce = ~std::uint64_t{0};
    std::uint64_t _seen_resets = ~std::uint64_t{0};
    std::array<std::byte, 128> _wqe{};          // one WQE, send or receive
    parsed_send _send;                          // reused from entry to entry

    std::atomic<std::uint64_t> _passes{0};
    std::atomic<std::uint64_t> _wqes{0};
    std::atomic<std::uint64_t> _cqes{0};
    std::atomic<std::uint64_t> _followed{0};
    // the toggle bytes of the CQEs this pass wrote, stored at its end (cqe.cpp write_cqe)
    vfio_user::polled_bytes _toggles;
    std::atomic<std::uint64_t> _notes{0};
    std::atomic<std::uint64_t> _dropped{0};
    std::atomic<std::uint64_t> _located{0};
    std::atomic<std::uint64_t> _refused{0};
    roce::model_core* _core = nullptr;  // the wire's; joined last in the constructor
};

}  // namespace rig::sim::bnxt
