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

bool engine::poll(clock::time_point now) noexcept {
    std::lock_guard g(_lock);
    bool did = false;
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
                _last->on_frame(packet, now);
            }
        }
        _port.release(f);
    }
    for (rc_qp* qp : _qps) {
        did = qp->transmit(now) || did;
    }
    return did;
}

}  // namespace rig::sim::roce
