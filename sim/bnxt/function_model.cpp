// The bnxt PCI function: config space, BAR0 (HWRM window and trigger, RoCE mailbox), BAR2
// doorbells, BAR4 MSI-X, the firmware thread, faults and resets (function_model.hpp).
#include "sim/bnxt/function_model.hpp"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "abi/bits.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;

namespace {

firmware_options firmware_of(const function_options& o) {
    firmware_options f = o.firmware;
    f.max_msix = o.msix_vectors;
    f.fid = o.function_index;
    f.bar2_bytes = o.bar2_size;
    return f;
}

pci::msix_location msix_of(const function_options& o) {
    return {.vectors = o.msix_vectors, .table_bar = 4, .table_offset = 0, .pba_bar = 4,
            .pba_offset = pci::msix_table_window(o.msix_vectors)};
}

std::uint64_t bar4_size(const function_options& o) {
    return std::bit_ceil(std::max<std::uint64_t>(
        16 << 10, pci::msix_table_window(o.msix_vectors) + pci::msix_pba_window(o.msix_vectors)));
}

pci::config_space config_of(const function_options& o) {
    const std::uint64_t l2_bytes = std::uint64_t{o.firmware.l2_doorbell_bar_size_kb} << 10;
    if (!std::has_single_bit(o.bar2_size) || o.bar2_size <= l2_bytes) {
        throw std::invalid_argument("bnxt function: bar2_size " + rig::abi::hex(o.bar2_size) +
                                    " is not a power of two above the L2 doorbell area");
    }
    pci::config_space c({.vendor = broadcom_vendor_id, .device = o.device_id, .class_code = 0x020000});
    c.set_bar(0, {.size = bar0_bytes});
    c.set_bar(2, {.size = o.bar2_size});
    c.set_bar(4, {.size = bar4_size(o)});
    c.add_msix(msix_cap_offset, msix_of(o));
    c.add_express(express_cap_offset, {.max = o.link, .current = o.link});
    return c;
}

}  // namespace

function_model::function_model(function_options options)
    : _options(std::move(options)),
      _fw(firmware_of(_options)),
      _config(config_of(_options)),
      _msix(msix_of(_options)),
      _bar2(_options.bar2_size),
      _arm(_options.fault) {
    _thread = std::thread([this] { run_thread(); });
    ::pthread_setname_np(_thread.native_handle(), "rig-bnxt-fw");   // perf sched, top -H: which thread ran
}

function_model::~function_model() {
    _datapath.reset();   // its pass takes _lock: it leaves the model core first
    {
        std::lock_guard g(_lock);
        _stop = true;
    }
    _wake.notify_all();
    _thread.join();
}

void function_model::attach(vfio_user::server& s) {
    std::lock_guard g(_lock);
    _server = &s;
}

void function_model::server_closing() {
    _datapath.reset();   // its pass takes _lock and uses the server's DMA space: it goes first
    std::lock_guard g(_lock);
    _server = nullptr;
}

// ---- regions --------------------------------------------------------------------------------

vfio_user::region_desc function_model::region(unsigned index) {
    vfio_user::region_desc d;
    switch (index) {
    case 0:
        d.size = bar0_bytes;
        d.readable = d.writable = true;
        break;
    case 2:
        d.size = _options.bar2_size;
        d.readable = d.writable = true;
        d.fd = _bar2.fd();
        d.memory = _bar2.data();
        // the privileged doorbell page (db_offset) is trapped, every store seen in order: its
        // words are shared by the CREQ's, the NQs' and bnxt_re's CQ_ARMENA and kernel queues'
        // doorbells (bnxt_re's priv_db is the CREQ's address), which polled words would merge
        // (notices.cpp); the rest is shared memory the data path polls
        {
            const std::uint64_t db = privileged_page();
            d.shared = {{0, db}, {db + 4096, _options.bar2_size - db - 4096}};
        }
        break;
    case 4:
        d.size = bar4_size(_options);
        d.readable = d.writable = true;
        break;
    case vfio_user::config_region:
        d.size = pci::config_bytes;
        d.readable = d.writable = true;
        break;
    default:
        break;
    }
    return d;
}

std::uint32_t function_model::irq_count(vfio_user::irq kind) {
    return kind == vfio_user::irq::msix ? _options.msix_vectors : 0;
}

bool function_model::read(unsigned region, std::uint64_t offset, std::span<std::byte> out) {
    std::lock_guard g(_lock);
    if (_dead) {
        std::fill(out.begin(), out.end(), std::byte{0xff});
        return true;
    }
    switch (region) {
    case 0: return bar0_read(offset, out);
    case 2:
        std::memcpy(out.data(), _bar2.data() + offset, out.size());
        return true;
    case 4:
        _msix.read(4, offset, out);
        return true;
    case vfio_user::config_region:
        _config.read(offset, out);
        return true;
    default: return false;
    }
}

bool function_model::write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) {
    std::unique_lock g(_lock);
    if (_dead) {
        return true;
    }
    switch (region) {
    case 0: return bar0_write(offset, in);
    case 2:
        std::memcpy(_bar2.data() + offset, in.data(), in.size());
        privileged_write_locked(offset, in.size());
        return true;
    case 4:
        _msix.write(4, offset, in);
        return true;
    case vfio_user::config_region:
        if (_config.write(offset, in).flr) {
            log().info("bnxt function {}: FLR", _options.function_index);
            reset_locked();
        }
        return true;
    default: return false;
    }
}

bool function_model::bar0_read(std::uint64_t offset, std::span<std::byte> out) {
    std::fill(out.begin(), out.end(), std::byte{0});
    for (std::size_t i = 0; i < out.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at < _window.size()) {
            out[i] = _window[at];
        } else if (at == hwrm_trigger) {
            out[i] = std::byte{_pending ? std::uint8_t{1} : std::uint8_t{0}};
        } else if (at >= rcfw_mailbox && at < rcfw_mailbox + rcfw_mailbox_bytes) {
            out[i] = _mailbox[at - rcfw_mailbox];
        }
    }
    return true;
}

bool function_model::bar0_write(std::uint64_t offset, std::span<const std::byte> in) {
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at < _window.size()) {
            _window[at] = in[i];
        } else if (at >= rcfw_mailbox && at < rcfw_mailbox + rcfw_mailbox_bytes) {
            _mailbox[at - rcfw_mailbox] = in[i];
        }
    }
    // The triggers are 32-bit registers: a write of 1 to the first byte (a 32-bit store of 1)
    if (offset <= hwrm_trigger && hwrm_trigger < offset + in.size() &&
        std::to_integer<std::uint8_t>(in[hwrm_trigger - offset]) == 1) {
        trigger_locked();
    }
    constexpr std::uint64_t cmdq_trigger = rcfw_mailbox + 0x100;   // RCFW_COMM_TRIG_OFFSET
    if (offset <= cmdq_trigger && cmdq_trigger < offset + in.size() &&
        std::to_integer<std::uint8_t>(in[cmdq_trigger - offset]) == 1) {
        if (!_rcfw_kick) {
            _rcfw_due = clock::now() + _options.command_latency;   // the RoCE firmware's time too
        }
        _rcfw_kick = true;
        _wake.notify_all();
    }
    return true;
}

void function_model::trigger_locked() {
    if (_pending) {
        ++_ignored;
        log().warn("bnxt function {}: HWRM trigger while a request runs: ignored (one at a time)",
                   _options.function_index);
        return;
    }
    _pending = _window;
    _due = clock::now() + _options.command_latency;
    _wake.notify_all();
}

// ---- the firmware thread ------------------------------------------------------------------------

void function_model::run_thread() {
    std::unique_lock g(_lock);
    while (!_stop) {
        if (_firmware_back && clock::now() >= *_firmware_back) {
            firmware_back_locked();
        }
        if (_rcfw_kick && !_silent && !_dead && _server != nullptr) {
            if (clock::now() < _rcfw_due) {
                _wake.wait_until(g, _rcfw_due);
                continue;
            }
            run_rcfw_locked();
            continue;
        }
        if (_pending && !_silent && !_dead && _server != nullptr) {
            if (clock::now() < _due) {
                _wake.wait_until(g, _due);
                continue;
            }
            run_pending_locked();
            continue;
        }
        _idle.notify_all();
        if (_firmware_back) {   // a firmware in reset comes back by itself
            _wake.wait_until(g, *_firmware_back);
        } else {
            _wake.wait(g);
        }
    }
}

void function_model::run_pending_locked() {
    const std::array<std::byte, 128> window = *_pending;
    const std::uint16_t req_type = rig::abi::load_le<std::uint16_t>(window.data());
    std::optional<firmware::injected_failure> inject;
    const auto it = std::find_if(_fail_next.begin(), _fail_next.end(),
                                 [&](const injected& f) { return f.req_type == req_type; });
    if (it != _fail_next.end()) {
        inject = firmware::injected_failure{it->error_code, it->cmd_err};
        _fail_next.erase(it);
    }
    _last = _fw.run(window, &_server->dma(), inject);
    _pending.reset();
    ++_completed;
    if (_last->responded && _last->error_code == 0 && req_type == abi::HWRM_FUNC_DRV_UNRGTR) {
        report_ledger("drv_unrgtr");
    }
    if (_last->responded && _last->error_code == 0 && req_type == abi::HWRM_FUNC_RESET) {
        report_ledger("func_reset");   // what a driver's last FUNC_RESET left (Rig's teardown ends so)
    }
    if (const auto k = _arm.strike(_completed)) {
        switch (*k) {
        case pci::fault_kind::silence: _silent = true; break;
        case pci::fault_kind::fatal:
            reset_notice_locked(static_cast<std::uint8_t>(_options.fault.fatal_code));
            break;
        case pci::fault_kind::die: _dead = true; break;
        case pci::fault_kind::fail_command:
            if (_options.fault.fail.channel == 1) {   // rcfw: opcode, CREQ status
                _rcfw_fail_next.emplace_back(static_cast<std::uint8_t>(_options.fault.fail.opcode),
                                             static_cast<std::uint8_t>(_options.fault.fail.status));
                break;
            }
            _fail_next.push_back({static_cast<std::uint16_t>(_options.fault.fail.opcode),
                                  static_cast<std::uint16_t>(_options.fault.fail.status),
                                  static_cast<std::uint8_t>(_options.fault.fail.syndrome)});
            break;
        case pci::fault_kind::none: break;
        }
        log().warn("bnxt function {}: fault plan struck after {} requests", _options.function_index,
                   _completed);
    }
    _idle.notify_all();
}

// Every CMDQ command up to the producer, then the CREQ's MSI-X vector.
void function_model::run_rcfw_locked() {
    _rcfw_kick = false;
    firmware::rcfw_injection inject;
    if (!_rcfw_fail_next.empty()) {
        inject = _rcfw_fail_next.front();
        _rcfw_fail_next.erase(_rcfw_fail_next.begin());
    }
    for (const std::uint16_t v : _fw.rcfw_doorbell(_mailbox, &_server->dma(), &inject)) {
        raise_locked(v);
    }
    if (_datapath) {
        _datapath->command_ran();
    }
    if (inject) {
        _rcfw_fail_next.insert(_rcfw_fail_next.begin(), *inject);   // not met yet
    }
    _idle.notify_all();
}

// ---- resets and faults --------------------------------------------------------------------------

// What the firmware still holds, for rig-nicsim --report-ledger (function_options::on_ledger).
void function_model::report_ledger(const char* event) const {
    if (!_options.on_ledger) {
        return;
    }
    const auto& r = _fw.rcfw();
    _options.on_ledger("LEDGER function=" + std::to_string(_options.function_index) + " event=" + event +
                       " rings=" + std::to_string(_fw.rings().size()) + " stat_ctxs=" +
                       std::to_string(_fw.stat_ctxs().size()) + " vnics=" + std::to_string(_fw.vnics().size()) +
                       " filters=" + std::to_string(_fw.l2_filters().size()) + " roce_objects=" +
                       std::to_string(r.cqs.size() + r.keys.size() + r.qps.size()) + " context_pages=" +
                       std::to_string(_fw.context_pages()));
}

void function_model::reset_locked() {
    report_ledger("reset");   // what the reset takes from the firmware
    _fw.reset();
    ++_resets;   // the data path's next pass drops every object it followed
    _config.reset();
    _msix.reset();
    std::memset(_bar2.data(), 0, _bar2.size());
    _window = {};
    _mailbox = {};
    _pending.reset();
    _silent = false;
    _firmware_back.reset();
    _dead = _dead_for_good;
    _fail_next.clear();
    _rcfw_fail_next.clear();
    _rcfw_kick = false;
    _completed = 0;
    _arm.rearm();
    _idle.notify_all();
}

void function_model::reset() {
    std::lock_guard g(_lock);
    reset_locked();
}

void function_model::disconnected() {
    std::lock_guard g(_lock);
    log().info("bnxt function {}: the client went: function reset", _options.function_index);
    reset_locked();
}

void function_model::silence() {
    std::lock_guard g(_lock);
    _silent = true;
}

void function_model::resume() {
    {
        std::lock_guard g(_lock);
        _silent = false;
    }
    _wake.notify_all();
}

void function_model::fail_next(std::uint16_t req_type, std::uint16_t error_code, std::uint8_t cmd_err) {
    std::lock_guard g(_lock);
    _fail_next.push_back({req_type, error_code, cmd_err});
}

void function_model::fail_next_rcfw(std::uint8_t opcode, std::uint8_t status) {
    std::lock_guard g(_lock);
    _rcfw_fail_next.emplace_back(opcode, status);
}

void function_model::die() {
    std::lock_guard g(_lock);
    _dead = true;
}

void function_model::die_for_good() {
    std::lock_guard g(_lock);
    _dead = _dead_for_good = true;
}

bool function_model::set_link(bool up) {
    std::lock_guard g(_lock);
    const auto d = _fw.set_link(up, _server != nullptr && !_dead ? &_server->dma() : nullptr);
    if (d.vector) {
        raise_locked(*d.vector);
    }
    return d.written;
}

bool function_model::qp_error(std::uint32_t qpn, std::uint8_t req_reason, std::uint8_t res_reason,
                              std::uint16_t sq_cons, std::uint16_t rq_cons) {
    std::lock_guard g(_lock);
    if (_server == nullptr || _dead) {
        return false;
    }
    const std::uint64_t before = _fw.rcfw().creq_producer;
    for (const std::uint16_t v : _fw.rcfw_qp_error(qpn, req_reason, res_reason, sq_cons, rq_cons, &_server->dma())) {
        raise_locked(v);
    }
    return _fw.rcfw().creq_producer != before;
}

// ---- inspection ---------------------------------------------------------------------------------

std::uint64_t function_model::commands_completed() const {
    std::lock_guard g(_lock);
    return _fw.commands_executed();
}
std::uint64_t function_model::doorbells_ignored() const {
    std::lock_guard g(_lock);
    return _ignored;
}
std::optional<outcome> function_model::last_outcome() const {
    std::lock_guard g(_lock);
    return _last;
}
bool function_model::busy() const {
    std::lock_guard g(_lock);
    return _pending.has_value();
}
bool function_model::failed() const {
    std::lock_guard g(_lock);
    return _dead;
}
std::size_t function_model::context_pages() const { return with_firmware([](const firmware& f) { return f.context_pages(); }); }
std::vector<context_violation> function_model::context_violations() const {
    return with_firmware([](const firmware& f) { return f.context_violations(); });
}
bool function_model::roce_backing_store() const {
    return with_firmware([](const firmware& f) { return f.roce_backing_store(); });
}
bool function_model::roce_receive_ready() const {
    return with_firmware([](const firmware& f) { return f.roce_receive_ready(); });
}
std::size_t function_model::rings() const { return with_firmware([](const firmware& f) { return f.rings().size(); }); }

bool function_model::wait_idle(std::chrono::milliseconds timeout) const {
    std::unique_lock g(_lock);
    return _idle.wait_for(g, timeout, [&] { return (!_pending && !_rcfw_kick) || _silent || _dead; });
}

}  // namespace rig::sim::bnxt
