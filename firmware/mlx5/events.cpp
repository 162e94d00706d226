#include "firmware/mlx5/events.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <exception>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "abi/mlx5/ifc/eqe.hpp"
#include "firmware/log.hpp"
#include "firmware/mlx5/objects.hpp"

namespace rig::firmware::mlx5 {

namespace {

namespace barrier = ::rig::abi::barrier;

using ifc::event_type;
constexpr std::size_t eqe_bytes = ifc::eqe::size_bytes;
static_assert(eqe_bytes == 64);
constexpr std::size_t owner_byte = ifc::eqe::owner.byte_offset();
static_assert(owner_byte == 0x3f);

// UAR doorbells of an EQ (kernel lib/eq.h eq_update_ci; abi/mlx5/doorbell.hpp): +0x40 writes the
// consumer index and arms the EQ (the device raises the EQ's interrupt for the next EQE), +0x48
// writes it without arming. A UAR is one 4 KiB page of BAR0.
constexpr std::uint64_t uar_page_bytes = ::rig::mlx5::abi::uar_page_size;
constexpr std::uint64_t eq_doorbell_arm = ::rig::mlx5::abi::uar::eq_doorbell_arm;
constexpr std::uint64_t eq_doorbell_no_arm = ::rig::mlx5::abi::uar::eq_doorbell_no_arm;
// The EQ is created with this many entries beyond what it must hold; the firmware counts an
// EQ whose consumer index lags further behind as overrun, so the index is written back at
// least this often while draining (kernel eq.c MLX5_NUM_SPARE_EQE).
constexpr std::uint32_t spare_eqes = 0x80;

// The events the async EQ asks for (kernel eq.c gather_async_events_mask, rdma-core
// create_async_eqs): command completions and page requests as in rdma-core, port changes, the
// QP and CQ error events, and INTERNAL_ERROR. COMP events come to the EQ a CQ names in
// cqc.c_eqn whatever the mask (mlx5_ifc.h; kernel eq.c, cq.c).
constexpr event_type async_events[] = {
    event_type::path_mig,       event_type::comm_est,           event_type::sq_drained,
    event_type::cq_error,       event_type::wq_catas_error,     event_type::path_mig_failed,
    event_type::internal_error, event_type::port_change,        event_type::cmd,
    event_type::page_request,   event_type::wq_inval_req_error, event_type::wq_access_error,
};
constexpr std::uint64_t async_event_mask() noexcept {
    std::uint64_t m = 0;
    for (event_type t : async_events) {
        m |= std::uint64_t{1} << static_cast<unsigned>(t);
    }
    return m;
}

bool is_qp_event(event_type t) noexcept {
    switch (t) {
    case event_type::path_mig:
    case event_type::comm_est:
    case event_type::sq_drained:
    case event_type::wq_catas_error:
    case event_type::path_mig_failed:
    case event_type::wq_inval_req_error:
    case event_type::wq_access_error:
        return true;
    default:
        return false;
    }
}

error events_error(error_kind kind, std::string message) {
    return plain_error(kind, "mlx5 events: " + std::move(message));
}

// Where an EQ's buffer goes when CREATE_EQ times out and the caller named no report.
stranded_memory& unreported_strandings() {
    static auto* kept = new stranded_memory();  // intentionally never freed: the device may write it
    return *kept;
}

}  // namespace

events::events(driver::function& fn, command_queue& q, std::uint32_t uar, event_handlers handlers,
               const events_options& options)
    : _fn(fn), _q(q), _uar(uar), _handlers(std::move(handlers)), _options(options),
      _health(fn, options.health), _eq(std::make_unique<eq>()) {}

result<std::unique_ptr<events>> events::start(driver::function& fn, command_queue& q, std::uint32_t uar,
                                              event_handlers handlers, const events_options& options,
                                              command_queue::clock::time_point by) {
    if (options.log_eq_size < 6 || options.log_eq_size > 16) {
        throw std::invalid_argument("mlx5 events: log_eq_size " + std::to_string(options.log_eq_size) +
                                    " is outside 6..16");
    }
    if (q.failure()) {
        return std::unexpected(events_error(error_kind::fatal, "the NIC failed: " + q.failure()->message));
    }
    std::unique_ptr<events> ev(new events(fn, q, uar, std::move(handlers), options));
    // From here a failure returns through ~events, which stops what was started and disables
    // MSI-X; an EQ already created is destroyed first (below).

    // MSI-X vector 0: the EQ's interrupt (eqc.intr = 0), as rdma-core's cmd_comp_fd (mlx5_vfio.c);
    // the vectors after it wait for completion EQs.
    {
        std::uint32_t vectors = std::max<std::uint32_t>(options.vectors, 1);
        if (auto info = fn.get_irq_info(driver::irq_kind::msix); info && info->count > 0) {
            vectors = std::min(vectors, info->count);
        }
        auto fds = fn.enable_irqs(driver::irq_kind::msix, vectors);
        if (!fds) {
            return std::unexpected(events_error(error_kind::transport, "MSI-X vectors 0.." + std::to_string(vectors - 1) +
                                                                           ": " + fds.error().message));
        }
        ev->_irq_fd = fds->front();
        ev->_irq_fds = *fds;
        ev->_irqs_enabled = true;
    }
    ev->_wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ev->_wake_fd < 0) {
        return std::unexpected(events_error(error_kind::transport, std::string("eventfd: ") + std::strerror(errno)));
    }
    if (auto r = ev->map_doorbell(); !r) {
        return std::unexpected(std::move(r.error()));
    }

    eq_params p;
    p.log_size = options.log_eq_size;
    p.uar = uar;
    p.vector = 0;
    p.event_bitmask = {async_event_mask(), 0, 0, 0};
    stranded_memory& stranded = options.stranded != nullptr ? *options.stranded : unreported_strandings();
    auto created = eq::create(q, fn, stranded, p, by);
    if (!created) {
        return std::unexpected(std::move(created.error()));
    }
    *ev->_eq = std::move(*created);
    ev->_eqn = ev->_eq->eqn();

    // Arm: the device interrupts for the first EQE written after this.
    if (auto r = ev->ring_doorbell(true); !r) {
        static_cast<void>(ev->_eq->destroy(q, fn, stranded, by));
        return std::unexpected(std::move(r.error()));
    }
    ev->_pages = std::thread([p_ev = ev.get()] { p_ev->page_worker(); });
    ev->_thread = std::thread([p_ev = ev.get()] { p_ev->run(); });
    q.use_events(true, ev->_thread.get_id(), [p_ev = ev.get()] { p_ev->wake(); });
    log().debug("mlx5 events on {}: EQ {:#x} on UAR {:#x}, {} entries, doorbell {}", fn.name(), ev->eqn(), uar,
                1u << options.log_eq_size, ev->_doorbell != nullptr ? "mapped" : "by region write");
    return ev;
}

result<void> events::map_doorbell() {
    // The UAR page is mapped shared on the model and by kernel VFIO; if the BAR's mappable areas
    // do not cover it the doorbell goes through region_write (a trapped write, slower but same).
    auto bar = _fn.map_bar(driver::region::bar0, driver::caching::uncached);
    const std::uint64_t at = std::uint64_t{_uar} * uar_page_bytes + eq_doorbell_arm;
    if (bar && bar->covers(at, eq_doorbell_no_arm + 4 - eq_doorbell_arm)) {
        _doorbell = bar->base + at;
    } else if (!bar) {
        log().debug("mlx5 events on {}: BAR0 not mapped ({}); EQ doorbell by region write", _fn.name(),
                    bar.error().message);
    }
    return {};
}

// The one function that writes the EQ doorbell: be32 (eqn << 24) | ci (kernel lib/eq.h
// eq_update_ci).
result<void> events::ring_doorbell(bool arm) {
    const std::uint32_t value = (_eqn << 24) | (_ci & 0xffffffu);
    std::array<std::byte, 4> be{};
    abi::store_be<std::uint32_t>(be.data(), value);
    const std::uint64_t offset = arm ? eq_doorbell_arm : eq_doorbell_no_arm;
    // Everything read from the EQ is done before the doorbell tells the device those entries
    // are free: loads before a later store, which from_device orders (aarch64 `dmb oshld`).
    barrier::from_device();
    if (_doorbell != nullptr) {
        std::uint32_t word = 0;
        std::memcpy(&word, be.data(), 4);
        auto* reg = reinterpret_cast<std::uint32_t*>(_doorbell + (offset - eq_doorbell_arm));
        std::atomic_ref<std::uint32_t>(*reg).store(word, std::memory_order_relaxed);
        return {};
    }
    if (auto r = _fn.region_write(driver::region::bar0, std::uint64_t{_uar} * uar_page_bytes + offset, be); !r) {
        return std::unexpected(events_error(error_kind::transport, "EQ doorbell: " + r.error().message));
    }
    return {};
}

void events::count(std::uint64_t event_counts::*which) {
    std::lock_guard g(_lock);
    ++(_counts.*which);
}

event_counts events::counts() const {
    std::lock_guard g(_lock);
    return _counts;
}

void events::fail_nic(error e) {
    e.kind = error_kind::fatal;
    _q.fail(e);
    if (!_fatal_called.exchange(true)) {  // the queue's fail() has logged it
        if (_handlers.fatal) {
            _handlers.fatal(e);
        }
    }
}

// The event thread: wait for the interrupt (or the health interval), drain, check health.
void events::run() {
    std::array<pollfd, 2> fds{pollfd{_irq_fd, POLLIN, 0}, pollfd{_wake_fd, POLLIN, 0}};
    while (!_stopping.load(std::memory_order_acquire)) {
        const auto now = health_watcher::clock::now();
        const auto due = _health.next_check();
        const auto wait = due <= now ? 0
                                     : std::chrono::ceil<std::chrono::milliseconds>(due - now).count();
        const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<std::int64_t>(wait, 60000)));
        if (n < 0 && errno != EINTR) {
            fail_nic(events_error(error_kind::fatal, std::string("poll on the MSI-X eventfd: ") + std::strerror(errno)));
            return;
        }
        if (_stopping.load(std::memory_order_acquire)) {
            break;
        }
        if (n > 0 && (fds[0].revents & (POLLNVAL | POLLERR)) != 0) {
            // The eventfd went away under us (the function was released while events ran).
            fail_nic(events_error(error_kind::fatal, "the MSI-X eventfd was closed while events ran"));
            return;
        }
        if (n > 0 && (fds[0].revents & POLLIN) != 0) {
            std::uint64_t fired = 0;
            if (::read(_irq_fd, &fired, sizeof fired) == static_cast<ssize_t>(sizeof fired) && fired != 0) {
                count(&event_counts::interrupts);
            }
        }
        if (n > 0 && (fds[1].revents & POLLIN) != 0) {
            std::uint64_t asked = 0;
            static_cast<void>(::read(_wake_fd, &asked, sizeof asked));   // wake(): a look, no interrupt
        }
        // Drained on every wake, interrupt or not: an EQE whose interrupt was lost is found at
        // the next health interval at the latest.
        if (!drain()) {
            return;
        }
        if (health_watcher::clock::now() >= _health.next_check()) {
            count(&event_counts::health_checks);
            if (auto bad = _health.check()) {
                fail_nic(std::move(*bad));
                return;
            }
        }
    }
}

// Takes every EQE software owns, then writes the consumer index back with arming. false: the
// EQ broke (the NIC is failed).
bool events::drain() {
    const auto all = _eq->entries();
    const std::uint32_t log_nent = _eq->params().log_size;
    const std::uint32_t mask = (1u << log_nent) - 1;
    // A small EQ has fewer spare entries than the kernel's 256-entry one: half of it then.
    const std::uint32_t update_every = std::min(spare_eqes, (mask + 1) / 2);
    std::uint32_t since_update = 0;
    std::array<std::byte, eqe_bytes> copy{};
    for (;;) {
        std::byte* const e = all.data() + std::size_t{_ci & mask} * eqe_bytes;
        // Valid when the owner bit equals the pass parity of the consumer index: EQEs start
        // with owner 1 and the device writes 0 on the first pass, 1 on the second, ... (kernel
        // lib/eq.h next_eqe_sw).
        const auto owner = std::to_integer<std::uint32_t>(
            std::atomic_ref<std::byte>(e[owner_byte]).load(std::memory_order_acquire));
        if (!ifc::eqe_owned_by_software(static_cast<std::uint8_t>(owner), _ci, log_nent)) {
            break;
        }
        barrier::from_device();   // the EQE's body only after its owner byte said it is ours
        std::memcpy(copy.data(), e, eqe_bytes);
        ++_ci;
        count(&event_counts::eqes);
        dispatch(copy.data());
        if (++since_update >= update_every) {
            if (auto r = ring_doorbell(false); !r) {
                fail_nic(std::move(r.error()));
                return false;
            }
            since_update = 0;
        }
        if (_fatal_called.load()) {
            return false;  // an INTERNAL_ERROR event failed the NIC
        }
    }
    if (auto r = ring_doorbell(true); !r) {
        fail_nic(std::move(r.error()));
        return false;
    }
    return true;
}

void events::dispatch(const std::byte* raw) {
    namespace I = ::rig::mlx5::ifc;
    const std::span<const std::byte> eqe(raw, eqe_bytes);
    const auto get = [&](abi::field f) { return abi::get(eqe, f); };
    const auto type = static_cast<event_type>(get(I::eqe::event_type));
    const auto data = I::eqe::event_data;
    switch (type) {
    case event_type::cmd:
        count(&event_counts::commands);
        _q.complete(static_cast<std::uint32_t>(
            get(data(I::event_auto::cmd_inter_comp_event(I::cmd_inter_comp_event::command_completion_vector)))));
        return;
    case event_type::page_request: {
        count(&event_counts::page_requests);
        const auto function_id = static_cast<std::uint16_t>(get(I::eqe_page_request(I::pages_req_event::function_id)));
        const auto num_pages = static_cast<std::int32_t>(
            static_cast<std::uint32_t>(get(I::eqe_page_request(I::pages_req_event::num_pages))));
        {
            std::lock_guard g(_lock);
            _page_requests.emplace_back(function_id, num_pages);
        }
        _pages_cv.notify_one();
        return;
    }
    case event_type::port_change: {
        count(&event_counts::port_changes);
        const auto port = static_cast<std::uint8_t>(
            get(data(I::event_auto::port_state_change_event(I::port_state_change_event::port_num))));
        const auto sub = static_cast<I::port_change_subtype>(get(I::eqe::event_sub_type));
        if (_handlers.port_change) {
            _handlers.port_change(port, sub == I::port_change_subtype::active);
        }
        return;
    }
    case event_type::comp:
        count(&event_counts::completions);
        if (_handlers.completion) {
            _handlers.completion(
                static_cast<std::uint32_t>(get(data(I::event_auto::comp_event(I::comp_event::cq_number)))));
        }
        return;
    case event_type::cq_error:
        count(&event_counts::cq_errors);
        log().error("mlx5 events on {}: CQ_ERROR on CQ {:#x}, syndrome {:#x}", _fn.name(),
                    get(data(I::event_auto::cq_error(I::cq_error::cqn))),
                    get(data(I::event_auto::cq_error(I::cq_error::syndrome))));
        return;
    case event_type::internal_error:
        fail_nic(events_error(error_kind::fatal, "INTERNAL_ERROR event from the device"));
        return;
    default:
        break;
    }
    if (is_qp_event(type)) {
        count(&event_counts::qp_events);
        if (_handlers.qp_event) {
            _handlers.qp_event(
                static_cast<std::uint32_t>(get(data(I::event_auto::qp_events(I::qp_events::qpn_rqn_sqn)))),
                static_cast<std::uint8_t>(type));
        }
        return;
    }
    count(&event_counts::unknown);
    log().debug("mlx5 events on {}: {} ({:#x}) ignored", _fn.name(), I::to_string(type),
                static_cast<unsigned>(type));
}

// Page requests, in order, off the event thread: the handler's MANAGE_PAGES completes by a CMD
// event that the event thread must be free to take (rdma-core mlx5_vfio.c; kernel cmd.c).
void events::page_worker() {
    for (;;) {
        std::pair<std::uint16_t, std::int32_t> req;
        {
            std::unique_lock g(_lock);
            _pages_cv.wait(g, [&] { return _stopping.load() || !_page_requests.empty(); });
            if (_stopping.load()) {
                if (!_page_requests.empty()) {
                    log().warn("mlx5 events on {}: {} page request(s) left unanswered at stop", _fn.name(),
                               _page_requests.size());
                }
                return;
            }
            req = _page_requests.front();
            _page_requests.pop_front();
        }
        if (!_handlers.page_request) {
            log().warn("mlx5 events on {}: page request for {} page(s) of function {:#x} and no handler",
                       _fn.name(), req.second, req.first);
            continue;
        }
        try {
            _handlers.page_request(req.first, req.second);
        } catch (const std::exception& ex) {
            log().error("mlx5 events on {}: page request handler threw: {}", _fn.name(), ex.what());
        }
    }
}

void events::wake() noexcept {
    const std::uint64_t one = 1;
    static_cast<void>(::write(_wake_fd, &one, sizeof one));
}

void events::stop_threads() {
    const auto self = std::this_thread::get_id();
    if (self == _thread.get_id() || self == _pages.get_id()) {
        throw std::invalid_argument("mlx5 events: stop from an event handler (it would wait for itself)");
    }
    _stopping.store(true, std::memory_order_release);
    if (_wake_fd >= 0) {
        wake();
    }
    {
        std::lock_guard g(_lock);  // a worker between its check and its wait sees the flag
    }
    _pages_cv.notify_all();
    if (_thread.joinable()) {
        _thread.join();
    }
    if (_pages.joinable()) {
        _pages.join();
    }
}

result<void> events::stop(stranded_memory& stranded, command_queue::clock::time_point by) {
    if (_stopped) {
        return {};
    }
    // Kernel order (eq.c destroy_async_eqs): commands back to polling first, so that the
    // DESTROY_EQ of the EQ that reports command completions is itself polled.
    _q.use_events(false);
    stop_threads();
    result<void> out;
    if (_eq->alive()) {
        if (auto r = _eq->destroy(_q, _fn, stranded, by); !r) {
            out = std::unexpected(std::move(r.error()));
        }
    }
    if (_irqs_enabled) {
        if (auto r = _fn.disable_irqs(driver::irq_kind::msix); !r && out) {
            out = std::unexpected(events_error(error_kind::transport, "MSI-X off: " + r.error().message));
        }
        _irqs_enabled = false;  // the function closed the eventfd either way
        _irq_fd = -1;
        _irq_fds.clear();
    }
    if (_wake_fd >= 0) {
        ::close(_wake_fd);
        _wake_fd = -1;
    }
    // An EQ the firmware refused to destroy is still there: a later stop tries again.
    _stopped = !_eq->alive();
    return out;
}

events::~events() {
    if (_stopped) {
        return;
    }
    _q.use_events(false);
    stop_threads();
    if (_eq->alive()) {
        log().warn("mlx5 events on {}: dropped without stop(); EQ {:#x} stays with the device", _fn.name(), _eqn);
    }
    if (_irqs_enabled) {
        static_cast<void>(_fn.disable_irqs(driver::irq_kind::msix));
    }
    if (_wake_fd >= 0) {
        ::close(_wake_fd);
    }
}

}  // namespace rig::firmware::mlx5
