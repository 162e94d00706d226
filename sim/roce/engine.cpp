#include "sim/roce/engine.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace rig::sim::roce {

// The entry of _qps for `qpn`, or where it would go.
std::vector<engine::numbered>::iterator engine::find(std::uint32_t qpn) noexcept {
    return std::lower_bound(_qps.begin(), _qps.end(), qpn,
                            [](const numbered& e, std::uint32_t n) noexcept { return e.qpn < n; });
}

// The heap order of the timer queue: the earliest due time at the front.
bool engine::due_later(const timer& a, const timer& b) noexcept { return a.due > b.due; }

bool engine::made_for(std::unique_ptr<engine>& e, port& wire_port, const rig::roce::gid& gid) {
    if (!e) {
        e = std::make_unique<engine>(wire_port, gid);
    }
    return e->_gid == gid;
}

void engine::add(rc_qp& qp) {
    std::lock_guard g(_lock);
    const auto at = find(qp.qpn());
    if (at != _qps.end() && at->qpn == qp.qpn()) {
        throw std::invalid_argument("roce::engine::add: QP " + std::to_string(qp.qpn()) + " is already there");
    }
    // room for every queue pair in each list: schedule() and take_turns() then never allocate
    _scheduled.reserve(_qps.size() + 1);
    _turns.reserve(_qps.size() + 1);
    _again.reserve(_qps.size() + 1);
    _timers.reserve(2 * (_qps.size() + 1));
    _qps.insert(at, {qp.qpn(), &qp});
    qp._engine = this;
    qp._timer_queued = clock::time_point::max();
    schedule(qp);
    if (const auto due = qp.next_timer(); due != clock::time_point::max()) {
        queue_timer(qp, due);   // armed before it was added
    }
}

void engine::remove(rc_qp& qp) noexcept {
    std::lock_guard g(_lock);
    std::erase_if(_qps, [&](const numbered& e) { return e.qp == &qp; });
    std::erase(_scheduled, &qp);
    qp._scheduled = false;
    std::erase_if(_timers, [&](const timer& t) { return t.qp == &qp; });
    std::make_heap(_timers.begin(), _timers.end(), due_later);
    qp._timer_queued = clock::time_point::max();
    qp._engine = nullptr;
    _last = nullptr;
}

void engine::schedule(rc_qp& qp) noexcept {
    if (!qp._scheduled) {
        qp._scheduled = true;
        _scheduled.push_back(&qp);   // never allocates: add() reserved a place for each
    }
}

engine_counters engine::counters() const {
    std::lock_guard g(_lock);
    return _counters;
}

// A frame whose payload is by reference (wire.hpp): the decoded payload, which lies where the
// frame's bytes leave room for it, is taken from the sender's memory instead, so that the
// queue pair's copy into this function's memory is the only one. A frame laid out otherwise
// (never one of the model's senders) is materialized and decoded again.
bool engine::by_reference(frame& f, rig::roce::decoded& packet) noexcept {
    if (packet.payload.data() == f.bytes.data() + f.payload_at && packet.payload.size() == f.payload_bytes) {
        packet.payload = {f.payload_ref, f.payload_bytes};
        return true;
    }
    _port.materialize(&f);
    return rig::roce::decode_into(f.data(), packet, rig::roce::icrc_check::skip).has_value();
}

bool engine::poll(clock::time_point now) noexcept {
    std::lock_guard g(_lock);
    bool did = receive(now);
    did = fire_timers(now) || did;
    return take_turns(now) || did;
}

// The frames due, receive_burst at most, each to the queue pair its BTH names, which is then
// scheduled (an ACK to send, or a window opened).
bool engine::receive(clock::time_point now) noexcept {
    bool did = false;
    rc_qp* copying = nullptr;   // the queue pair that may have a copy waiting (rc_qp::finish_copies)
    for (int n = 0; n < receive_burst; ++n) {
        frame* f = _port.receive(now);
        if (f == nullptr) {
            break;
        }
        did = true;
        ++_counters.frames_received;
        // decoded in place (decode_into): no copy of the result per frame
        rig::roce::decoded& packet = _packet;
        if (!rig::roce::decode_into(f->data(), packet,
                                    f->sealed ? rig::roce::icrc_check::verify : rig::roce::icrc_check::skip)) {
            ++_counters.not_roce;
        } else if (f->payload_ref != nullptr && !by_reference(*f, packet)) {
            ++_counters.not_roce;
        } else if (std::memcmp(packet.net.dst_gid.data(), _gid.data(), _gid.size()) != 0) {
            // (memcmp: std::array<std::byte>'s != compares byte by byte, a branch each)
            ++_counters.not_for_us;
        } else {
            // frames come in runs for one queue pair: the last one found is tried first
            const std::uint32_t qpn = packet.bth.dest_qp;
            if (_last == nullptr || _last->qpn() != qpn) {
                const auto at = find(qpn);
                _last = at == _qps.end() || at->qpn != qpn ? nullptr : at->qp;
            }
            if (_last == nullptr) {
                ++_counters.no_qp;
            } else {
                if (copying != _last && copying != nullptr) {
                    copying->finish_copies();   // the writes of this function's memory stay in arrival order
                }
                copying = _last;
                _last->on_frame(packet, now, f->payload_ref != nullptr);
                schedule(*_last);
            }
        }
        _port.release(f);
    }
    if (copying != nullptr) {
        copying->finish_copies();   // every write of what came in is done before anything is sent
    }
    return did;
}

// The scheduled queue pairs transmit in turn. One that did something is scheduled again, behind
// the rest. When the port pauses (the wire is lossless: a full queue at the destination holds
// the sender back, wire.hpp), the ones whose turn has not come keep their places, first, so
// that every queue pair gets its turn, as a NIC's send scheduler arbitrates between them; the
// ones scheduled meanwhile come last.
bool engine::take_turns(clock::time_point now) noexcept {
    if (_port.paused()) {
        _port.flush(now);   // what was held back goes before anything new
        if (_port.paused()) {
            return false;
        }
    }
    _turns.swap(_scheduled);   // schedule() appends to the empty _scheduled meanwhile
    _again.clear();
    bool did = false;
    std::size_t taken = 0;
    for (; taken < _turns.size() && !_port.paused(); ++taken) {
        // The queue pairs whose turns come next: with many, each one's state and next entry
        // were cold when its turn came (bench-scale at 1024). Asked for a turn or two ahead.
        if (taken + 2 < _turns.size()) {
            __builtin_prefetch(_turns[taken + 2]);
        }
        if (taken + 1 < _turns.size()) {
            _turns[taken + 1]->prefetch_next_entry();
        }
        rc_qp* qp = _turns[taken];
        qp->_scheduled = false;
        if (qp->transmit(now)) {
            did = true;
            if (!qp->_scheduled) {
                qp->_scheduled = true;
                _again.push_back(qp);
            }
        }
    }
    // the next schedule: the turns not taken, the ones going again, the ones scheduled
    // meanwhile; each list has room for every queue pair (add), and each queue pair is in one
    _turns.erase(_turns.begin(), _turns.begin() + static_cast<std::ptrdiff_t>(taken));
    _turns.insert(_turns.end(), _again.begin(), _again.end());
    _turns.insert(_turns.end(), _scheduled.begin(), _scheduled.end());
    _scheduled.swap(_turns);
    _turns.clear();
    return did;
}

void engine::arm(rc_qp& qp, clock::time_point due) noexcept {
    if (due < qp._timer_queued) {
        queue_timer(qp, due);   // earlier than its live entry: that one goes stale
    }
}

void engine::queue_timer(rc_qp& qp, clock::time_point due) noexcept {
    if (_timers.size() == _timers.capacity()) {
        std::erase_if(_timers, [](const timer& t) { return t.due != t.qp->_timer_queued; });
        std::make_heap(_timers.begin(), _timers.end(), due_later);
    }
    _timers.push_back({due, &qp});   // room: add() reserved two a queue pair, one is live at most
    std::push_heap(_timers.begin(), _timers.end(), due_later);
    qp._timer_queued = due;
}

// The timers due: each one's queue pair is scheduled, and its transmit (rc_qp::requester_timers,
// send_requests) acts on them in this poll's turns. An entry whose queue pair re-armed later
// since is queued again at the new due time.
bool engine::fire_timers(clock::time_point now) noexcept {
    bool did = false;
    while (!_timers.empty() && _timers.front().due <= now) {
        std::pop_heap(_timers.begin(), _timers.end(), due_later);
        const timer t = _timers.back();
        _timers.pop_back();
        rc_qp& qp = *t.qp;
        if (t.due != qp._timer_queued) {
            continue;   // stale: an earlier arm overtook it
        }
        qp._timer_queued = clock::time_point::max();
        if (const auto next = qp.next_timer(); next > now) {
            if (next != clock::time_point::max()) {
                queue_timer(qp, next);   // re-armed later, or stopped (max: nothing to queue)
            }
            continue;
        }
        schedule(qp);
        did = true;
    }
    return did;
}

}  // namespace rig::sim::roce
