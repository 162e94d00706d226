#pragma once
// One input's queue pair and what the roce-frame harness knows it must do (frame.cpp drives it).
// A fresh engine and RC queue pair (sim/roce/engine.hpp, rc_qp.hpp) on bench.hpp's port, taken
// to RTS as a NIC model takes one, with a shadow of what the IB spec lets be known from outside:
// the responder's expected PSN (exact: it starts at rq_psn and moves only when a request at it
// executes, IB spec vol. 1 9.7, as rxe's check_psn has it), the READs it may answer, the WRITE in
// progress, the entries posted on both rings. Every step (a frame delivered through the
// uplink, a post, time passing) ends with the oracles of checks.cpp.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "sim/roce/engine.hpp"
#include "sim/roce/rc_qp.hpp"
#include "test/fuzz/roce/bench.hpp"

namespace rig::fuzz::roce {

inline constexpr std::uint32_t our_qpn = 0x101;
inline constexpr std::uint32_t peer_qpn = 0x202;
inline constexpr std::uint32_t ring_entries = 16;

struct session_config {
    bool v6 = false;
    bool stay_in_rtr = false;
    std::uint32_t mtu = 1024;
    std::uint8_t remote_rights = sr::access_remote_read | sr::access_remote_write;
    std::uint32_t rq_psn = 0;
    std::uint32_t sq_psn = 0;
    std::uint8_t timeout = 0;
    std::uint8_t retry_count = 7;
    std::uint8_t rnr_retry = 7;
    std::uint8_t min_rnr_timer = 1;
    std::uint8_t max_dest_rd_atomic = 16;
    std::uint8_t max_rd_atomic = 16;
};

// How a frame from outside goes on the wire: with an ICRC computed over its bytes as they are
// (the fuzzer's bytes get past the ICRC check), unsealed (the in-process path: no ICRC check),
// or as it is (the ICRC is whatever its last four bytes say).
enum class seal_mode : std::uint8_t { seal, unsealed, as_is };

class session {
public:
    explicit session(const session_config& c);
    ~session();
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    const session_config& config() const noexcept { return _c; }
    const proto::gid& our_gid() const noexcept { return _ours; }
    const proto::gid& peer_gid() const noexcept { return _peer; }

    // PSN anchors the input picks from (frame.cpp): what the shadow knows.
    std::uint32_t expected_psn() const noexcept { return _epsn; }
    std::uint32_t last_injected_psn() const noexcept { return _last_injected; }
    std::uint32_t last_request_psn() const noexcept { return _last_request; }
    std::uint32_t sent_end() const noexcept { return _sent_end; }

    // The steps. Each ends with check_step().
    void deliver(std::span<const std::byte> frame_bytes, seal_mode mode);
    void post_send(const sr::send_request& r);
    void post_receive(const sr::receive_request& r);
    void advance(std::chrono::nanoseconds by);
    // The end of an input: the queue pair fails, every entry posted completes exactly once.
    void finish();

private:
    struct pending_send {
        sr::send_request wr;
    };
    struct read_asked {   // a READ the responder may answer: its key, range and PSNs passed the checks
        std::uint32_t first_psn, packets;
        std::uint32_t key;
        std::uint64_t va, bytes;
    };
    struct write_range {
        bool valid = false;
        std::uint32_t key = 0;
        std::uint64_t va = 0, bytes = 0;
    };

    void poll();
    // Marks what the packet may change in the buffer if the queue pair takes it.
    void allow_for(const proto::decoded& d);
    bool legal_remote(std::uint32_t key, std::uint64_t va, std::uint64_t bytes, std::uint8_t right) const;
    // After a request reached a live responder: the shadow's expected PSN follows the queue pair.
    void follow_request(const proto::decoded& d, const sr::qp_counters& before, bool& executed);
    void follow_response(const proto::decoded& d);
    void check_memory(bool may_change);
    void check_sent();
    void check_emitted(const proto::decoded& d);
    void check_read_response(const proto::decoded& d);
    void check_completions();
    void move_epsn(std::uint32_t to);

    bench& _b;
    const session_config _c;
    const proto::gid _ours, _peer;
    sr::engine _engine;
    sr::rc_qp _qp;
    sr::clock::time_point _now;

    std::vector<std::byte> _snapshot;   // the buffer as the last step left it
    std::vector<std::uint8_t> _allowed; // buffer bytes this step may change
    std::uint32_t _epsn = 0;
    std::vector<std::uint32_t> _nak_psns;  // expected PSNs held since the last ACK/NAK went out
    std::uint32_t _last_injected = 0;
    std::uint32_t _last_request = 0;
    std::uint32_t _sent_end = 0;
    std::vector<read_asked> _reads;
    write_range _inbound;
    std::deque<pending_send> _sends;
    std::deque<sr::receive_request> _receives;
    std::uint32_t _next_index = 0;
    std::uint64_t _packets_posted = 0;   // PSNs the posted sends may take, at most
    std::int64_t _acked = 0;             // PSNs from sq_psn the peer acknowledged, at most
    std::int64_t _successes = 0;
    bool _local_failure = false;         // this step completed a send with a local error
    std::int64_t _nak_for = -1;          // a refused request's PSN: its NAK must go out this step
    bool _zero_length_refused = false;   // the refused request is a zero-length WRITE or READ
    bool _answer_due = false;            // this step's request must be answered by an ACK or NAK
    std::size_t _acks_sent = 0;          // ACKs and NAKs the last check_sent() saw
    std::size_t _read_responses_sent = 0;
};

}  // namespace rig::fuzz::roce
