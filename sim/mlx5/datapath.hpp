#pragma once
// The data path of a ConnectX function model: doorbells, work entries and completions of the
// function's RC queue pairs, carried by the family-neutral RC engine (sim/roce) over a wire
// (rdma-core mlx5dv.h and providers/mlx5; docs/architecture.md, "The device model", "Hot path
// rules").
//
// The wire's model core (sim/roce/model_core.hpp), one thread for every function of the wire,
// runs passes of this function's data path, one per round (step). Each pass holds the function
// model's lock, so commands and the data path never interleave: a pass that starts after
// DESTROY_QP (or DESTROY_MKEY, 2RST, 2ERR) has run sees its effect before it moves a byte. A pass:
//  1. follows the firmware's object tables when a command ran since the last pass (or the
//     function was reset): MKEYs become sim::roce::memory regions (key, pd, va, length, rights,
//     MTT pages); QPs in RTR/RTS/ERR get an rc_qp configured from their stored qpc (the rc_qp
//     is made at INIT2RTR, when the source GID and UDP port are known); destroyed ones go;
//  2. polls the UAR pages (shared memory, never trapped): the BlueFlame registers (UAR + 0x800,
//     four 512-byte bfregs, two halves each) with an atomic exchange against 0, a value no
//     driver writes (QPN 0 is never an RC QP), and the CQ arm doorbells (UAR + 0x20);
//  3. for each QP whose UAR page saw a BlueFlame write and whose send counter (doorbell record
//     DW1) moved, fetches the new WQEs from the QP buffer (after the RQ, PAS pages): a run of
//     blocks per DMA access, up to the ring's or the page's end, an entry that crosses either
//     gathered block by block; parses them (wqe.cpp) and posts them to the rc_qp; a message
//     that finds no receive has its QP's receive counter (DW0) read at once and its new
//     receive WQEs posted (roce::qp_host), and a QP in ERR has its read every pass, so that
//     what its driver posts completes flushed;
//  4. runs the RC engine (frames in, the scheduled queue pairs' frames out, timers);
//  5. turns the completions of the rc_qps that have some into CQE64s in the CQ buffers
//     (cqe.cpp), owner bit by pass over the ring, and posts one COMP EQE to an armed CQ, which
//     it disarms.
// Steps 3 to 5 walk lists of the QPs that have something to do, not every QP: a pass costs what
// moves (bench-scale: 1024 QPs against 1).
// The core paces the rounds (busy polling, then backoff when idle: model_core.hpp).
// Files: datapath.cpp (thread, objects), doorbells.cpp (steps 2-3), wqe.cpp (parsing),
// cqe.cpp (step 5).
//
// The data path allocates nothing per entry, throws nothing and logs nothing below warn; object
// changes (step 1) are the control path.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "abi/roce/packet.hpp"
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

namespace rig::sim::mlx5 {

class function_model;
struct qp_object;
struct cq_object;
struct mkey_object;

// The rc_qp rings of a QP of 2^log_sq_size 64-byte send blocks and 2^log_rq_size receives of
// 16 << log_rq_stride bytes (datapath::configure; bench-scale's memory rows): a receive holds
// the data segments its stride does (parse_receive_wqe), and the sends not yet completed hold
// no more scatter entries and inline bytes than their WQEs, which the ring holds.
roce::qp_config rc_rings(std::uint8_t log_sq_size, std::uint8_t log_rq_size, std::uint8_t log_rq_stride) noexcept;

// What a pass found in one send WQE (wqe.cpp): the request, or why it is malformed.
struct parsed_send {
    roce::send_request request;
    std::uint8_t opcode = 0;         // ctrl opcode, echoed in the requester CQE
    std::uint32_t blocks = 1;        // 64-byte basic blocks the entry takes
    bool malformed = false;          // completes with a local QP operation error
};

// Parses the send WQE in `wqe` (the bytes from its first block on, in ring order, up to 1 KiB:
// ds is 6 bits, so an entry is at most 63 x 16 bytes). `index` is the entry's block counter,
// `qpn` the QP's number; `available` the blocks the doorbell record says were posted from here.
// Malformed (local QP operation error, as a card completes it): an opcode the model does not run
// (only RDMA WRITE, SEND, RDMA READ), ds of 0, ds beyond the blocks posted or the opcode's
// segments, a ctrl index or QPN that is not this entry's, a zero lkey, more than 16 data
// segments, inline data mixed with data segments, inline on a READ, over 256 inline bytes.
parsed_send parse_send_wqe(std::span<const std::byte> wqe, std::uint32_t index, std::uint32_t qpn,
                           std::uint32_t available) noexcept;
// The same into `out`, reused from entry to entry (the data path's form): only what the entry
// uses is written, as the rc_qp reads no scatter entry past sge_count and no inline byte past
// inline_bytes; a fresh parsed_send zeroes ~600 bytes, which cost as much as the rest of a parse.
void parse_send_wqe(std::span<const std::byte> wqe, std::uint32_t index, std::uint32_t qpn, std::uint32_t available,
                    parsed_send& out) noexcept;
// Parses one receive WQE (`stride` bytes of data segments, ended early by byte_count 0 and lkey
// MLX5_INVALID_LKEY). false: malformed (more than 16 segments, or a zero lkey).
bool parse_receive_wqe(std::span<const std::byte> wqe, std::uint32_t index, roce::receive_request& out) noexcept;

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
    // Frames that arrived while the function had no RC queue pair (dropped, as a card does).
    std::uint64_t frames_dropped() const noexcept { return _dropped.load(std::memory_order_relaxed); }
    // Objects (QPs, CQs, MKEYs) followed after commands: each command's own, or every one of the
    // function's when all tables are followed (follow.cpp).
    std::uint64_t objects_followed() const noexcept { return _followed.load(std::memory_order_relaxed); }

    // One pass, with the function model's lock held (roce::station).
    bool step(roce::clock::time_point now) noexcept override;
    // A command ran (the firmware's thread, the function's lock held): its objects are followed
    // now, before the driver sees it complete, as a card's command changes the QP context
    // before its completion; the rc_qp of a QP that reached RTR is built here, not in the pass
    // that carries the first doorbell (rig-perf's first-size transient, issue 17). The core is
    // woken to run a round soon (model_core::stay_busy).
    void command_ran();

private:
    // What INIT2RTR and RTR2RTS connected an rc_qp to. A QP whose stored qpc names another
    // connection went through 2RST between two passes (a reconnect): its rc_qp is made again.
    struct connection {
        std::uint32_t remote_qpn = 0, rcv_psn = 0, send_psn = 0;
        std::uint64_t rmac = 0;
        rig::roce::gid rgid{};
        std::uint8_t mtu = 0;
        bool same_path(const connection& o) const noexcept {
            return remote_qpn == o.remote_qpn && rcv_psn == o.rcv_psn && rmac == o.rmac && rgid == o.rgid &&
                   mtu == o.mtu;
        }
    };
    struct cq_slot;
    static constexpr std::uint32_t no_page = ~0u;
    // The object pointers of the slots below point into the firmware's tables (std::map nodes,
    // which stay where they are until erased). Only a command or a function reset changes those
    // tables, both between passes with the function's lock held, and every object they made,
    // changed or destroyed is followed before the next pass runs (follow_objects: the objects
    // the firmware listed, every one after a reset): within a pass no pointer is stale, and the
    // data path looks up no table per entry or per completion.
    struct qp_slot {
        std::uint32_t qpn = 0;
        qp_object* q = nullptr;          // the firmware's QP
        cq_slot* send_cq = nullptr;      // the slots of its CQs (cqn_snd, cqn_rcv)
        cq_slot* receive_cq = nullptr;
        connection conn;
        std::unique_ptr<roce::rc_qp> rc;
        std::uint32_t sq_taken = 0;   // blocks fetched (free-running; the record holds 16 bits)
        std::uint32_t rq_taken = 0;   // receive WQEs fetched
        bool sq_look = false;         // in _fetch (or, on the control path, asked to be)
        bool sq_behind = false;       // the last fetch left WQEs the rc_qp did not take (full)
        bool attended = false;        // in _attend
        bool flushing = false;        // in _flush
        std::uint32_t watched_on = no_page;   // the UAR page whose watches hold it (_qp_pages)
        // Its doorbell record in host memory (dma_space::readable), read every time its UAR
        // page rings: found again when the record's IOVA or the DMA windows changed.
        const std::byte* record = nullptr;
        std::uint64_t record_iova = ~std::uint64_t{0};
        std::uint64_t record_removals = ~std::uint64_t{0};
        std::vector<std::uint8_t> opcodes;  // ctrl opcode of each send entry, by block index
        // What its rc_qp tells the data path (roce::qp_host), on the pass's thread.
        struct host final : roce::qp_host {
            datapath* dp = nullptr;
            qp_slot* slot = nullptr;
            void needs_attention() noexcept override { dp->attend(*slot); }
            void receive_wanted() noexcept override { dp->receive_wanted(*slot); }
        } host;
    };
    struct cq_slot {
        std::uint32_t cqn = 0;
        cq_object* cq = nullptr;  // the firmware's CQ
        bool armed = false;
        // The arm word last taken (doorbells.cpp arm()): the record's word when the slot was
        // made, so that only words written since count as arms.
        std::uint32_t arm_word = 0;
        std::uint64_t dbr_addr = ~std::uint64_t{0};  // the CQ's record the word was read from
        // CQEs that fit without overrun as of the last read of the consumer index: the driver
        // only moves it forward, so the doorbell record is read again only when this runs out.
        // Forgotten when a command runs (the CQ may be another one since).
        std::uint32_t room = 0;
        std::uint32_t listed_on = no_page;   // the UAR page whose users hold it (_cq_pages)
    };

    // all with the function model's lock held
    bool pass(roce::clock::time_point now);
    void follow_objects();
    void touch(std::span<const std::uint64_t> pas, std::uint8_t log_page_size, std::uint32_t page_offset,
                      std::size_t bytes, bool for_write) noexcept;
    // Every table (after a reset or when the firmware listed no changes), or just the objects
    // the commands changed (firmware::take_changes): follow.cpp.
    void follow_all();
    void follow_mkeys();
    void follow_mkey(std::uint32_t index);
    void register_mkey(const mkey_object& m);
    void follow_qps();
    void follow_qp(std::uint32_t qpn);
    void follow_qp_state(qp_slot& s, const qp_object& q);
    void follow_cq(std::uint32_t cqn);
    void follow_cq_slot(cq_slot& slot, cq_object& cq);
    void link_cqs(qp_slot& s);
    // A QP's place in the lists and watches, made again after it changed (list) or before it goes.
    void list(qp_slot& s);
    void unlist(qp_slot& s) noexcept;
    void list_cq(cq_slot& slot);
    void unlist_cq(cq_slot& slot) noexcept;
    void drop_qp(qp_slot& s) noexcept;
    bool drop_arrivals(roce::clock::time_point now) noexcept;
    bool configure(qp_slot& s, const qp_object& q);
    static connection connection_of(const qp_object& q);
    // The lists a pass walks instead of every QP (a pass costs what moves, not the number of
    // QPs: issue 17, bench-scale): made again from scratch when every table is followed, a
    // changed QP's or CQ's own place otherwise (list, list_cq).
    void index_objects();
    bool uar_in_bar(std::uint32_t page) const noexcept;
    void look_at_sends(qp_slot& s) noexcept { _fetch.add(s); }
    void attend(qp_slot& s) noexcept { _attend.add(s); }
    void receive_wanted(qp_slot& s) noexcept;
    bool fetch_looked_at();
    bool flush_receives();
    bool attend_slots();
    void find_send_counters();
    bool poll_uar_pages();
    bool poll_cq_doorbells();
    bool fetch_sends(qp_slot& s, const qp_object& q);
    std::uint32_t stage_sends(const qp_object& q, std::uint32_t first, std::uint32_t pending) noexcept;
    bool gather_send(qp_slot& s, const qp_object& q, std::uint32_t most);
    bool fetch_receives(qp_slot& s, const qp_object& q);
    // The 16-bit counter at `offset` of the QP's doorbell record (qp_dbr). false: outside the DMA mappings.
    bool read_counter(qp_slot& s, const qp_object& q, std::uint64_t offset, std::uint32_t& counter);
    bool drain_completions(qp_slot& s, const qp_object& q);
    void raise_responder_event(const qp_slot& s, std::uint32_t qpn);
    bool write_cqe(cq_slot& slot, const roce::completion& c, std::uint32_t qpn, std::uint8_t send_opcode);
    void signal(cq_slot& slot);
    void arm(cq_slot& slot, std::uint32_t word, bool stored);
    bool read_queue(const qp_object& q, std::uint64_t offset, std::span<std::byte> out) const noexcept;

    function_model& _fn;
    std::unique_ptr<roce::port> _port;
    std::unique_ptr<roce::memory> _memory;   // over the server's DMA space, once attached
    roce::memory::runs _host_runs;   // kept from pass to pass (roce/memory.hpp)
    vfio_user::dma_space* _dma = nullptr;
    std::unique_ptr<roce::engine> _engine;   // made with the GID of the first QP that reaches RTR (made_for)
    std::map<std::uint32_t, qp_slot> _qps;
    std::map<std::uint32_t, cq_slot> _cqs;
    std::map<std::uint32_t, std::uint32_t> _mkeys;  // key -> pd registered in _memory
    std::uint64_t _seen_commands = ~std::uint64_t{0};
    std::uint64_t _seen_resets = ~std::uint64_t{0};
    std::array<std::byte, 1024> _wqe{};     // one send WQE gathered block by block, or a receive WQE
    // A run of send WQE blocks read with one DMA access (doorbells.cpp stage_sends): up to a page
    // of 64 blocks, and room for the longest entry (16 blocks) to be parsed from its last block.
    static constexpr std::uint32_t staged_blocks = 64;
    std::array<std::byte, (staged_blocks + 16) * 64> _staged{};
    // A UAR page (in BAR0) and the QPs, or the CQs, that ring it.
    template <typename Slot>
    struct uar_users {
        std::uint32_t page = 0;
        std::vector<Slot*> slots;
    };
    // A QP of a UAR page, watched when the page rings: its send counter's host address (null:
    // read through the DMA view) and the counter last seen there. A flat array per page, walked
    // in order: a ring of a page with a thousand QPs reads a thousand records, and following
    // each slot to its record cost two cache misses per QP (bench-scale).
    struct send_watch {
        qp_slot* slot = nullptr;
        const std::byte* counter = nullptr;
        std::uint32_t seen = ~0u;
        std::uint32_t qpn = 0;   // the slot's, here so that prefetch_named matches without a miss
    };
    struct qp_page {
        std::uint32_t page = 0;
        std::vector<send_watch> watches;
    };
    std::vector<qp_page> _qp_pages;
    void prefetch_named(const qp_page& page, std::span<const std::uint32_t> named) noexcept;
    std::uint64_t _watch_removals = ~std::uint64_t{0};   // dma_space::removals() the watches were found at
    bool _watches_unresolved = false;   // watches added since: their counters found by the next poll
    void resolve_new_watches();
    std::vector<uar_users<cq_slot>> _cq_pages;
    // the slots whose send counter a pass reads: a BlueFlame write, a state change, a full ring
    roce::worklist<qp_slot, &qp_slot::sq_look> _fetch;
    // the slots whose rc_qp asked to be looked at: completions, a failure
    roce::worklist<qp_slot, &qp_slot::attended> _attend;
    // the slots whose rc_qp is in ERR: their receive counters are read every pass (flush_receives)
    roce::worklist<qp_slot, &qp_slot::flushing> _flush;
    // the owner bytes (op_own) of the CQEs this pass wrote, stored at its end (cqe.cpp write_cqe)
    vfio_user::polled_bytes _owners;

    std::atomic<std::uint64_t> _passes{0};
    std::atomic<std::uint64_t> _wqes{0};
    std::atomic<std::uint64_t> _cqes{0};
    std::atomic<std::uint64_t> _dropped{0};
    std::atomic<std::uint64_t> _followed{0};
    roce::model_core* _core = nullptr;  // the wire's; joined last in the constructor
};

}  // namespace rig::sim::mlx5
