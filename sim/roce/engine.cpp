#include "sim/roce/engine.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace rig::sim::roce {

namespace {
bool by_qpn(const rc_qp* a, std::uint32_t qpn) noexcept { return a->qpn() < qpn; }
}  // namespace

void engine::add(rc_qp& qp) {
    std::lock_guard g(_lock);
    auto at = std::lower_bound(_qps.begin(), _qps.end(), qp.qpn(), by_qpn);
    if (at != _qps.end() && (*at)->qpn() == qp.qpn()) {
        throw std::invalid_argument("roce::engine::add: QP " + std::to_string(qp.qpn()) + " is already there");
    }
    _qps.insert(at, &qp);
}

void engine::remove(rc_qp& qp) noexcept {
    std::lock_guard g(_lock);
    std::erase(_qps, &qp);
    _last = nullptr;
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
        } else if (packet.net.dst_gid != _gid) {
            ++_counters.not_for_us;
        } else {
            // frames come in runs for one queue pair: the last one found is tried first
            const std::uint32_t qpn = packet.bth.dest_qp;
            if (_last == nullptr || _last->qpn() != qpn) {
                auto at = std::lower_bound(_qps.begin(), _qps.end(), qpn, by_qpn);
                _last = at == _qps.end() || (*at)->qpn() != qpn ? nullptr : *at;
            }
            if (_last == nullptr) {
                ++_counters.no_qp;
            } else {
                if (copying != _last && copying != nullptr) {
                    copying->finish_copies();   // the writes of this function's memory stay in arrival order
                }
                copying = _last;
                _last->on_frame(packet, now, f->payload_ref != nullptr);
            }
        }
        _port.release(f);
    }
    if (copying != nullptr) {
        copying->finish_copies();   // every write of what came in is done before anything is sent
    }
    // Round robin under backpressure: when the port pauses (the wire is lossless: a full queue
    // at the destination holds the sender back, wire.hpp), the next poll starts with the queue
    // pair after the one whose frames filled it, so that every queue pair gets its turn, as a
    // NIC's send scheduler arbitrates between them; without pauses the order stays.
    const std::size_t n = _qps.size();
    if (_next >= n) {
        _next = 0;
    }
    std::size_t resume = _next;
    for (std::size_t k = 0, i = _next; k < n; ++k, i = i + 1 == n ? 0 : i + 1) {
        const bool was_paused = _port.paused();
        did = _qps[i]->transmit(now) || did;
        if (!was_paused && _port.paused()) {
            resume = i + 1 == n ? 0 : i + 1;
        }
    }
    _next = resume;
    if (n == 0 && _port.paused()) {
        _port.flush(now);   // held back before the last queue pair went
    }
    return did;
}

}  // namespace rig::sim::roce
