// What the bnxt function model's firmware tells the driver by itself, and what it hears on the
// trapped privileged doorbell page (the NQ arms: the CREQ and an async event NQ raise their
// vectors only when armed, interrupts.cpp), the MSI-X messages, and the firmware's reset notice (RESET_NOTIFY, the
// fault plan's fatal) with the firmware's reset after it. Linux 6.12 bnxt.c
// bnxt_async_event_process (RESET_NOTIFY: fw_reset_min_dsecs / max_dsecs, FW_FATAL_COND) and
// bnxt_fw_reset_task (the driver waits the minimum, then asks the firmware again).
#include <algorithm>
#include <atomic>

#include "abi/bits.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/bnxt/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

std::uint64_t function_model::privileged_page() const noexcept {
    return std::uint64_t{_fw.options().legacy_l2_db_size_kb} << 10;
}

// A store into the trapped privileged page (BAR2 + db_offset): each 8-byte word it completes (its
// last byte written: a 64-bit store, or the high half of two 32-bit ones) is one doorbell, taken
// now and in order, as a card's doorbell FIFO takes it: NQ doorbells (the CREQ's and the NQs'
// arms) are the firmware's, the rest the data path's (SQ/RQ/CQ doorbells of queues on the
// privileged DPI, CQ_ARMENA), dropped without one. bnxt_re writes its CQ_ARMENA to the CREQ's
// own address (qplib_res.c priv_db, qplib_rcfw.c bnxt_qplib_map_creq_db: both db_offset), so a
// polled word would lose the CREQ's arm under it.
void function_model::privileged_write_locked(std::uint64_t offset, std::size_t bytes) {
    constexpr std::uint64_t page = 4096;
    const std::uint64_t base = privileged_page();
    if (offset + bytes <= base || offset >= base + page || base + page > _bar2.size()) {
        return;
    }
    const std::uint64_t first = std::max(offset, base) & ~std::uint64_t{7};
    const std::uint64_t end = std::min(offset + bytes, base + page);
    for (std::uint64_t w = first; w < end; w += 8) {
        if (offset + bytes < w + 8) {
            continue;   // its high half is still to come
        }
        std::atomic_ref<std::uint64_t> cell(*reinterpret_cast<std::uint64_t*>(_bar2.data() + w));
        const std::uint64_t raw = cell.exchange(0, std::memory_order_acquire);
        if (raw == 0 || _server == nullptr) {
            continue;
        }
        // the driver's little-endian store
        const auto value = rig::abi::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(&raw));
        std::optional<std::uint16_t> now;
        if (_fw.nq_doorbell(value, now)) {
            if (now) {
                raise_locked(*now);
            }
        } else if (_datapath) {
            _datapath->take_doorbell(0, value);
        } else {
            ++_ignored;
        }
    }
}

void function_model::raise_locked(std::uint16_t vector) {
    if (_server != nullptr && vector < _msix.vectors()) {
        _msix.raise(*_server, vector);
        ++_raised[vector];
    }
}

// RESET_NOTIFY as Thor firmware sends it before its reset, then silence on both channels (the
// HWRM and RoCE firmware are down) until the minimum wait passes.
bool function_model::reset_notice_locked(std::uint8_t reason) {
    bool written = false;
    if (_server != nullptr && !_dead) {
        const auto d = _fw.reset_notify(reason, _options.reset_min_wait_ds, _options.reset_max_wait_ds, &_server->dma());
        if (d.vector) {
            raise_locked(*d.vector);
        }
        written = d.written;
    }
    _silent = true;
    _firmware_back = clock::now() + std::chrono::milliseconds(100) * _options.reset_min_wait_ds;
    log().warn("bnxt function {}: firmware reset notice (reason {}){}; the firmware is in reset for {} ms",
               _options.function_index, reason, written ? "" : " not delivered (no async event ring registered for it)",
               100 * _options.reset_min_wait_ds);
    return written;
}

// The firmware's own reset is over: it comes back as after a function reset (its objects and
// context memory gone, DEV_NOT_RDY for a while); the PCI function, its MSI-X and the fault plan
// (struck already) are as they were.
void function_model::firmware_back_locked() {
    report_ledger("firmware_reset");
    _fw.reset();
    ++_resets;
    _firmware_back.reset();
    _silent = false;
    _pending.reset();
    _rcfw_kick = false;
    log().info("bnxt function {}: the firmware is back after its reset", _options.function_index);
}

bool function_model::reset_notice(std::uint8_t reason) {
    bool written = false;
    {
        std::lock_guard g(_lock);
        written = reset_notice_locked(reason);
    }
    _wake.notify_all();   // the firmware thread times the firmware's return
    return written;
}

std::uint64_t function_model::interrupts(std::uint16_t vector) const {
    std::lock_guard g(_lock);
    const auto it = _raised.find(vector);
    return it == _raised.end() ? 0 : it->second;
}

bool function_model::in_firmware_reset() const {
    std::lock_guard g(_lock);
    return _firmware_back.has_value();
}

}  // namespace rig::sim::bnxt
