// The interrupts of the bnxt firmware model's NQ-type rings (the CREQ, the RoCE NQs, an NQ that
// takes async events): a ring raises its MSI-X vector only when the driver armed it, as a P5
// does (firmware.hpp "interrupts"). Linux 6.12: bnxt_re qplib_res.h bnxt_qplib_ring_nq_db
// (NQ_ARM re-arms, NQ acknowledges without), qplib_rcfw.c bnxt_qplib_service_creq (arms after
// each service that took entries), bnxt_qplib_rcfw_start_irq (the first arm),
// bnxt_qplib_rcfw_stop_irq (NQ masks); bnxt_en bnxt.c bnxt_poll_p5 (BNXT_DB_NQ_ARM_P5).
#include "abi/bnxt/doorbell.hpp"
#include "sim/bnxt/firmware.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;

namespace {

// The entries a ring holds so far, modulo twice its length (the index and its epoch): the CREQ
// counts its own (rcfw_state::creq_producer), other NQs ring::producer.
std::uint32_t produced(const ring& r, bool creq, std::uint32_t creq_producer) {
    return (creq ? creq_producer : r.producer) % (2 * r.length);
}

}  // namespace

bool firmware::nq_doorbell(std::uint64_t value, std::optional<std::uint16_t>& raise) {
    raise.reset();
    const abi::dbc_dbc f = abi::doorbell_fields(value);
    if (f.path != abi::DBC_DBC_PATH_ROCE || f.valid == 0 ||
        (f.type != abi::DBC_DBC_TYPE_NQ_ARM && f.type != abi::DBC_DBC_TYPE_NQ)) {
        return false;
    }
    const auto it = _rings.find(static_cast<std::uint16_t>(f.xid));
    if (it == _rings.end() || it->second.type != abi::RING_ALLOC_REQ_RING_TYPE_NQ) {
        return false;
    }
    ring& r = it->second;
    r.last_doorbell = value;
    if (f.type == abi::DBC_DBC_TYPE_NQ) {
        r.armed = false;   // acknowledged, masked until the next NQ_ARM
        return true;
    }
    // An arm behind the producer (entries the driver has not seen): the interrupt now, as a
    // card's NQ with work pending (else an entry written between the driver's last look and its
    // arm would wait for the next one; the model's judgement, docs/hardware.md).
    const bool creq = _rcfw.enabled && it->first == _rcfw.creq_ring;
    const std::uint32_t at = f.index + (f.epoch != 0 ? r.length : 0);
    if (f.index < r.length && at != produced(r, creq, _rcfw.creq_producer)) {
        r.armed = false;
        if (r.int_mode == abi::RING_ALLOC_REQ_INT_MODE_MSIX) {
            raise = r.logical_id;
        }
        return true;
    }
    r.armed = true;
    return true;
}

std::optional<std::uint16_t> firmware::announce(std::uint16_t id) {
    const auto it = _rings.find(id);
    if (it == _rings.end() || it->second.int_mode != abi::RING_ALLOC_REQ_INT_MODE_MSIX) {
        return std::nullopt;
    }
    ring& r = it->second;
    if (!r.armed) {
        return std::nullopt;
    }
    r.armed = false;   // one interrupt per arm
    return r.logical_id;
}

}  // namespace rig::sim::bnxt
