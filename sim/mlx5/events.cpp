// The event engine: EQEs written into the driver's event queues, the MSI-X vector of an armed
// EQ, and the EQ doorbells in the UAR pages (kernel eq.c, device.h struct mlx5_eqe;
// rdma-core mlx5_vfio.c).
//
// An EQ (eq_object, created by CREATE_EQ in objects.cpp) is a ring of 2^log_eq_size 64-byte
// EQEs in client memory. The firmware writes entry `pi & (nent - 1)` with owner bit
// (pi >> log_eq_size) & 1 (the buffer starts with owner 1, the first pass writes 0), the owner
// byte last; the EQ then signals its `intr` vector only if the driver armed it, and is disarmed
// until the driver arms it again. The driver reports its consumer index by writing
// be32((eqn << 24) | ci) to UAR + 0x48 (update) or UAR + 0x40 (update and arm).
//
// Where those doorbells are seen depends on the page (function_model.hpp, BAR0):
//  - on a trapped UAR page (the first options.trapped_uar_pages ones) every write arrives as a
//    REGION_WRITE and is applied at once, in order (uar_write): a card takes each doorbell
//    store, and the kernel rings all its EQs through the one doorbell word of one UAR page
//    (eq.c create_map_eq: eq->doorbell = priv->bfreg.up->map + MLX5_EQ_DOORBELL_OFFSET, eqc
//    uar_page = that page's index), from the IRQ handlers of different EQs. Polled, two arms
//    between two looks would leave one EQ disarmed for good. Other offsets of a trapped page
//    (CQ doorbell 0x20, BlueFlame registers from 0x800) are stored into the page's memory as a
//    mapped write would be, where the data path polls them;
//  - on a shared page the word is polled. Only the last value written between two looks is
//    seen: safe for one EQ per page (the CI only moves forward and the last write to +0x40 is
//    itself an arm), not for two EQs sharing the word. A word the firmware has read is reset
//    to all ones, a value no driver writes (EQ 255 at CI 0xffffff), so a rewrite of the same
//    value (a new EQ with a reused number) is still seen.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "abi/mlx5/doorbell.hpp"
#include "abi/mlx5/ifc/eqe.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;
namespace vu = rig::sim::vfio_user;

namespace {
constexpr std::size_t eq_arm_doorbell = ::rig::mlx5::abi::uar::eq_doorbell_arm;        // update CI and arm (lib/eq.h)
constexpr std::size_t eq_update_doorbell = ::rig::mlx5::abi::uar::eq_doorbell_no_arm;  // update CI only
constexpr std::uint32_t doorbell_unwritten = 0xffffffffu;
constexpr std::uint32_t ci_mask = 0xffffff;  // the doorbell carries 24 bits of consumer index
constexpr std::size_t eqe_bytes = ifc::eqe::size_bytes;
constexpr auto health_async_eq_overrun =
    static_cast<std::uint8_t>(ifc::init_seg::health_syndrome::asynchronous_eq_buf_overrun);  // 0xc (health.c)

std::uint8_t as_u8(ifc::event_type t) {
    return static_cast<std::uint8_t>(t);
}
}  // namespace

void function_model::kick() {
    {
        std::lock_guard g(_lock);
        _kicked = true;
    }
    _wake.notify_one();
}

void function_model::clear_uar_pages() {
    std::fill(_bar0.data() + _layout.uar_begin, _bar0.data() + _layout.uar_end, std::byte{0});
    for (std::uint64_t at = _layout.uar_begin; at < _layout.uar_end; at += uar_page_bytes) {
        std::memset(_bar0.data() + at + eq_arm_doorbell, 0xff, 4);
        std::memset(_bar0.data() + at + eq_update_doorbell, 0xff, 4);
    }
}

bool function_model::post_event(std::uint8_t type, std::uint8_t sub_type, std::span<const std::byte> data) {
    std::lock_guard g(_lock);
    return post_event_locked(type, sub_type, data);
}

bool function_model::post_event_locked(std::uint8_t type, std::uint8_t sub_type, std::span<const std::byte> data) {
    if (_fatal || _dead) {
        return false;
    }
    for (auto& [eqn, eq] : _fw.eqs()) {  // by EQ number: the lowest subscribed one takes it
        if (eq.subscribed(type)) {
            return post_to_eq(eq, type, sub_type, data);
        }
    }
    log().debug("mlx5: event {:#x} ({}) dropped: no EQ subscribes to it", type,
                ifc::to_string(static_cast<ifc::event_type>(type)));
    return false;
}

bool function_model::post_to_eq(eq_object& eq, std::uint8_t type, std::uint8_t sub_type,
                                std::span<const std::byte> data) {
    if (_fatal || _dead) {
        return false;
    }
    const std::uint32_t nent = 1u << eq.log_eq_size;
    // Every doorbell the driver wrote before this EQE applies to it, as on a card, where an MMIO
    // write reaches the device at once: the consumer index it frees room by, and an arm that
    // makes this EQE signal (the firmware thread's watch of untrapped pages lags by its back-off;
    // a trapped page's doorbells were applied as they came, and the look allocates: not per
    // completion event on the data path for those).
    if (in_memory(eq)) {
        poll_eq_doorbells();
    }
    if (((eq.producer_index - eq.consumer_index) & ci_mask) >= nent) {
        // the next EQE would overwrite one the driver has not consumed (kernel health.c: 0xc)
        log().error("mlx5: EQ {} overrun (producer {:#x}, consumer {:#x}, {} entries)", eq.eqn,
                    eq.producer_index, eq.consumer_index, nent);
        fatal_locked(health_async_eq_overrun, 0);
        return false;
    }
    std::array<std::byte, eqe_bytes> e{};
    abi::set<ifc::eqe::event_type>(e, type);
    abi::set<ifc::eqe::event_sub_type>(e, sub_type);
    const std::size_t data_at = ifc::eqe::event_data.whole().byte_offset();
    std::memcpy(e.data() + data_at, data.data(), std::min(data.size(), ifc::event_auto::size_bytes));
    abi::set<ifc::eqe::owner>(e, (eq.producer_index >> eq.log_eq_size) & 1);

    const auto place = place_in_buffer(eq.pas, eq.log_page_size, eq.page_offset,
                                       std::uint64_t{eq.producer_index & (nent - 1)} * eqe_bytes);
    if (_server == nullptr || !place) {
        log().error("mlx5: EQ {} has no buffer page for entry {:#x}", eq.eqn, eq.producer_index);
        return false;
    }
    const std::uint64_t iova = place->iova;
    vu::dma_space& dma = _server->dma();
    const std::size_t owner_at = ifc::eqe::owner.byte_offset();
    // the entry, then its owner byte: the driver must never see a new owner with old contents
    if (!dma.write(iova, std::span(e).first(owner_at)) || !dma.write(iova + owner_at, std::span(e).subspan(owner_at))) {
        log().error("mlx5: EQE {:#x} of EQ {} at IOVA {:#x} is outside the driver's DMA mappings", eq.producer_index,
                    eq.eqn, iova);
        return false;
    }
    eq.producer_index = (eq.producer_index + 1) & ci_mask;
    ++_events;
    if (in_memory(eq)) {
        _eq_answer_due = true;
        _kicked = true;
        _wake.notify_one();
    }
    if (eq.armed) {
        interrupt(eq);
    }
    return true;
}

// One interrupt per arm (kernel lib/eq.h eq_update_ci): the EQ is disarmed, its MSI-X vector
// raised (withheld ones are counted but not sent: withhold_interrupts).
void function_model::interrupt(eq_object& eq) {
    eq.armed = false;
    ++_interrupts;
    if (!_interrupts_withheld) {
        _server->trigger(vu::irq::msix, eq.intr);
    }
}

void function_model::withhold_interrupts(bool on) {
    std::lock_guard g(_lock);
    _interrupts_withheld = on;
}

// Whether some EQ's doorbells lie in an untrapped UAR page, which only a look at the page's
// memory finds (a trapped page's writes are applied as they come: uar_write).
bool function_model::in_memory(const eq_object& eq) const {
    const std::uint64_t at = std::uint64_t{eq.uar_page} * uar_page_bytes;
    return at >= _layout.trapped_end && at < _layout.uar_end;
}
bool function_model::eq_doorbells_in_memory() const {
    return std::any_of(_fw.eqs().begin(), _fw.eqs().end(), [&](const auto& e) { return in_memory(e.second); });
}

bool function_model::poll_eq_doorbells() {
    if (_dead) {
        return false;
    }
    bool seen = false;
    std::vector<std::uint32_t> pages;
    for (const auto& [eqn, eq] : _fw.eqs()) {
        if (std::find(pages.begin(), pages.end(), eq.uar_page) == pages.end()) {
            pages.push_back(eq.uar_page);
        }
    }
    for (const std::uint32_t page : pages) {
        const std::uint64_t at = std::uint64_t{page} * uar_page_bytes;
        if (at < _layout.trapped_end || at >= _layout.uar_end) {
            continue;  // outside the UARs, or trapped: its writes were applied as they came
        }
        // update first, arm last: an arm applies to the CI written with it
        for (const std::size_t word : {eq_update_doorbell, eq_arm_doorbell}) {
            auto* cell = reinterpret_cast<std::uint32_t*>(_bar0.data() + at + word);
            const std::uint32_t raw = std::atomic_ref<std::uint32_t>(*cell).exchange(doorbell_unwritten);
            if (raw == doorbell_unwritten) {
                continue;
            }
            seen = true;
            apply_eq_doorbell(page, word == eq_arm_doorbell,
                              abi::load_be<std::uint32_t>(reinterpret_cast<const std::byte*>(&raw)));
        }
    }
    return seen;
}

// One EQ doorbell value, be32((eqn << 24) | ci), written to `page` (+0x40 when `arm`).
void function_model::apply_eq_doorbell(std::uint32_t page, bool arm, std::uint32_t v) {
    auto it = _fw.eqs().find(v >> 24);
    if (it == _fw.eqs().end() || it->second.uar_page != page) {
        log().warn("mlx5: EQ doorbell {:#x} in UAR {} names no EQ of that UAR: ignored", v, page);
        return;
    }
    eq_object& eq = it->second;
    eq.consumer_index = v & ci_mask;
    if (arm) {
        eq.armed = true;
        if (eq.producer_index != eq.consumer_index && _server != nullptr) {
            interrupt(eq);   // armed with entries still unconsumed: the EQ signals at once
        }
    }
}

// A write to a trapped UAR page (header comment), dword by dword: the EQ doorbell words are
// applied now; every other byte lands in the page's memory. 4- and 8-byte aligned pieces are
// stored whole (atomically), so the data path never reads half a doorbell.
void function_model::uar_write(std::uint64_t offset, std::span<const std::byte> in) {
    const auto page = static_cast<std::uint32_t>(offset / uar_page_bytes);
    std::size_t i = 0;
    while (i < in.size()) {
        const std::uint64_t at = offset + i;
        const std::size_t word = at % uar_page_bytes;
        const std::size_t left = in.size() - i;
        if ((word == eq_arm_doorbell || word == eq_update_doorbell) && left >= 4) {
            if (!_fatal && !_dead) {
                apply_eq_doorbell(page, word == eq_arm_doorbell, abi::load_be<std::uint32_t>(in.data() + i));
            }
            i += 4;
            continue;
        }
        std::byte* cell = _bar0.data() + at;
        if (at % 8 == 0 && left >= 8) {  // no aligned qword but those two meets an EQ word
            std::uint64_t v;
            std::memcpy(&v, in.data() + i, 8);
            std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(cell)).store(v);
            i += 8;
        } else if (at % 4 == 0 && left >= 4) {
            std::uint32_t v;
            std::memcpy(&v, in.data() + i, 4);
            std::atomic_ref<std::uint32_t>(*reinterpret_cast<std::uint32_t*>(cell)).store(v);
            i += 4;
        } else {
            *cell = in[i];
            i += 1;
        }
    }
}

bool function_model::request_pages(std::int32_t n) {
    std::array<std::byte, ifc::pages_req_event::size_bytes> data{};
    abi::set<ifc::pages_req_event::function_id>(data, 0);
    abi::set<ifc::pages_req_event::num_pages>(data, static_cast<std::uint32_t>(n));
    return post_event(as_u8(ifc::event_type::page_request), 0, data);
}

bool function_model::set_port_state(bool up) {
    std::array<std::byte, ifc::port_state_change_event::size_bytes> data{};
    abi::set<ifc::port_state_change_event::port_num>(data, 1);
    std::lock_guard g(_lock);
    _fw.set_link_up(up);  // QUERY_VPORT_STATE reports it too
    const auto sub = up ? ifc::port_change_subtype::active : ifc::port_change_subtype::down;
    return post_event_locked(as_u8(ifc::event_type::port_change), static_cast<std::uint8_t>(sub), data);
}

bool function_model::post_completion(std::uint32_t cqn) {
    std::array<std::byte, ifc::comp_event::size_bytes> data{};
    abi::set<ifc::comp_event::cq_number>(data, cqn & ci_mask);
    std::lock_guard g(_lock);
    const cq_object* cq = _fw.cq(cqn);
    if (cq == nullptr) {
        return false;
    }
    auto it = _fw.eqs().find(cq->eqn);  // a completion goes to the CQ's own EQ, whatever its mask
    return it != _fw.eqs().end() && post_to_eq(it->second, as_u8(ifc::event_type::comp), 0, data);
}

bool function_model::post_cq_error(std::uint32_t cqn, std::uint8_t syndrome) {
    std::array<std::byte, ifc::cq_error::size_bytes> data{};
    abi::set<ifc::cq_error::cqn>(data, cqn & ci_mask);
    abi::set<ifc::cq_error::syndrome>(data, syndrome);
    return post_event(as_u8(ifc::event_type::cq_error), 0, data);
}

bool function_model::post_qp_event(std::uint32_t qpn, std::uint8_t event_type) {
    std::lock_guard g(_lock);
    return post_qp_event_locked(qpn, event_type);
}

bool function_model::post_qp_event_locked(std::uint32_t qpn, std::uint8_t event_type) {
    std::array<std::byte, ifc::qp_events::size_bytes> data{};
    abi::set<ifc::qp_events::type>(data, 0);  // the object is a QP (not an RQ or SQ)
    abi::set<ifc::qp_events::qpn_rqn_sqn>(data, qpn & ci_mask);
    return post_event_locked(event_type, 0, data);
}

}  // namespace rig::sim::mlx5
