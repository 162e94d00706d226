#pragma once
// One function's RoCE engine: its wire port and its RC queue pairs. A NIC model's per-function
// thread calls poll(now) in a loop: it takes the frames due on the port, checks and decodes
// them (a frame that is not a good RoCEv2 packet for us is dropped silently, spec 9.6 / A17),
// hands each to the queue pair its BTH names (a payload by reference, wire.hpp, as the span of
// the sender's memory it points to: the queue pair's copy into this function's memory is the
// only one), lets the queue pairs finish the copies they left waiting, then lets the queue
// pairs that have something to send transmit, in turn. poll returns whether anything happened,
// so an idle thread can back off.
//
// The schedule: a queue pair is scheduled when a frame reaches it, when something is posted to
// it, and at RTS and ERROR (rc_qp::schedule); its transmit goes once a poll while it keeps doing
// something, then it leaves the schedule. Its timers (ack timeout, RNR wait) are in a queue
// ordered by due time (arm): a poll looks at the queue's head only, and schedules the queue pairs
// whose timer is due; a timer re-armed later than its entry says (every acknowledgement moves
// the ack timer on) is queued again when that entry comes due, not at each re-arm. So a poll
// costs what moves and what is due, not the number of queue pairs: with 1024 of them, walking
// each one every poll cost more than the messages (bench-scale, issue 17), and a sweep of 32 a
// poll in turn still cost 10 % of the model core there. A timer fires in the first poll at or
// after its deadline, however many queue pairs there are.
//
// Queue pairs are added and removed on the control path, by the polling thread or while it is
// stopped; the table is locked once per poll, not per packet. Only the polling thread schedules.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "abi/roce/packet.hpp"
#include "sim/roce/rc_qp.hpp"
#include "sim/roce/wire.hpp"

namespace rig::sim::roce {

struct engine_counters {
    std::uint64_t frames_received = 0;
    std::uint64_t not_roce = 0;     // decode refused (not RoCEv2, bad ICRC, ...)
    std::uint64_t not_for_us = 0;   // destination GID not ours
    std::uint64_t no_qp = 0;        // destination QP unknown
};

class engine {
public:
    static constexpr int receive_burst = 256;  // frames one poll takes at most

    engine(port& wire_port, const rig::roce::gid& gid) noexcept : _port(wire_port), _gid(gid) {}
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    // A function's engine is made with the GID of its first queue pair that needs one, and
    // receives the frames for that GID alone: `e` is made for `gid` when there is none; false
    // when it was made for another (that queue pair's frames are not received; the caller warns).
    static bool made_for(std::unique_ptr<engine>& e, port& wire_port, const rig::roce::gid& gid);

    // Misuse (a queue pair of this QPN already added) throws std::invalid_argument.
    void add(rc_qp& qp);
    void remove(rc_qp& qp) noexcept;

    bool poll(clock::time_point now) noexcept;
    engine_counters counters() const;

    // The polling thread: `qp` (one of the table's) has something to send; its transmit goes in
    // the next poll's turns (rc_qp::schedule calls it).
    void schedule(rc_qp& qp) noexcept;
    // The polling thread: `qp` (one of the table's) has a timer that runs until `due`
    // (rc_qp::timer_armed). Queued unless an entry of it due no later is there already.
    void arm(rc_qp& qp, clock::time_point due) noexcept;

private:
    struct numbered {   // an entry of _qps
        std::uint32_t qpn;
        rc_qp* qp;
    };
    std::vector<numbered>::iterator find(std::uint32_t qpn) noexcept;
    bool by_reference(frame& f, rig::roce::decoded& packet) noexcept;
    bool receive(clock::time_point now) noexcept;
    bool take_turns(clock::time_point now) noexcept;
    bool fire_timers(clock::time_point now) noexcept;
    void queue_timer(rc_qp& qp, clock::time_point due) noexcept;
    struct timer;
    static bool due_later(const timer& a, const timer& b) noexcept;

    port& _port;
    const rig::roce::gid _gid;
    mutable std::mutex _lock;
    // Sorted by QPN, which each entry holds beside its queue pair: a frame's lookup reads this
    // array alone, not the queue pairs its binary search passes (a cache miss each at 1024).
    std::vector<numbered> _qps;
    rc_qp* _last = nullptr;     // the queue pair the last frame went to (one of _qps)
    // The schedule, in turn order, and two lists take_turns() reuses (capacity kept: the data
    // path allocates nothing once warm). Every queue pair in one has rc_qp::_scheduled set.
    std::vector<rc_qp*> _scheduled, _turns, _again;
    // The timer queue: a min-heap on due time. An entry is live when its due time is its queue
    // pair's rc_qp::_timer_queued; the others were overtaken by an earlier arm and are passed
    // over when they come up. Room for two entries a queue pair (add); when it is full the
    // stale ones are dropped, which leaves at most one a queue pair: arm never allocates.
    struct timer {
        clock::time_point due;
        rc_qp* qp;
    };
    std::vector<timer> _timers;
    rig::roce::decoded _packet; // the frame being handled, decoded
    engine_counters _counters;
};

}  // namespace rig::sim::roce
