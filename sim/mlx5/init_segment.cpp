// The function's PCI face: config space with its MSI-X capability, BAR0 (initialization
// segment, UAR pages, MSI-X table), health buffer, reset and the fault hooks
// (function_model.hpp; kernel device.h struct mlx5_init_seg and health_buffer, uar.c).
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <utility>

#include "sim/mlx5/datapath.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;
namespace vu = rig::sim::vfio_user;
using iseg = ifc::initial_seg;

namespace {

constexpr std::uint64_t internal_timer_at = 0x1000;  // kernel device.h struct mlx5_init_seg

// The byte offset of the dword that holds register field f, and f inside that dword.
constexpr std::uint64_t dword_of(abi::field f) { return f.off / 32 * 4; }
constexpr abi::field in_dword(abi::field f) { return {f.off % 32, f.bits}; }

}  // namespace

namespace {
// A MAC for a function whose options leave it to the model: fixed for the model's life, so a
// reset (which rebuilds the firmware) does not change the port's permanent address.
function_options with_mac(function_options o) {
    static std::atomic<std::uint32_t> next{0x8000};  // apart from the firmware's own counter
    if (o.firmware.mac == 0) {
        o.firmware.mac = 0x0252'4947'0000ull | (next.fetch_add(1) & 0xffffu);
    }
    return o;
}
}  // namespace

bar0_layout layout_of(const function_options& o) {
    const std::uint64_t table_bytes = pci::msix_table_window(o.firmware.msix_vectors);  // whole pages
    const std::uint64_t area = table_bytes + pci::msix_pba_window(o.firmware.msix_vectors);  // table, then the PBA page
    bar0_layout l{};
    l.msix_table = o.bar0_size > area ? o.bar0_size - area : 0;
    l.msix_pba = l.msix_table + table_bytes;
    l.uar_begin = std::uint64_t{o.firmware.first_uar_page} * uar_page_bytes;
    l.uar_end = l.uar_begin + std::uint64_t{o.firmware.uar_pages} * uar_page_bytes;
    l.trapped_end = l.uar_begin + std::uint64_t{std::min(o.trapped_uar_pages, o.firmware.uar_pages)} * uar_page_bytes;
    return l;
}

namespace {
// The options' layout, once they are checked (before the PCI pieces are made of them).
bar0_layout checked_layout(const function_options& o) {
    if (!std::has_single_bit(o.bar0_size) || o.bar0_size < 0x10000) {
        throw std::invalid_argument("mlx5 function model: BAR0 size must be a power of two >= 64 KiB");
    }
    if (o.log_cmdq_size > 5 || o.log_cmdq_stride < 6 || o.log_cmdq_size + o.log_cmdq_stride > 12) {
        throw std::invalid_argument("mlx5 function model: the command queue must fit one 4 KiB page");
    }
    if (o.firmware.msix_vectors == 0 || o.firmware.msix_vectors > pci::msix_max_vectors) {
        throw std::invalid_argument("mlx5 function model: MSI-X vectors must be 1..2048 (PCI table size)");
    }
    // The init segment (mlx5_ifc.h initial_seg, 0x400c bytes) lies wholly before the first
    // UAR; the UAR pages must end before the MSI-X table.
    const bar0_layout l = layout_of(o);
    if (std::uint64_t{o.firmware.first_uar_page} * uar_page_bytes < ifc::initial_seg::size_bytes ||
        o.firmware.uar_pages == 0 || l.uar_end > l.msix_table) {
        throw std::invalid_argument("mlx5 function model: UAR pages must lie between the init segment and the "
                                    "MSI-X table at the end of BAR0");
    }
    return l;
}
}  // namespace

fault_plan to_fault_plan(const pci::fault_plan& p) {
    return {.what = p.what,
            .after_commands = p.after_commands,
            .health_syndrome = static_cast<std::uint8_t>(p.fatal_code),
            .opcode = static_cast<std::uint16_t>(p.fail.opcode),
            .status = static_cast<ifc::cmd_status>(p.fail.status),
            .syndrome = p.fail.syndrome};
}

function_model::function_model(function_options options)
    : _options(with_mac(std::move(options))), _layout(checked_layout(_options)),
      _config(make_config(_options, _layout)), _msix(msix_of(_options, _layout)),
      _fault(_options.fault.what, _options.fault.after_commands) {
    _bar0 = vu::shared_memory(static_cast<std::size_t>(_options.bar0_size));
    {
        std::lock_guard g(_lock);
        reset_locked();
    }
    _thread = std::thread([this] { firmware_loop(); });
    ::pthread_setname_np(_thread.native_handle(), "rig-mlx5-fw");   // perf sched, top -H: which thread ran
}

function_model::~function_model() {
    _datapath.reset();  // its pass takes _lock: it leaves the model core first
    {
        std::lock_guard g(_lock);
        _stop = true;
    }
    _wake.notify_all();
    if (_thread.joinable()) {
        _thread.join();
    }
}

void function_model::attach(vu::server& s) {
    std::lock_guard g(_lock);
    _server = &s;
}

void function_model::server_closing() {
    _datapath.reset();  // its pass takes _lock: it leaves the model core first (as in the destructor)
    std::lock_guard g(_lock);
    _server = nullptr;
}

vu::region_desc function_model::region(unsigned index) {
    vu::region_desc d;
    if (index == vu::config_region) {
        d.size = pci::config_bytes;
        d.readable = d.writable = true;
    } else if (index == 0) {
        d.size = _options.bar0_size;
        d.readable = d.writable = true;
        // The UAR pages past the trapped ones are shared: doorbells there cost no message
        // (a card maps them straight to the process too; the data path rings them millions of
        // times a second). Everything
        // else stays trapped.
        d.fd = _bar0.fd();
        d.fd_offset = 0;
        d.memory = _bar0.data();
        if (_layout.trapped_end < _layout.uar_end) {
            d.shared.push_back({_layout.trapped_end, _layout.uar_end - _layout.trapped_end});
        }
    }
    return d;
}

std::uint32_t function_model::irq_count(vu::irq kind) {
    // no lock: the server asks with its own interrupt lock held
    switch (kind) {
    case vu::irq::intx: return 1;
    case vu::irq::msix: return _options.firmware.msix_vectors;
    default: return 0;
    }
}

bool function_model::initializing() const {
    return clock::now() < _ready_at;
}

void function_model::refresh_iseg() {
    abi::set<iseg::initializing>(_iseg, initializing() ? 1 : 0);
    abi::set<iseg::health_counter>(_iseg, _health_counter & 0xffffff);
}

bool function_model::read(unsigned region, std::uint64_t offset, std::span<std::byte> out) {
    std::lock_guard g(_lock);
    if (_dead) {
        // a function that fell off the bus: every read completes with all ones (kernel health.c)
        std::fill(out.begin(), out.end(), std::byte{0xff});
        return true;
    }
    if (region == vu::config_region) {
        config_read(offset, out);  // config_space.cpp
        return true;
    }
    if (region != 0) {
        return false;
    }
    std::fill(out.begin(), out.end(), std::byte{0});
    if (offset >= _layout.msix_table) {
        _msix.read(0, offset, out);  // MSI-X table and PBA (sim/pci/msix.hpp)
        return true;
    }
    if (offset >= _layout.uar_begin && offset + out.size() <= _layout.trapped_end) {
        std::memcpy(out.data(), _bar0.data() + offset, out.size());  // a trapped UAR page reads as mapped
        return true;
    }
    if (offset >= iseg_bytes) {
        return true;
    }
    const std::uint64_t counter_at = dword_of(iseg::health_counter);
    if (!_fatal && offset < counter_at + 4 && counter_at < offset + out.size()) {
        ++_health_counter;  // the heartbeat moves on every look, until the firmware fails
    }
    refresh_iseg();
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(out.size(), iseg_bytes - offset));
    std::memcpy(out.data(), _iseg.data() + offset, n);
    // internal_timer_h/l (device.h, 0x1000/0x1004; reserved in mlx5_ifc.h): the free-running HCA
    // clock, counting at cmd_hca_cap.device_frequency_khz = 1 GHz (caps.cpp), i.e. nanoseconds
    const auto ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - _born).count());
    std::array<std::byte, 8> timer;
    abi::store_be<std::uint32_t>(timer.data(), static_cast<std::uint32_t>(ns >> 32));
    abi::store_be<std::uint32_t>(timer.data() + 4, static_cast<std::uint32_t>(ns));
    for (std::size_t i = 0; i < timer.size(); ++i) {
        if (internal_timer_at + i >= offset && internal_timer_at + i < offset + out.size()) {
            out[internal_timer_at + i - offset] = timer[i];
        }
    }
    return true;
}

bool function_model::write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) {
    std::lock_guard g(_lock);
    if (_dead) {
        return true;  // posted writes to a gone function vanish
    }
    if (region == vu::config_region) {
        config_write(offset, in);
        return true;
    }
    if (region != 0) {
        return false;
    }
    if (offset >= _layout.msix_table) {
        _msix.write(0, offset, in);  // the table is the client's to write; the PBA is read-only
        return true;
    }
    if (offset >= _layout.uar_begin && offset + in.size() <= _layout.trapped_end) {
        uar_write(offset, in);
        return true;
    }
    if (offset >= iseg_bytes) {
        return true;
    }
    if (offset % 4 != 0 || in.size() % 4 != 0) {
        log().warn("mlx5: {}-byte write at BAR0 {:#x} ignored: registers are written as dwords", in.size(), offset);
        return true;
    }
    for (std::size_t i = 0; i < in.size() && offset + i + 4 <= iseg_bytes; i += 4) {
        write_iseg_dword(offset + i, abi::load_be<std::uint32_t>(in.data() + i));
    }
    return true;
}

void function_model::write_iseg_dword(std::uint64_t offset, std::uint32_t host_value) {
    std::array<std::byte, 4> w;
    abi::store_be<std::uint32_t>(w.data(), host_value);
    if (offset == dword_of(iseg::cmdq_phy_addr_63_32)) {
        abi::set<iseg::cmdq_phy_addr_63_32>(_iseg, abi::get(w, in_dword(iseg::cmdq_phy_addr_63_32)));
    } else if (offset == dword_of(iseg::cmdq_phy_addr_31_12)) {
        // log_cmdq_size/stride are read-only; nic_interface writes (fast teardown) are not modelled
        abi::set<iseg::cmdq_phy_addr_31_12>(_iseg, abi::get(w, in_dword(iseg::cmdq_phy_addr_31_12)));
    } else if (offset == dword_of(iseg::command_doorbell_vector)) {
        ring(static_cast<std::uint32_t>(abi::get(w, in_dword(iseg::command_doorbell_vector))));
    } else {
        log().debug("mlx5: write of {:#x} to BAR0 {:#x} ignored (read-only or reserved)", host_value, offset);
    }
}

std::string to_string(const ledger_entry& e) {
    return "LEDGER function=" + std::to_string(e.function) +
           (e.what == ledger_entry::event::disable_hca ? " event=disable_hca" : " event=reset") +
           " pages=" + std::to_string(e.pages) + " objects=" + std::to_string(e.objects);
}

void function_model::report_ledger(ledger_entry::event what, std::size_t pages, std::size_t objects) const {
    if (_options.on_ledger) {
        _options.on_ledger({_options.function_index, what, pages, objects});
    }
}

void function_model::reset() {
    std::unique_lock g(_lock);
    function_reset_locked();
    g.unlock();
    _wake.notify_one();
    _idle.notify_all();
}

// A function reset (VFIO_USER_DEVICE_RESET, FLR, the client's going): what the driver left is
// counted before the reset drops it, and the function's config state goes back too.
void function_model::function_reset_locked() {
    const std::size_t pages = _fw.pages_owned();
    const std::size_t objects = _fw.objects();
    reset_locked();
    reset_config();  // config_space.cpp
    _kicked = true;  // the firmware thread re-plans: its commands and EQs are gone
    report_ledger(ledger_entry::event::reset, pages, objects);
}

// A client that goes away (closed, crashed, killed mid-command) leaves its DMA windows and
// eventfds behind (the server has dropped them already); the next client must find a function
// it can bring up from the start, so the function is reset: pending commands, EQs and pages go.
void function_model::disconnected() {
    reset();
}

void function_model::reset_locked() {
    _fw = firmware(_options.firmware);
    ++_resets;  // the data path drops the objects it followed
    _iseg.fill(std::byte{0});
    abi::set<iseg::fw_rev_major>(_iseg, _options.fw_rev_major);
    abi::set<iseg::fw_rev_minor>(_iseg, _options.fw_rev_minor);
    abi::set<iseg::fw_rev_subminor>(_iseg, _options.fw_rev_subminor);
    abi::set<iseg::cmd_interface_rev>(_iseg, ifc::init_seg::supported_cmd_interface_rev);
    abi::set<iseg::log_cmdq_size>(_iseg, _options.log_cmdq_size);
    abi::set<iseg::log_cmdq_stride>(_iseg, _options.log_cmdq_stride);
    // health.fw_ver: the model's encoding of its version (major.minor.subminor in 8.8.16 bits);
    // what matters to a driver is that it is not 0xffffffff while the function lives (kernel
    // health.c).
    constexpr auto h = iseg::health_buffer;
    abi::set(_iseg, h(ifc::health_buffer::fw_version),
             std::uint64_t{_options.fw_rev_major & 0xffu} << 24 | std::uint64_t{_options.fw_rev_minor & 0xffu} << 16 |
                 _options.fw_rev_subminor);
    _ready_at = clock::now() + _options.init_time;
    _last = {};
    _pending = 0;
    _event_slots = 0;
    _completed = 0;
    _page_request_sent = false;
    _fault.rearm();
    _fatal = _silent = _dead = false;
    _fail_next.clear();
    clear_uar_pages();
    _msix.reset();
    refresh_iseg();
    strike_planned_fault();  // a fault planned after 0 commands is there when the reset ends
    if (_dead_for_good) {
        die_locked();
    }
}

// ---- faults ----

void function_model::fatal(std::uint8_t synd, std::uint16_t ext_synd) {
    std::unique_lock g(_lock);
    fatal_locked(synd, ext_synd);
    g.unlock();
    _idle.notify_all();
}

void function_model::fatal_locked(std::uint8_t synd, std::uint16_t ext_synd) {
    constexpr auto h = iseg::health_buffer;
    using H = ifc::health_buffer;
    abi::set(_iseg, h(H::rfr), 1);
    abi::set(_iseg, h(H::valid), 1);
    abi::set(_iseg, h(H::severity), 2);  // critical (syslog scale of the kernel's health.c)
    abi::set(_iseg, h(H::synd), synd);
    abi::set(_iseg, h(H::ext_synd), ext_synd);
    abi::set<iseg::health_syndrome>(_iseg, synd);
    _fatal = true;
    log().error("mlx5: firmware fatal error, health syndrome {:#x} ({}), ext_synd {:#x}", synd,
                ifc::init_seg::to_string(static_cast<ifc::init_seg::health_syndrome>(synd)), ext_synd);
}

// with _lock held: on the firmware thread after each pass, and at the end of a reset
void function_model::strike_planned_fault() {
    const fault_plan& p = _options.fault;
    const auto strikes = _fault.strike(_completed);
    if (!strikes) {
        return;
    }
    log().warn("mlx5: planned fault strikes after {} commands", _completed);
    switch (*strikes) {
    case fault_plan::kind::silence: _silent = true; break;
    case fault_plan::kind::fatal: fatal_locked(p.health_syndrome, 0); break;
    case fault_plan::kind::fail_command: _fail_next.push_back({p.opcode, p.status, p.syndrome}); break;
    case fault_plan::kind::die: die_locked(); break;
    case fault_plan::kind::none: break;
    }
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
    kick();
}

void function_model::fail_next(std::uint16_t opcode, ifc::cmd_status status, std::uint32_t syndrome) {
    std::lock_guard g(_lock);
    _fail_next.push_back({opcode, status, syndrome});
}

void function_model::die() {
    std::unique_lock g(_lock);
    die_locked();
    g.unlock();
    _idle.notify_all();
}

void function_model::die_for_good() {
    std::unique_lock g(_lock);
    _dead_for_good = true;
    die_locked();
    g.unlock();
    _idle.notify_all();
}

void function_model::die_locked() {
    _dead = true;
    _pending = 0;
    // mapped UAR pages of a gone function read all ones too
    std::fill(_bar0.data() + _layout.uar_begin, _bar0.data() + _layout.uar_end, std::byte{0xff});
    log().warn("mlx5: function {} died (reads all ones {})", _options.function_index,
               _dead_for_good ? "for good" : "until reset");
}

// ---- inspection ----

hca_state function_model::state() const {
    std::lock_guard g(_lock);
    return _fw.state();
}
std::uint16_t function_model::issi() const {
    std::lock_guard g(_lock);
    return _fw.issi();
}
std::size_t function_model::pages_owned() const {
    std::lock_guard g(_lock);
    return _fw.pages_owned();
}
std::size_t function_model::objects() const {
    std::lock_guard g(_lock);
    return _fw.objects();
}
std::uint64_t function_model::cmdq_address() const {
    std::lock_guard g(_lock);
    return abi::get<iseg::cmdq_phy_addr_63_32>(_iseg) << 32 | abi::get<iseg::cmdq_phy_addr_31_12>(_iseg) << 12;
}
std::uint64_t function_model::doorbells_ignored() const {
    std::lock_guard g(_lock);
    return _doorbells_ignored;
}
std::uint64_t function_model::commands_completed() const {
    std::lock_guard g(_lock);
    return _completed;
}
std::uint64_t function_model::events_posted() const {
    std::lock_guard g(_lock);
    return _events;
}
std::uint64_t function_model::interrupts_raised() const {
    std::lock_guard g(_lock);
    return _interrupts;
}
std::uint32_t function_model::commands_pending() const {
    std::lock_guard g(_lock);
    return _pending;
}
completion function_model::last_completion(unsigned slot) const {
    std::lock_guard g(_lock);
    return slot < _last.size() ? _last[slot] : completion{};
}
bool function_model::port_up() const {
    std::lock_guard g(_lock);
    return _fw.link_up();
}
bool function_model::failed() const {
    std::lock_guard g(_lock);
    return _fatal || _dead;
}

}  // namespace rig::sim::mlx5
