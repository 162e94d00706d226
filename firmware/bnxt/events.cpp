// The RoCE event thread (events.hpp): the NQ's CQ notifications, the CREQ's interrupts, health.
#include "firmware/bnxt/events.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>
#include <cstring>
#include <string>
#include <utility>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/hwrm_cmds.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::bnxt {

namespace {

constexpr std::size_t nq_entry_bytes = 16;
constexpr std::size_t nq_arm_word = 8;   // word 1 of the privileged page (docs/bnxt-data-path.md)

enum counter : std::size_t { interrupts, notifications, other_entries, arms, health_checks, async_events };

}  // namespace

events::events(driver::function& fn, hwrm_channel& hwrm, rcfw_channel& rcfw, const nq_ring& nq, int creq_eventfd,
               event_handlers handlers, std::chrono::milliseconds health_interval)
    : _fn(fn), _hwrm(hwrm), _rcfw(rcfw), _nq(nq), _creq_fd(creq_eventfd), _handlers(std::move(handlers)),
      _health_interval(health_interval) {}

result<std::unique_ptr<events>> events::start(driver::function& fn, hwrm_channel& hwrm, rcfw_channel& rcfw,
                                              const nq_ring& nq, int creq_eventfd, event_handlers handlers,
                                              std::chrono::milliseconds health_interval) {
    if (nq.memory == nullptr || nq.entries == 0 || (nq.entries & (nq.entries - 1)) != 0 || nq.eventfd < 0 ||
        health_interval.count() <= 0) {
        throw std::invalid_argument("bnxt events: an NQ of " + std::to_string(nq.entries) +
                                    " entries, eventfd " + std::to_string(nq.eventfd) + ", health interval " +
                                    std::to_string(health_interval.count()) + " ms");
    }
    std::unique_ptr<events> ev(new events(fn, hwrm, rcfw, nq, creq_eventfd, std::move(handlers), health_interval));
    ev->_wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ev->_wake_fd < 0) {
        return std::unexpected(plain_error(error_kind::transport, std::string("eventfd: ") + std::strerror(errno)));
    }
    // The arm doorbell: BAR2 mapped (one 64-bit store, as on a card), else region writes.
    if (auto bar2 = fn.map_bar(driver::region::bar2, driver::caching::uncached);
        bar2 && bar2->covers(nq.doorbell_offset + nq_arm_word, 8)) {
        ev->_doorbell = bar2->base + nq.doorbell_offset + nq_arm_word;
    }
    if (creq_eventfd >= 0) {
        rcfw.serve();   // the CREQ's interrupts are the thread's from now on
    }
    ev->arm_nq();       // the first arm (bnxt_qplib_enable_nq -> bnxt_qplib_ring_nq_db, arm)
    ev->_thread = std::thread([p = ev.get()] { p->run(); });
    return ev;
}

events::~events() {
    stop();
    if (_wake_fd >= 0) {
        ::close(_wake_fd);
    }
}

void events::stop() {
    if (_stopping.exchange(true)) {
        return;
    }
    const std::uint64_t one = 1;
    static_cast<void>(::write(_wake_fd, &one, sizeof one));
    if (_thread.joinable()) {
        _thread.join();
    }
}

event_counts events::counts() const {
    const auto at = [&](counter c) { return _counts[c].load(std::memory_order_relaxed); };
    return {at(interrupts), at(notifications), at(other_entries), at(arms), at(health_checks), at(async_events)};
}

std::optional<bool> events::link_up() const noexcept {
    const int l = _link.load(std::memory_order_acquire);
    return l < 0 ? std::nullopt : std::optional<bool>(l == 1);
}

bool events::take(int fd) {
    std::uint64_t n = 0;
    return ::read(fd, &n, sizeof n) == static_cast<ssize_t>(sizeof n) && n != 0;
}

// Wait for an interrupt (or the health interval), take the NQ and the CREQ, look at health.
void events::run() {
    std::array<pollfd, 3> fds{pollfd{_nq.eventfd, POLLIN, 0}, pollfd{_wake_fd, POLLIN, 0},
                              pollfd{_creq_fd, POLLIN, 0}};
    const nfds_t nfds = _creq_fd >= 0 ? 3 : 2;
    auto next_check = clock::now() + _health_interval;
    while (!_stopping.load(std::memory_order_acquire)) {
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_check - clock::now()).count();
        const int n = ::poll(fds.data(), nfds, static_cast<int>(std::clamp<std::int64_t>(wait, 0, 60000)));
        if (_stopping.load(std::memory_order_acquire)) {
            break;
        }
        if (n < 0 && errno != EINTR) {
            declare_fatal(plain_error(error_kind::fatal, std::string("poll on the MSI-X eventfds: ") + std::strerror(errno)));
            return;
        }
        if (n > 0 && ((fds[0].revents | (nfds == 3 ? fds[2].revents : 0)) & (POLLNVAL | POLLERR)) != 0) {
            declare_fatal(plain_error(error_kind::fatal, "an MSI-X eventfd was closed while events ran"));
            return;
        }
        if (n > 0 && (fds[0].revents & POLLIN) != 0 && take(_nq.eventfd)) {
            _counts[interrupts].fetch_add(1, std::memory_order_relaxed);
        }
        if (n > 0 && nfds == 3 && (fds[2].revents & POLLIN) != 0) {
            _rcfw.service(take(_creq_fd));
        }
        // Taken on every wake, interrupt or not: an entry whose interrupt was lost is found at
        // the next health interval at the latest.
        service_nq();
        if (_fatal.load(std::memory_order_acquire)) {
            return;   // a reset notice: the thread takes no more events
        }
        if (clock::now() >= next_check) {
            next_check = clock::now() + _health_interval;
            if (!healthy()) {
                return;
            }
        }
    }
}

// bnxt_qplib_service_nq: every entry whose v bit is the pass's phase, then NQ_ARM at the new
// consumer (re-armed after each pass that took entries or followed an interrupt).
void events::service_nq() {
    bool took = false;
    for (;;) {
        std::byte* e = _nq.memory + (_cons % _nq.entries) * nq_entry_bytes;
        const auto v = std::atomic_ref<std::byte>(e[abi::nqe_v_byte]).load(std::memory_order_acquire);
        if (!abi::nqe_is_new(v, _cons, _nq.entries)) {
            break;
        }
        ::rig::abi::barrier::from_device();   // the entry's other bytes after its valid bit
        std::array<std::byte, nq_entry_bytes> entry{};
        std::memcpy(entry.data(), e, entry.size());
        ++_cons;
        took = true;
        const auto cn = abi::decode<abi::nq_cn>(std::span<const std::byte>(entry));
        if (cn && cn->type == abi::ASYNC_EVENT_CMPL_TYPE_HWRM_ASYNC_EVENT) {
            _counts[async_events].fetch_add(1, std::memory_order_relaxed);
            on_async_event(entry);   // bnxt_poll_p5: bnxt_hwrm_handler
            if (_fatal.load(std::memory_order_acquire)) {
                return;   // the firmware is resetting: nothing more is taken (nor armed)
            }
            continue;
        }
        if (!cn || cn->type != abi::NQ_CN_TYPE_CQ_NOTIFICATION) {
            _counts[other_entries].fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        _counts[notifications].fetch_add(1, std::memory_order_relaxed);
        if (_handlers.completion) {
            _handlers.completion(std::uint64_t{cn->cq_handle_high} << 32 | cn->cq_handle_low);
        }
    }
    if (took) {
        arm_nq();
    }
}

// NQ_ARM: the NQ's ring id, the consumer mod entries, its pass parity (bnxt_qplib_ring_nq_db).
void events::arm_nq() {
    const std::uint64_t db = abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, _nq.ring_id,
                                           static_cast<std::uint32_t>(_cons % _nq.entries),
                                           ((_cons / _nq.entries) & 1) != 0);
    _counts[arms].fetch_add(1, std::memory_order_relaxed);
    if (_doorbell != nullptr) {
        ::rig::abi::barrier::to_device();   // the entries' consumption before the device reads it
        std::uint64_t le = 0;
        ::rig::abi::store_le<std::uint64_t>(reinterpret_cast<std::byte*>(&le), db);
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(_doorbell)).store(le, std::memory_order_relaxed);
        return;
    }
    std::array<std::byte, 8> b{};
    ::rig::abi::store_le<std::uint64_t>(b.data(), db);
    if (auto r = _fn.region_write(driver::region::bar2, _nq.doorbell_offset + nq_arm_word, b); !r && !_doorbell_warned) {
        _doorbell_warned = true;
        log().warn("bnxt events on {}: NQ doorbell: {}", _fn.name(), r.error().message);
    }
}

// A channel that stopped answering, or a function reading all ones (bnxt_en's PCI error path
// finds the card gone the same way: pci_channel_offline / a config read of 0xffff).
bool events::healthy() {
    _counts[health_checks].fetch_add(1, std::memory_order_relaxed);
    if (auto f = _hwrm.failure()) {
        declare_fatal(std::move(*f));
        return false;
    }
    if (auto f = _rcfw.failure()) {
        declare_fatal(std::move(*f));
        return false;
    }
    auto vendor = _fn.config_read16(0x00);
    if (!vendor || *vendor == 0xffff) {
        declare_fatal(plain_error(error_kind::fatal, "the function reads all ones (vendor ID 0xffff): it is gone"));
        return false;
    }
    return true;
}

void events::declare_fatal(error e) {
    e.kind = error_kind::fatal;
    _hwrm.fail(e);
    _rcfw.fail(e);
    if (!_fatal.exchange(true, std::memory_order_acq_rel)) {
        log().warn("bnxt events on {}: {}", _fn.name(), e.message);
        if (_handlers.fatal) {
            _handlers.fatal(e);
        }
    }
}

}  // namespace rig::firmware::bnxt
