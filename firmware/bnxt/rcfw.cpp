#include "firmware/bnxt/rcfw.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/hwrm.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::bnxt {

namespace {

constexpr std::size_t page = driver::dma_memory::small_page;
constexpr std::uint16_t max_cookie = 0x7fff;  // qplib_rcfw.h RCFW_MAX_COOKIE_VALUE

// "QUERY_FUNC (0x83)"; an opcode roce_hsi.h does not name: "RCFW command 0x99".
std::string command_name(std::uint8_t op) {
    const std::string_view n = abi::cmdq_opcode_name(op);
    return (n.empty() ? std::string("RCFW command") : std::string(n)) + " (" + ::rig::abi::hex(op) + ")";
}

std::string status_name(std::uint8_t s) {
    const std::string_view n = abi::creq_qp_event_status_name(s);
    return n.empty() ? "status " + ::rig::abi::hex(s) : std::string(n) + " (" + ::rig::abi::hex(s) + ")";
}

}  // namespace

rcfw_channel::rcfw_channel(driver::function& fn, stranded_memory& stranded, const rcfw_creq& creq,
                           const rcfw_options& o)
    : _fn(fn), _stranded(stranded), _creq(creq), _options(o) {}

rcfw_channel::~rcfw_channel() {
    if (_cmdq && !_stranded_cmdq) {
        static_cast<void>(_fn.dma_unmap(_cmdq_iova, _cmdq.size()));
    }
}

result<std::unique_ptr<rcfw_channel>> rcfw_channel::create(driver::function& fn, stranded_memory& stranded,
                                                           const rcfw_creq& creq, const rcfw_options& options) {
    const auto pow2 = [](std::uint64_t n) { return n != 0 && (n & (n - 1)) == 0; };
    if (!pow2(options.cmdq_slots) || options.cmdq_slots < 16 || options.cmdq_slots > 8192 || creq.memory == nullptr ||
        !pow2(creq.entries)) {
        throw std::invalid_argument("rcfw_channel: cmdq_slots " + std::to_string(options.cmdq_slots) +
                                    " (a power of two in 16..8192) or the CREQ (" + std::to_string(creq.entries) +
                                    " entries) is unusable");
    }
    std::unique_ptr<rcfw_channel> ch(new rcfw_channel(fn, stranded, creq, options));
    if (auto r = ch->setup(); !r) {
        return std::unexpected(std::move(r.error()));
    }
    return ch;
}

result<void> rcfw_channel::write32(std::uint64_t offset, std::uint32_t v) {
    std::array<std::byte, 4> b{};
    ::rig::abi::store_le<std::uint32_t>(b.data(), v);
    if (auto r = _fn.region_write(driver::region::bar0, offset, b); !r) {
        return std::unexpected(plain_error(error_kind::transport, "RCFW mailbox write at " + ::rig::abi::hex(offset) +
                                                                      ": " + r.error().message));
    }
    return {};
}

result<void> rcfw_channel::setup() {
    // Whole pages for the slots, rounded up: fewer than 256 slots (create() takes 16) still get
    // a page of their own, apart from the PBL's (a rounded-down 0 put the CMDQ on the PBL's page,
    // its first command read as a PTE: fuzz bnxt-creq).
    const std::size_t ring_pages = (std::size_t{_options.cmdq_slots} * abi::cmdq_slot_size + page - 1) / page;
    auto mem = driver::dma_memory::allocate((ring_pages + 1) * page, driver::page_choice::small_only);
    if (!mem) {
        return std::unexpected(plain_error(error_kind::transport, "CMDQ: " + mem.error().message));
    }
    _cmdq = std::move(*mem);
    auto iova = _fn.dma_map(_cmdq, 0, _cmdq.size(), driver::dma_access::read_write);
    if (!iova) {
        _cmdq = {};
        return std::unexpected(plain_error(error_kind::transport, "CMDQ: " + iova.error().message));
    }
    _cmdq_iova = *iova;
    _pbl_iova = _cmdq_iova + ring_pages * page;
    std::byte* pbl = _cmdq.data() + ring_pages * page;
    for (std::size_t p = 0; p < ring_pages; ++p) {
        ::rig::abi::store_le<std::uint64_t>(pbl + 8 * p, (_cmdq_iova + p * page) | abi::PTU_PTE_VALID);
    }
    // cmdq_init, four 32-bit words into the mailbox (bnxt_qplib_start_rcfw).
    abi::cmdq_init init;
    init.cmdq_pbl = _pbl_iova;
    init.cmdq_lvl = 1;
    init.cmdq_size = static_cast<std::uint16_t>(_options.cmdq_slots);  // at most 8192 (create checks)
    init.creq_ring_id = _creq.ring_id;
    // The CREQ doorbell: BAR2 mapped (doorbells are plain stores on a card), else region writes.
    if (auto bar2 = _fn.map_bar(driver::region::bar2, driver::caching::uncached);
        bar2 && bar2->covers(_creq.doorbell_offset, 8)) {
        _doorbell = bar2->base + _creq.doorbell_offset;
    }
    const auto bytes = abi::to_bytes(init);
    ::rig::abi::barrier::to_device();  // the PBL before the firmware learns of it
    for (std::size_t i = 0; i < bytes.size(); i += 4) {
        if (auto r = write32(abi::RCFW_COMM_BASE_OFFSET + i, ::rig::abi::load_le<std::uint32_t>(bytes.data() + i)); !r) {
            return r;
        }
    }
    if (event_mode()) {
        ring_creq_doorbell();   // the first arm (bnxt_qplib_rcfw_start_irq)
    }
    return {};
}

std::optional<error> rcfw_channel::failure() const {
    std::lock_guard g(_lock);
    return _failure;
}

void rcfw_channel::trace(command_sink sink) {
    std::lock_guard g(_lock);
    _trace = std::move(sink);
}

void rcfw_channel::fail(error why) {
    std::lock_guard g(_lock);
    if (_failure) {
        return;
    }
    why.kind = error_kind::fatal;
    why.channel = "rcfw";
    _failure = std::move(why);
    strand(_failure->message);
    _room.notify_all();
}

void rcfw_channel::on_async(creq_async_handler handler) {
    std::lock_guard g(_lock);
    _async = std::move(handler);
}

void rcfw_channel::serve() {
    std::lock_guard g(_lock);
    _served = true;
}

void rcfw_channel::service(bool interrupt) {
    if (interrupt) {
        _interrupts.fetch_add(1, std::memory_order_relaxed);
    }
    {
        std::lock_guard g(_lock);
        if (!_failure) {
            poll_creq();
        }
    }
    deliver_async();
}

void rcfw_channel::deliver_async() {
    for (;;) {
        std::unique_lock handing(_delivering, std::try_to_lock);
        if (!handing) {
            return;  // the thread handing over takes ours too
        }
        _handing.store(std::this_thread::get_id(), std::memory_order_relaxed);
        std::vector<std::array<std::byte, 16>> due;
        creq_async_handler handler;
        {
            std::lock_guard g(_lock);
            due.swap(_async_due);
            handler = _async;
        }
        for (const auto& entry : due) {
            if (handler) {
                handler(std::span<const std::byte, 16>(entry));
            } else {
                log().info("bnxt RCFW on {}: CREQ event type {:#x} event {:#x} (not a completion)", _fn.name(),
                           std::to_integer<unsigned>(entry[0]) & 0x3f, std::to_integer<unsigned>(entry[9]));
            }
        }
        _handing.store(std::thread::id{}, std::memory_order_relaxed);
        handing.unlock();
        std::lock_guard g(_lock);
        _async_handed += due.size();
        _handed.notify_all();
        if (_async_due.empty()) {
            return;  // else another poller set more aside while we handed over: take them too
        }
    }
}

void rcfw_channel::strand(const std::string& why) {
    if (!_stranded_cmdq && _cmdq) {
        _stranded_cmdq = true;
        log().warn("bnxt RCFW on {}: {}; CMDQ stranded", _fn.name(), why);
        const std::size_t bytes = _cmdq.size();
        _stranded.keep("CMDQ and its PBL", _cmdq_iova, bytes, std::move(_cmdq));
    }
}

void rcfw_channel::poll_creq() {
    bool consumed = false;
    for (;;) {
        std::byte* e = _creq.memory + (_cons % _creq.entries) * abi::creq_entry_size;
        const std::uint8_t phase = ((_cons / _creq.entries) & 1) == 0 ? 1 : 0;  // CREQ_CMP_VALID
        const auto v = std::atomic_ref<std::byte>(e[8]).load(std::memory_order_acquire);
        if ((std::to_integer<std::uint8_t>(v) & 1) != phase) {
            break;
        }
        ::rig::abi::barrier::from_device();  // the entry's other bytes after its valid bit
        std::array<std::byte, 16> entry{};
        std::memcpy(entry.data(), e, entry.size());
        ++_cons;
        consumed = true;
        const std::uint8_t type = std::to_integer<std::uint8_t>(entry[0]) & 0x3f;
        const std::uint8_t event = std::to_integer<std::uint8_t>(entry[9]);
        if (type != abi::CREQ_BASE_TYPE_QP_EVENT || event == abi::CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION ||
            event == abi::CREQ_QP_EVENT_EVENT_CQ_ERROR_NOTIFICATION) {
            // bnxt_qplib_process_qp_event / bnxt_qplib_process_func_event: not a completion;
            // handed over once _lock is released (deliver_async)
            _async_due.push_back(entry);
            ++_async_set_aside;
            continue;
        }
        const auto cookie = ::rig::abi::load_le<std::uint16_t>(entry.data() + 2);
        auto it = _pending.find(cookie);
        if (it == _pending.end() || it->second.done) {
            log().warn("bnxt RCFW on {}: completion with cookie {:#x} (event {:#x}) matches no command", _fn.name(),
                       cookie, event);
            continue;
        }
        it->second.done = true;
        it->second.entry = entry;
        it->second.async_before = _async_set_aside;
        _in_flight -= it->second.slots;
    }
    if (consumed) {
        ring_creq_doorbell();
        _room.notify_all();
    }
}

// Acknowledges what was consumed (bnxt_qplib_ring_nq_db): the CREQ's id, the consumer index and
// its epoch; in event mode as NQ_ARM, which asks for the next interrupt.
void rcfw_channel::ring_creq_doorbell() {
    const std::uint8_t type = event_mode() ? abi::DBC_DBC_TYPE_NQ_ARM : abi::DBC_DBC_TYPE_NQ;
    const std::uint64_t db = abi::doorbell(type, _creq.ring_id, static_cast<std::uint32_t>(_cons % _creq.entries),
                                           ((_cons / _creq.entries) & 1) != 0);
    if (_doorbell != nullptr) {
        ::rig::abi::barrier::to_device();  // the entries' consumption before the device reads it
        std::uint64_t le = 0;  // the doorbell's bytes, little-endian, in one 64-bit store
        ::rig::abi::store_le<std::uint64_t>(reinterpret_cast<std::byte*>(&le), db);
        std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(_doorbell)).store(le, std::memory_order_relaxed);
        return;
    }
    std::array<std::byte, 8> b{};
    ::rig::abi::store_le<std::uint64_t>(b.data(), db);
    if (auto r = _fn.region_write(driver::region::bar2, _creq.doorbell_offset, b); !r && !_doorbell_warned) {
        _doorbell_warned = true;
        log().warn("bnxt RCFW on {}: CREQ doorbell: {}", _fn.name(), r.error().message);
    }
}

// Sleeps until the CREQ's vector fires or `slice` passes; a firing is counted and cleared.
void rcfw_channel::wait_for_interrupt(std::chrono::microseconds slice) {
    pollfd p{_creq.eventfd, POLLIN, 0};
    const int ms_slice = static_cast<int>(std::max<std::int64_t>(1, slice.count() / 1000));
    if (::poll(&p, 1, ms_slice) == 1 && (p.revents & POLLIN) != 0) {
        std::uint64_t n = 0;
        if (::read(_creq.eventfd, &n, sizeof n) == sizeof n && n != 0) {
            _interrupts.fetch_add(1, std::memory_order_relaxed);
        }
    }
}

// A command's completion reaches its caller only after the asynchronous entries the CREQ held
// before it, as bnxt_qplib_service_creq handles both in CREQ order. Otherwise a DESTROY_QP could
// return, a CREATE_QP reuse the number, and the old queue pair's QP_ERROR_NOTIFICATION, set
// aside by this poll and handed over later by the serving thread, fail the new queue pair (the
// bnxt seed test's remote-access cases: an entry "flushed ... QP_ERROR_NOTIFICATION" on a queue
// pair the model still had in RTS). The serving thread hands them over (service); one that has
// not within a slice is done for here.
void rcfw_channel::wait_handed_over(std::unique_lock<std::mutex>& g, std::uint64_t before, clock::time_point deadline) {
    constexpr auto slice = std::chrono::milliseconds(2);
    if (_handing.load(std::memory_order_relaxed) == std::this_thread::get_id()) {
        return;   // a handler's own command (control_test.cpp): the entries it waits for are in its hands
    }
    while (_async_handed < before && !_failure && clock::now() < deadline) {
        if (_handed.wait_for(g, slice, [&] { return _async_handed >= before; })) {
            return;
        }
        g.unlock();
        deliver_async();
        g.lock();
    }
}

result<rcfw_reply> rcfw_channel::exec(std::span<const std::byte> cmd, std::size_t side_bytes, clock::time_point by) {
    auto reply = run(cmd, side_bytes, by);
    const bool served = [&] {
        std::lock_guard g(_lock);
        return _served;
    }();
    if (!served) {
        deliver_async();  // with a serving thread, that thread hands them over (service)
    }
    return reply;
}

result<rcfw_reply> rcfw_channel::run(std::span<const std::byte> cmd, std::size_t side_bytes, clock::time_point by) {
    if (cmd.size() < abi::cmdq_base::layout_size || cmd.size() > 255 * abi::cmdq_slot_size || side_bytes % 16 != 0 ||
        side_bytes > 255 * 16) {
        throw std::invalid_argument("rcfw_channel::exec: a command of " + std::to_string(cmd.size()) +
                                    " bytes with a side buffer of " + std::to_string(side_bytes) + " bytes");
    }
    const std::uint8_t op = std::to_integer<std::uint8_t>(cmd[0]);
    const std::string what = command_name(op);
    const auto fail_with = [&](error e) {
        e.channel = "rcfw";
        e.req_type = op;
        if (!e.message.starts_with(what)) {
            e.message = what + ": " + e.message;
        }
        return std::unexpected(std::move(e));
    };
    const std::uint32_t slots = static_cast<std::uint32_t>((cmd.size() + 15) / 16);
    std::unique_lock g(_lock);
    if (_failure) {
        return fail_with(plain_error(error_kind::fatal, "not sent, the RCFW channel stopped: " + _failure->message));
    }
    // Room: one slot always kept free (__send_message's required_slots >= free_slots check).
    while (_in_flight + slots >= _options.cmdq_slots) {
        poll_creq();
        if (_in_flight + slots < _options.cmdq_slots) {
            break;
        }
        if (clock::now() >= by) {
            return fail_with(plain_error(error_kind::timeout, "no CMDQ room before the deadline"));
        }
        _room.wait_for(g, std::chrono::microseconds(50));
    }
    driver::dma_memory side;
    std::uint64_t side_iova = 0;
    if (side_bytes != 0) {
        auto m = driver::dma_memory::allocate(side_bytes, driver::page_choice::small_only);
        auto i = m ? _fn.dma_map(*m, 0, m->size(), driver::dma_access::read_write)
                   : driver::result<std::uint64_t>(std::unexpected(m.error()));
        if (!i) {
            return fail_with(plain_error(error_kind::transport, "side buffer: " + i.error().message));
        }
        side = std::move(*m);
        side_iova = *i;
    }
    const std::uint16_t cookie = _seq++ & max_cookie;
    std::vector<std::byte> full(std::size_t{slots} * 16);
    std::memcpy(full.data(), cmd.data(), cmd.size());
    full[1] = std::byte{static_cast<std::uint8_t>(slots)};
    ::rig::abi::store_le<std::uint16_t>(full.data() + 4, cookie);
    full[6] = std::byte{static_cast<std::uint8_t>(side_bytes / 16)};
    ::rig::abi::store_le<std::uint64_t>(full.data() + 8, side_iova);
    for (std::uint32_t s = 0; s < slots; ++s) {
        const std::uint32_t at = (_prod + s) & (_options.cmdq_slots - 1);
        std::memcpy(_cmdq.data() + std::size_t{at} * 16, full.data() + std::size_t{s} * 16, 16);
    }
    _pending[cookie] = pending{false, {}, slots};
    _in_flight += slots;
    _prod += slots;
    ::rig::abi::barrier::to_device();  // the slots before the producer that hands them over
    const std::uint32_t prod = (_prod & 0xffff) | (_first ? abi::FIRMWARE_FIRST_FLAG : 0u);
    _first = false;
    const auto rung = [&]() -> result<void> {
        if (auto r = write32(abi::RCFW_COMM_BASE_OFFSET + abi::RCFW_PF_VF_COMM_PROD_OFFSET, prod); !r) {
            return r;
        }
        return write32(abi::RCFW_COMM_BASE_OFFSET + abi::RCFW_COMM_TRIG_OFFSET, abi::RCFW_CMDQ_TRIG_VAL);
    }();
    const auto give_up = [&](error e) {
        _failure = e;
        strand(e.message);
        if (side) {
            const std::size_t n = side.size();
            _stranded.keep(what + " side buffer", side_iova, n, std::move(side));
        }
        _pending.erase(cookie);
        return fail_with(std::move(e));
    };
    if (!rung) {
        return give_up(rung.error());
    }
    const auto start = clock::now();
    const ms budget = std::min(_options.timeout, std::chrono::round<ms>(by - start));
    const auto deadline = std::min(by, start + _options.timeout);
    auto pause = std::chrono::microseconds(2);
    for (;;) {
        poll_creq();
        if (_pending[cookie].done) {
            break;
        }
        if (_failure) {
            return give_up(*_failure);
        }
        if (clock::now() >= deadline) {
            return give_up(plain_error(error_kind::timeout, what + ": no completion within " +
                                                                std::to_string(budget.count()) + " ms"));
        }
        if (_served) {
            _room.wait_for(g, std::chrono::milliseconds(1));   // service() notifies
            continue;
        }
        g.unlock();
        if (event_mode()) {
            wait_for_interrupt(std::chrono::milliseconds(1));
        } else {
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::microseconds(100));
        }
        g.lock();
    }
    if (_served) {   // unserved, exec() hands them over itself before it returns
        wait_handed_over(g, _pending[cookie].async_before, deadline);
    }
    rcfw_reply reply;
    reply.entry = _pending[cookie].entry;
    _pending.erase(cookie);
    if (side) {
        ::rig::abi::barrier::from_device();
        reply.side.assign(side.data(), side.data() + side_bytes);
        static_cast<void>(_fn.dma_unmap(side_iova, side.size()));
    }
    const std::uint8_t status = std::to_integer<std::uint8_t>(reply.entry[1]);
    if (_trace) {
        // the CREQ entry, then the side buffer (sized once and copied: g++ 12's -Warray-bounds
        // misreads a 16-byte vector grown by insert)
        std::vector<std::byte> out(reply.entry.size() + reply.side.size());
        std::memcpy(out.data(), reply.entry.data(), reply.entry.size());
        if (!reply.side.empty()) {
            std::memcpy(out.data() + reply.entry.size(), reply.side.data(), reply.side.size());
        }
        _trace(command_record{"rcfw", op, abi::cmdq_opcode_name(op), status, 0, false, full, std::move(out)});
    }
    const std::uint8_t echoed = std::to_integer<std::uint8_t>(reply.entry[9]);
    if (echoed != op) {
        return fail_with(plain_error(error_kind::bad_output, "the completion names opcode " + ::rig::abi::hex(echoed)));
    }
    if (status != abi::CREQ_QP_EVENT_STATUS_SUCCESS) {
        error e = plain_error(error_kind::status, what + ": " + status_name(status));
        e.error_code = status;
        return fail_with(std::move(e));
    }
    return reply;
}

}  // namespace rig::firmware::bnxt
