#pragma once
// One reliable-connected queue pair of the IB transport (spec vol. 1 ch. 9), carried as RoCEv2
// frames over the model's wire. Family-neutral: it takes sim/roce/work.hpp requests and gives
// sim/roce/work.hpp completions.
//
// IB spec vol. 1 9.7 (reliable service); Linux rxe (rxe_req.c, rxe_comp.c, rxe_resp.c) is the
// software implementation whose choices this follows where the spec leaves room.
// Requester: messages cut into MTU packets (FIRST/MIDDLE/LAST/ONLY), one PSN per packet and a
// READ request spanning one PSN per response packet; AckReq on each message's last packet and
// every 16th packet; acknowledgements are cumulative (an ACK, a NAK or a READ response
// acknowledges every earlier PSN); go-back-N from the oldest unacknowledged PSN on a
// PSN-sequence-error NAK, on a gap in READ responses and on the ack timer (4.096 us x
// 2^timeout), retry_count times, then RETRY_EXCEEDED; RNR NAK: wait the timer the NAK names
// and resend, without end when rnr_retry = 7.
// Responder: PSN check against the expected PSN (a duplicate is ACKed again, a duplicate READ
// is executed again; a PSN ahead gets one PSN-sequence-error NAK, then silence until the
// expected PSN arrives), opcode sequence, lengths, R_Key checks over the whole RDMA range
// before any byte moves, RNR NAK when no receive is posted, READ responses with AETH on
// FIRST/LAST/ONLY, coalesced ACKs carrying the MSN.
// Errors: a remote access, remote operational or invalid-request NAK fails the requester's
// entry; the responder of an RC queue pair goes to error too for those; a send longer than
// its receive completes the receive with local length error and NAKs invalid request. A
// failed queue pair completes every pending entry of both rings `flushed`, in order, and
// flushes later posts, until reset.
//
// Time comes from the caller (`now`), so tests run real time or tight timeouts. One thread
// at a time uses a queue pair (the function's polling thread). The data path (post, take,
// on_frame, transmit, timers) allocates nothing, throws nothing and logs nothing below warn.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "abi/roce/packet.hpp"
#include "sim/roce/memory.hpp"
#include "sim/roce/wire.hpp"
#include "sim/roce/work.hpp"

namespace rig::sim::roce {

enum class qp_state : std::uint8_t { reset, init, rtr, rts, error };
std::string_view to_string(qp_state s) noexcept;

struct qp_config {
    std::uint32_t qpn = 0;  // 24 bits
    std::uint32_t pd = 0;
    mac_address mac{};
    rig::roce::gid gid{};
    std::uint16_t udp_sport = 0xc000;
    std::uint32_t sq_size = 256;  // entries; powers of two
    std::uint32_t rq_size = 256;
    // The scatter entries one receive names at most (1..max_sge): the family's receive WQE bounds
    // them (mlx5 its stride / 16, bnxt rq_sge), and the receive shadow keeps this many an entry,
    // not max_sge (issue 17 "Memory"). A receive posted with more completes in error at its use.
    std::uint8_t rq_max_sge = max_sge;
    // The bytes of scatter lists (16 an entry) and inline data that the send entries not yet
    // completed hold together at most. The family's send ring bounds them (mlx5: the ring's
    // bytes, as each WQE carries its own; bnxt: its WQEs' room), and the send shadow keeps them
    // out of line, in a store that big, not 256 bytes in every entry (issue 17 "Memory").
    // 0: sq_size x 256, any entries at all. A send that does not fit is not taken (post_send
    // false) until earlier ones complete.
    std::uint32_t sq_payload_bytes = 0;
};

// INIT -> RTR: where the peer is and what this side expects of it.
struct path {
    std::uint32_t dest_qpn = 0;
    mac_address dest_mac{};
    rig::roce::gid dest_gid{};
    std::uint32_t mtu = 1024;          // 256, 512, 1024, 2048 or 4096
    std::uint32_t rq_psn = 0;          // the first PSN expected from the peer
    std::uint8_t min_rnr_timer = 1;    // 5-bit RNR timer code (rnr_timer()), sent in RNR NAKs
    std::uint8_t max_dest_rd_atomic = 16;  // READs the responder holds at once (1..32)
};

// RTR -> RTS: how this side sends.
struct send_params {
    std::uint32_t sq_psn = 0;          // the first PSN sent
    std::uint8_t timeout = 14;         // ack timeout 4.096 us x 2^timeout; 0: none
    std::uint8_t retry_count = 7;      // 0..7
    std::uint8_t rnr_retry = 7;        // 0..7; 7: without end
    std::uint8_t max_rd_atomic = 16;   // READs outstanding at once (1..32)
    std::uint32_t max_inflight = 256;  // unacknowledged packets at most (the NIC's window)
};

// Ack timeout of the code (IB Local ACK Timeout): 4.096 us x 2^code; 0 means none (zero returned).
std::chrono::nanoseconds ack_timeout(std::uint8_t code) noexcept;
// RNR NAK timer of the 5-bit code (IB's RNR timer encoding): 0 = 655.36 ms, 1 = 0.01 ms ... 31 = 491.52 ms.
std::chrono::nanoseconds rnr_timer(std::uint8_t code) noexcept;

struct qp_counters {
    std::uint64_t packets_sent = 0;
    std::uint64_t packets_received = 0;
    std::uint64_t retransmitted = 0;     // packets sent again after a go-back-N
    std::uint64_t timeouts = 0;          // ack timer expiries
    std::uint64_t rnr_naks_received = 0;
    std::uint64_t rnr_naks_sent = 0;
    std::uint64_t seq_naks_sent = 0;
    std::uint64_t seq_naks_received = 0;
    std::uint64_t duplicates_received = 0;
    std::uint64_t out_of_sequence = 0;
};

// A go-back-N about to start: the entry holding the PSN sent again first.
struct retransmission {
    std::uint32_t index = 0;      // the entry's send_request::index
    work_op op = work_op::send;
    bool with_immediate = false;
    std::uint32_t first_psn = 0;  // the entry's first PSN, as this queue pair gave it
    std::uint32_t packets = 0;    // its PSNs (a READ: its response packets)
    std::uint32_t from_psn = 0;   // the PSN sent again first: first_psn <= from_psn < first_psn + packets
};

// A family's NIC that finds where a retransmission starts by metadata of its own kind (bnxt P5:
// the driver's PSN search entries, docs/bnxt-data-path.md) sets one on its queue pairs; with none
// (mlx5) the queue pair resends from its own record. Called on the data path, by the queue
// pair's thread, at every go-back-N (NAK, ack timeout, READ response gap, RNR wait over) of an
// entry that has PSNs: allocates nothing, throws nothing, logs nothing below warn.
class retransmit_locator {
public:
    // success: the retransmission starts at r.from_psn. Another status: it cannot be located;
    // the entries before r's complete as acknowledged, r's entry completes with that status and
    // the queue pair fails (the rest flushed).
    virtual completion_status locate(const retransmission& r) noexcept = 0;

protected:
    retransmit_locator() = default;
    retransmit_locator(const retransmit_locator&) = default;
    retransmit_locator& operator=(const retransmit_locator&) = default;
    ~retransmit_locator() = default;
};

// What a queue pair tells the family's NIC it lives in, on the data path (by the queue pair's
// thread, from on_frame, transmit, post_* and the transitions), so that a NIC with many queue
// pairs drains and feeds only the ones that ask, instead of looking at every one each pass (a
// card's QP contexts raise the same to its schedulers). Allocates nothing, throws nothing.
class qp_host {
public:
    // A completion was added (take() has one), or the queue pair went to ERROR: the NIC looks.
    virtual void needs_attention() noexcept = 0;
    // A message needs a receive and none is posted: the NIC posts what its driver has
    // (post_receive) now, before the queue pair answers RNR, as a card reads a receive queue's
    // doorbell record when a SEND arrives. The queue pair looks again when this returns.
    virtual void receive_wanted() noexcept = 0;

protected:
    qp_host() = default;
    qp_host(const qp_host&) = default;
    qp_host& operator=(const qp_host&) = default;
    ~qp_host() = default;
};

class engine;

class rc_qp {
public:
    // Misuse (sizes not powers of two or over 2^15, qpn over 24 bits) throws std::invalid_argument.
    rc_qp(memory& mem, port& wire_port, const qp_config& config);
    rc_qp(const rc_qp&) = delete;
    rc_qp& operator=(const rc_qp&) = delete;

    std::uint32_t qpn() const noexcept { return _config.qpn; }
    // The line of the next send entry to start, asked for before this queue pair's turn (engine;
    // always_inline: see prefetch_followers).
    [[gnu::always_inline]] void prefetch_next_entry() const noexcept {
        if (_sq_started != _sq_post) {
            __builtin_prefetch(_sq.data() + (_sq_started & (_config.sq_size - 1)));
        }
    }
    qp_state state() const noexcept { return _state; }
    // The NAK with which the responder failed the queue pair, if it did (a card raises the
    // matching affiliated event at the responder: IB spec 11.6.3, Local Access Violation / Invalid
    // Request WQ errors).
    std::optional<rig::roce::nak_code> responder_failure() const noexcept { return _responder_failure; }
    const qp_counters& counters() const noexcept { return _counters; }

    // ---- state transitions (control path). A transition from the wrong state, or a bad
    // parameter (mtu, psn over 24 bits, codes out of range, at RTR a peer GID of the other IP
    // version than this queue pair's), throws std::invalid_argument and changes nothing.
    // RESET -> INIT. `remote_rights`: which remote operations the responder takes at all
    // (access_remote_read / access_remote_write: mlx5 qpc rre/rwe, IB qp_access_flags); a
    // request the queue pair does not take gets an invalid-request NAK (as Linux rxe does).
    void to_init(std::uint8_t remote_rights = access_remote_read | access_remote_write);
    void to_rtr(const path& p);            // INIT -> RTR
    void to_rts(const send_params& s);     // RTR -> RTS
    void to_error() noexcept;              // any -> ERROR: everything pending completes flushed
    void reset() noexcept;                 // any -> RESET: rings and completions emptied

    // Control path: how a retransmission is located from now on (not owned; outlives the queue
    // pair or is unset first). nullptr, the default: by the queue pair's own record.
    void set_retransmit_locator(retransmit_locator* l) noexcept { _locator = l; }
    // Control path: who hears of completions and wanted receives (qp_host; not owned; outlives
    // the queue pair or is unset first). nullptr, the default: nobody.
    void set_host(qp_host* h) noexcept { _host = h; }

    // ---- posting (data path). false: the ring (entries + untaken completions), or for a send
    // the payload store (qp_config::sq_payload_bytes), is full; nothing posted. Allowed in INIT, RTR (sends wait for RTS), RTS, and ERROR (completes flushed).
    // A malformed request completes with local_qp_operation and fails the queue pair.
    bool post_send(const send_request& r) noexcept;
    bool post_receive(const receive_request& r) noexcept;
    std::uint32_t send_room() const noexcept;
    std::uint32_t receive_room() const noexcept;

    // The oldest untaken completion of a side, in the order of that ring's entries.
    bool take(completion_side side, completion& out) noexcept;
    bool has_completions() const noexcept { return _send_done.size() != 0 || _receive_done.size() != 0; }

    // ---- the engine's side (data path)
    // `payload_by_reference`: the packet's payload lies outside the frame, in the sender's DMA
    // window (wire.hpp frame::payload_ref), and stays there after the frame goes back to the
    // switch: the copy of a WRITE's payload may then wait for the next packets of the message,
    // to be made as one (finish_copies).
    void on_frame(const rig::roce::decoded& packet, clock::time_point now, bool payload_by_reference = false) noexcept;
    // Makes the copies on_frame left waiting (a run of one WRITE's packets, into host memory
    // found for this thread's dma_space::pin): before anything else reads or writes that
    // memory, and before the pin goes. transmit() starts with it; the engine calls it once its
    // frames are taken, before any queue pair transmits.
    void finish_copies() noexcept {
        if (_copy.n != 0) {
            copy_now();
        }
    }
    // Fires timers and sends what the window allows; true when it did something.
    bool transmit(clock::time_point now) noexcept;

    // The state one entry of each ring costs (bench-scale's memory rows), for a queue pair of
    // `c`: a send shadow entry with its share of the payload store, a receive entry with room
    // for rq_max_sge scatter entries, one completion slot.
    struct entry_bytes {
        std::size_t send, receive, completion;
    };
    static entry_bytes bytes_per_entry(const qp_config& c) noexcept {
        return {sizeof(send_entry) + payload_units(c) * sizeof(sge) / c.sq_size,
                sizeof(receive_entry) + std::size_t{c.rq_max_sge} * sizeof(sge), sizeof(packed_completion)};
    }

private:
    friend class engine;   // its schedule of the queue pairs that have something to send (engine.hpp)

    // A posted send: the request's fields but its scatter list or inline bytes, which lie in
    // _sq_payload (payload_of), and what the requester adds. 56 bytes, not the request's 288.
    struct send_entry {
        std::uint64_t remote_va = 0;
        std::uint64_t bytes = 0;          // the message's
        std::uint32_t index = 0;          // send_request::index
        std::uint32_t rkey = 0;
        std::uint32_t immediate = 0;
        std::uint32_t first_psn = 0;
        std::uint32_t packets = 0;
        std::uint32_t stored_from = 0;    // _payload_next as it was posted: what its retirement frees
        std::uint32_t payload = 0;        // the unit of _sq_payload its payload starts at
        work_op op = work_op::send;
        bool signaled = true;
        bool is_inline = false;
        bool with_immediate = false;
        std::uint8_t sge_count = 0;       // kept in _sq_payload (0 when inline or refused)
        completion_status local_error = completion_status::success;  // found at post or start
    };
    // A posted receive; its scatter list lies in _rq_sg (rq_sges), sge_count as posted.
    struct receive_entry {
        std::uint32_t index = 0;
        std::uint8_t sge_count = 0;
        std::uint64_t capacity = 0;   // the bytes its scatter list holds
    };
    // Packets one transmit() sends at most, each direction: a pass's fixed costs (locks, doorbell
    // and clock reads) spread over this many packets, and the responder answers all the
    // requests a pass took with one coalesced ACK (an ACK acknowledges every PSN up to the one it
    // names: IB spec vol. 1 9.7.5.1), so the wire carries about one ACK per burst of small
    // messages.
    static constexpr int burst = 128;
    struct read_context {  // a READ the responder answers
        std::uint32_t first_psn, psn, end_psn;  // end: one past the last response PSN
        std::uint64_t va;
        std::uint32_t rkey;
        std::uint64_t bytes;
    };
    // A completion waiting for the family's data path, packed in two 64-bit words that push
    // stores and take loads whole. Why not the struct: push stored its fields one by one (seven
    // narrow stores) and take copied it with a 16-byte load, which the store buffer cannot
    // forward from narrow stores; a take right after its push (the same pass) then waited until
    // every older store had reached the cache, CQE stores to lines the program's core holds among
    // them (bench-model's 64 B rate, perf: take up to 40 % of the model's CPU, on its two loads).
    struct packed_completion {
        std::uint64_t counts;   // index | byte_len << 32
        std::uint64_t rest;     // immediate | side << 32 | status << 40 | op << 48 | with_immediate << 56
    };
    struct completion_ring {
        std::vector<packed_completion> slots;
        std::uint32_t head = 0, tail = 0;  // free-running
        std::uint32_t size() const noexcept { return tail - head; }
        void push(const completion& c) noexcept;
        void pop(completion& out) noexcept;   // the oldest; size() > 0
    };
    enum class inbound : std::uint8_t { none, send, write };

    // rc_qp.cpp
    // The payload store's 16-byte units for `c`: its sq_payload_bytes (0: sq_size x 256) and
    // room for one more inline entry, so that an entry that would cross the store's end and goes
    // to its start instead never finds it full while the family's bound holds.
    static std::size_t payload_units(const qp_config& c) noexcept {
        const std::size_t bytes = c.sq_payload_bytes != 0 ? c.sq_payload_bytes : std::size_t{c.sq_size} * max_inline;
        return (bytes + sizeof(sge) - 1) / sizeof(sge) + max_inline / sizeof(sge);
    }
    // Stores r's scatter list or inline bytes, `units` of them (0: none), for entry `e`, and sets
    // e.stored_from and e.payload; false, and nothing changed, when the store has no room now.
    bool store_payload(send_entry& e, const send_request& r, std::uint32_t units) noexcept;
    std::span<const sge> sges(const send_entry& e) const noexcept {
        return std::span(_sq_payload).subspan(e.payload, e.sge_count);
    }
    std::span<const std::byte> inline_bytes(const send_entry& e) const noexcept {
        return std::as_bytes(std::span(_sq_payload)).subspan(std::size_t{e.payload} * sizeof(sge), e.bytes);
    }
    void enter_error() noexcept;
    // Tells the engine this queue pair has something to send (engine::schedule), if it is in one.
    void schedule() noexcept;
    // Whether a receive is posted, after asking the host for one when none is (qp_host).
    bool receive_posted() noexcept;
    void complete_send(const send_entry& e, completion_status status) noexcept;
    // `by`: what consumed it (send, or write: a WRITE with immediate); `imm`: its ImmDt, if any.
    void complete_receive(const receive_entry& e, completion_status status, std::uint32_t bytes,
                          work_op by = work_op::send, std::optional<std::uint32_t> imm = std::nullopt) noexcept;
    send_entry& sq(std::uint32_t i) noexcept { return _sq[i & (_config.sq_size - 1)]; }
    // The shadow and the scatter list of the entries after the one starting now were written
    // when they were posted, long before when many queue pairs share the core: each was a cache
    // miss in start_next_entry (bench-scale at 1024 queue pairs, perf: the model's first symbol).
    // Their lines are asked for a few entries ahead; a scatter list's after its entry's has come.
    // always_inline: g++ 12 finds a function whose only effect is a prefetch free of effects and
    // drops the call to it (seen in the object code).
    [[gnu::always_inline]] void prefetch_followers() const noexcept {
        constexpr std::uint32_t entry_ahead = 4, payload_ahead = 2;
        const std::uint32_t posted = _sq_post - _sq_started;
        if (posted > entry_ahead) {
            __builtin_prefetch(_sq.data() + ((_sq_started + entry_ahead) & (_config.sq_size - 1)));
        }
        if (posted > payload_ahead) {
            const send_entry& next = _sq[(_sq_started + payload_ahead) & (_config.sq_size - 1)];
            __builtin_prefetch(_sq_payload.data() + next.payload);
        }
    }
    std::uint32_t rq_slot(std::uint32_t i) const noexcept { return i & (_config.rq_size - 1); }
    receive_entry& rq(std::uint32_t i) noexcept { return _rq[rq_slot(i)]; }
    // A receive's scatter list: entry i's from i x rq_max_sge of _rq_sg
    std::span<sge> rq_sg(std::uint32_t i) noexcept {
        return std::span(_rq_sg).subspan(std::size_t{rq_slot(i)} * _config.rq_max_sge, _config.rq_max_sge);
    }
    std::span<const sge> rq_sges(std::uint32_t i) noexcept {
        return rq_sg(i).first(std::min<std::size_t>(rq(i).sge_count, _config.rq_max_sge));
    }
    // gathers/scatters `bytes` at `offset` of a request's scatter list
    mem_status gather(const send_entry& e, std::uint64_t offset, std::span<std::byte> out) const noexcept;
    mem_status scatter(std::span<const sge> sg, std::uint64_t offset, std::span<const std::byte> in) noexcept;
    // An inbound WRITE's payload into its place at _in_va + _in_offset: now, or joined to the
    // copy waiting (finish_copies) when it continues it in both memories. false: refused.
    bool write_payload(std::span<const std::byte> payload) noexcept;
    void copy_now() noexcept;
    // A frame for `t` with room for `payload_bytes`, headers written, the payload's place in
    // `payload` (the caller gathers into it, when the payload cannot go by reference), or
    // nullptr when the switch is out of buffers. Then send_frame() (the port sends it with the
    // rest of transmit()'s burst) or, if filling failed, _port.release().
    frame* start_frame(const rig::roce::transport& t, std::size_t payload_bytes, std::span<std::byte>& payload) noexcept;
    // The same with the payload left where it is, at `payload` (wire.hpp frame::payload_ref: the
    // receiver copies it from there, the only copy), which memory::reference gave.
    frame* start_frame(const rig::roce::transport& t, const std::byte* payload, std::size_t payload_bytes) noexcept;
    // `n` bytes at `offset` of a request's scatter list by reference, when they lie in one
    // scatter entry that memory::reference can point at; nullptr: gather them (which also
    // refuses what the checks refuse).
    const std::byte* reference(const send_entry& e, std::uint64_t offset, std::size_t n) const noexcept;
    void send_frame(frame* f) noexcept;
    bool send_empty(const rig::roce::transport& t) noexcept;   // ACK, NAK, READ request

    // rc_requester.cpp
    void on_response(const rig::roce::decoded& packet, clock::time_point now) noexcept;
    void acknowledge_before(std::uint32_t psn, clock::time_point now) noexcept;
    void on_progress(clock::time_point now) noexcept;
    void retire_completed() noexcept;
    // false: the retransmission could not be located (retransmit_locator) and the queue pair failed
    bool go_back() noexcept;
    std::uint32_t entry_of(std::uint32_t psn) noexcept;
    bool start_next_entry() noexcept;
    bool send_request_packet(clock::time_point now) noexcept;
    bool send_requests(clock::time_point now) noexcept;
    bool requester_timers(clock::time_point now) noexcept;
    // The earliest of the ack timer and the RNR wait, clock::time_point::max() when neither runs.
    clock::time_point next_timer() const noexcept;
    // A timer now runs until `due`: the engine's timer queue is told (engine::arm).
    void timer_armed(clock::time_point due) noexcept;
    void fail_entry_at(std::uint32_t entry, completion_status status) noexcept;

    // rc_responder.cpp
    void on_request(const rig::roce::decoded& packet) noexcept;
    void execute(const rig::roce::decoded& packet) noexcept;
    void rnr_nak(std::uint32_t psn) noexcept;
    void nak(rig::roce::nak_code code, std::uint32_t psn) noexcept;
    void responder_fails(rig::roce::nak_code code, std::uint32_t psn, completion_status receive_status) noexcept;
    bool push_read(std::uint32_t psn, std::uint64_t va, std::uint32_t rkey, std::uint32_t bytes) noexcept;
    bool send_responses() noexcept;

    memory& _mem;
    port& _port;
    const qp_config _config;
    qp_state _state = qp_state::reset;
    path _path{};
    send_params _send{};
    std::uint8_t _remote_rights = 0;
    retransmit_locator* _locator = nullptr;
    qp_host* _host = nullptr;
    engine* _engine = nullptr;      // the engine it was added to (engine::add)
    bool _scheduled = false;        // in that engine's schedule
    // The due time of this queue pair's live entry in the engine's timer queue (engine::arm),
    // clock::time_point::max() when it has none there.
    clock::time_point _timer_queued = clock::time_point::max();
    rig::roce::route_headers _headers{rig::roce::route{}};  // the path's Ethernet/IP/UDP headers, laid out at RTR
    std::chrono::nanoseconds _ack_timeout{0};
    qp_counters _counters;

    // ---- send queue and requester (free-running entry counters, PSNs 24-bit)
    std::vector<send_entry> _sq;
    std::vector<sge> _sq_payload;   // the entries' scatter lists and inline bytes, 16-byte units, in post order
    std::uint32_t _payload_next = 0;  // units taken so far (free-running; skips at the end included)
    std::uint32_t _payload_at = 0;    // where the next entry's payload goes
    std::uint32_t _sq_post = 0;     // next slot posted
    std::uint32_t _sq_done = 0;     // oldest entry without completion
    std::uint32_t _sq_started = 0;  // next entry without PSNs
    std::uint32_t _tx_entry = 0;    // entry being sent
    std::uint32_t _tx_psn = 0;      // next PSN sent
    std::uint32_t _next_psn = 0;    // first PSN of the next entry started
    std::uint32_t _sent_end = 0;    // one past the highest PSN sent
    std::uint32_t _una = 0;         // oldest PSN not acknowledged
    std::uint32_t _una_entry = 0;   // the entry holding _una (== _sq_started when none)
    std::uint32_t _reads_outstanding = 0;
    std::uint8_t _retry_left = 0;
    std::uint8_t _rnr_left = 0;
    bool _timer_armed = false;
    clock::time_point _deadline{};
    bool _rnr_waiting = false;
    clock::time_point _rnr_until{};
    bool _gap_rewound = false;      // a go-back for the current _una already happened
    completion_ring _send_done;

    // ---- receive queue and responder
    std::vector<receive_entry> _rq;
    std::vector<sge> _rq_sg;        // rq_max_sge a receive: entry i's from i * rq_max_sge
    std::uint32_t _rq_post = 0;
    std::uint32_t _rq_done = 0;     // oldest receive without completion
    std::uint32_t _epsn = 0;        // expected PSN
    std::uint32_t _msn = 0;         // messages completed (24 bits)
    bool _nak_silent = false;       // a NAK went out; quiet until the expected PSN arrives
    inbound _inbound = inbound::none;
    std::optional<rig::roce::nak_code> _responder_failure;
    std::uint64_t _in_offset = 0;   // bytes of the inbound message so far
    std::uint64_t _in_va = 0;       // inbound WRITE: target
    std::uint32_t _in_rkey = 0;
    std::uint64_t _in_length = 0;   // inbound WRITE: RETH DMA length
    std::array<read_context, 32> _reads{};
    std::uint32_t _reads_head = 0, _reads_tail = 0;
    bool _ack_pending = false;
    bool _nak_pending = false;
    std::uint8_t _nak_syndrome = 0;
    std::uint32_t _nak_psn = 0;
    completion_ring _receive_done;
    // the copy waiting (finish_copies): `n` bytes from `from` (a sender's window) to `to`
    struct waiting_copy {
        std::byte* to = nullptr;
        const std::byte* from = nullptr;
        std::size_t n = 0;
    };
    waiting_copy _copy;
    bool _payload_stays = false;    // on_frame's payload_by_reference, for the packet being handled
};

}  // namespace rig::sim::roce
