// The function's PCI face: config space with its MSI-X capability, BAR0 (initialization
// segment, UAR pages, MSI-X table), health buffer, reset and the fault hooks
// (function_model.hpp; reference mlx5.md §2.1, §2.2, §4.1, §5).
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

void put16(std::byte* p, std::uint16_t v) {
    p[0] = static_cast<std::byte>(v & 0xff);
    p[1] = static_cast<std::byte>(v >> 8);
}
void put32(std::byte* p, std::uint32_t v) {
    put16(p, static_cast<std::uint16_t>(v & 0xffff));
    put16(p + 2, static_cast<std::uint16_t>(v >> 16));
}
std::uint32_t get32(const std::byte* p) {
    return std::to_integer<std::uint32_t>(p[0]) | std::to_integer<std::uint32_t>(p[1]) << 8 |
           std::to_integer<std::uint32_t>(p[2]) << 16 | std::to_integer<std::uint32_t>(p[3]) << 24;
}

// PCI config space offsets (PCI Local Bus 3.0, type 0 header; MSI-X: PCI 3.0 §6.8.2)
constexpr std::size_t cfg_command = 0x04;
constexpr std::size_t cfg_status = 0x06;
constexpr std::size_t cfg_class = 0x08;  // revision, then the class code
constexpr std::size_t cfg_bar0 = 0x10;
constexpr std::size_t cfg_subsystem = 0x2c;
constexpr std::size_t cfg_cap_ptr = 0x34;
constexpr std::uint16_t command_writable = 0x0406;  // memory space, bus master, INTx disable
constexpr std::uint16_t status_cap_list = 0x0010;
constexpr std::uint32_t bar_mem64_prefetchable = 0xc;
constexpr std::uint8_t cap_id_msix = 0x11;
constexpr std::size_t msix_control = msix_cap_offset + 2;  // table size - 1 (10:0), mask (14), enable (15)
constexpr std::uint16_t msix_control_writable = 0xc000;
constexpr std::size_t msix_entry_bytes = 16;
constexpr std::uint64_t internal_timer_at = 0x1000;  // §2.1

// The byte offset of the dword that holds register field f, and f inside that dword.
constexpr std::uint64_t dword_of(abi::field f) { return f.off / 32 * 4; }
constexpr abi::field in_dword(abi::field f) { return {f.off % 32, f.bits}; }

constexpr std::uint64_t round_up_page(std::uint64_t n) {
    return (n + uar_page_bytes - 1) / uar_page_bytes * uar_page_bytes;
}

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
    const std::uint64_t table_bytes = round_up_page(std::uint64_t{o.firmware.msix_vectors} * msix_entry_bytes);
    const std::uint64_t area = table_bytes + uar_page_bytes;  // table, then one page of PBA
    bar0_layout l{};
    l.msix_table = o.bar0_size > area ? o.bar0_size - area : 0;
    l.msix_pba = l.msix_table + table_bytes;
    l.uar_begin = std::uint64_t{o.firmware.first_uar_page} * uar_page_bytes;
    l.uar_end = l.uar_begin + std::uint64_t{o.firmware.uar_pages} * uar_page_bytes;
    return l;
}

function_model::function_model(function_options options)
    : _options(with_mac(std::move(options))), _layout(layout_of(_options)) {
    if (!std::has_single_bit(_options.bar0_size) || _options.bar0_size < 0x10000) {
        throw std::invalid_argument("mlx5 function model: BAR0 size must be a power of two >= 64 KiB");
    }
    if (_options.log_cmdq_size > 5 || _options.log_cmdq_stride < 6 ||
        _options.log_cmdq_size + _options.log_cmdq_stride > 12) {
        throw std::invalid_argument("mlx5 function model: the command queue must fit one 4 KiB page");
    }
    if (_options.firmware.msix_vectors == 0 || _options.firmware.msix_vectors > 2048) {
        throw std::invalid_argument("mlx5 function model: MSI-X vectors must be 1..2048 (PCI table size)");
    }
    // The init segment (mlx5_ifc.h initial_seg, 0x400c bytes) lies wholly before the first
    // UAR; the UAR pages must end before the MSI-X table.
    if (std::uint64_t{_options.firmware.first_uar_page} * uar_page_bytes < iseg_bytes || _options.firmware.uar_pages == 0 ||
        _layout.uar_end > _layout.msix_table) {
        throw std::invalid_argument("mlx5 function model: UAR pages must lie between the init segment and the "
                                    "MSI-X table at the end of BAR0");
    }
    _bar0 = vu::shared_memory(static_cast<std::size_t>(_options.bar0_size));
    put16(_config.data(), mellanox_vendor_id);
    put16(_config.data() + 2, _options.device_id);
    put16(_config.data() + cfg_status, status_cap_list);
    put32(_config.data() + cfg_class, 0x02000000);  // Ethernet controller, revision 0
    put32(_config.data() + cfg_bar0, bar_mem64_prefetchable);
    put16(_config.data() + cfg_subsystem, mellanox_vendor_id);
    _config[cfg_cap_ptr] = static_cast<std::byte>(msix_cap_offset);
    _config[msix_cap_offset] = static_cast<std::byte>(cap_id_msix);
    _config[msix_cap_offset + 1] = std::byte{0};  // the last capability
    put16(_config.data() + msix_control, static_cast<std::uint16_t>(_options.firmware.msix_vectors - 1));
    put32(_config.data() + msix_cap_offset + 4, static_cast<std::uint32_t>(_layout.msix_table));  // BIR 0
    put32(_config.data() + msix_cap_offset + 8, static_cast<std::uint32_t>(_layout.msix_pba));    // BIR 0
    {
        std::lock_guard g(_lock);
        reset_locked();
    }
    _thread = std::thread([this] { firmware_loop(); });
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
        d.size = _config.size();
        d.readable = d.writable = true;
    } else if (index == 0) {
        d.size = _options.bar0_size;
        d.readable = d.writable = true;
        // The UAR pages are shared: doorbells there cost no message (reference §4.1; the data
        // path rings them millions of times a second). Everything else stays trapped.
        d.fd = _bar0.fd();
        d.fd_offset = 0;
        d.memory = _bar0.data();
        d.shared.push_back({_layout.uar_begin, _layout.uar_end - _layout.uar_begin});
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
        // a function that fell off the bus: every read completes with all ones (§1.4)
        std::fill(out.begin(), out.end(), std::byte{0xff});
        return true;
    }
    if (region == vu::config_region) {
        std::memcpy(out.data(), _config.data() + offset, out.size());
        return true;
    }
    if (region != 0) {
        return false;
    }
    std::fill(out.begin(), out.end(), std::byte{0});
    if (offset >= _layout.msix_table) {
        std::memcpy(out.data(), _bar0.data() + offset, out.size());  // MSI-X table and PBA
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
        // the table is the client's to write; the PBA is read-only
        const std::uint64_t end = std::min<std::uint64_t>(offset + in.size(), _layout.msix_pba);
        if (offset < end) {
            std::memcpy(_bar0.data() + offset, in.data(), static_cast<std::size_t>(end - offset));
        }
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

void function_model::config_write(std::uint64_t offset, std::span<const std::byte> in) {
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::uint64_t at = offset + i;
        if (at == cfg_command || at == cfg_command + 1) {
            const auto mask = static_cast<std::uint8_t>(command_writable >> (8 * (at - cfg_command)));
            _config[at] = in[i] & std::byte{mask};
        } else if (at >= cfg_bar0 && at < cfg_bar0 + 8) {
            _config[at] = in[i];
        } else if (at == msix_control + 1) {
            // MSI-X enable and function mask; the table size bits are read-only
            const auto keep = std::byte{0x3f};
            _config[at] = (_config[at] & keep) | (in[i] & std::byte{msix_control_writable >> 8});
        }
    }
    // BAR0: the size's low bits read 0, the type bits read as a 64-bit prefetchable BAR
    const std::uint32_t low = get32(_config.data() + cfg_bar0);
    const auto size_mask = static_cast<std::uint32_t>(~(_options.bar0_size - 1));
    put32(_config.data() + cfg_bar0, (low & size_mask & 0xfffffff0u) | bar_mem64_prefetchable);
    _bar0_base = (std::uint64_t{get32(_config.data() + cfg_bar0 + 4)} << 32) | (low & size_mask & 0xfffffff0u);
}

void function_model::reset() {
    std::unique_lock g(_lock);
    reset_locked();
    _config[cfg_command] = std::byte{0};
    _config[cfg_command + 1] = std::byte{0};
    _config[msix_control + 1] &= std::byte{0x3f};  // MSI-X disabled, unmasked
    _kicked = true;  // the firmware thread re-plans: its commands and EQs are gone
    g.unlock();
    _wake.notify_one();
    _idle.notify_all();
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
    // what matters to a driver is that it is not 0xffffffff while the function lives (§1.4).
    constexpr auto h = iseg::health_buffer;
    abi::set(_iseg, h(ifc::health_buffer::fw_version),
             std::uint64_t{_options.fw_rev_major & 0xffu} << 24 | std::uint64_t{_options.fw_rev_minor & 0xffu} << 16 |
                 _options.fw_rev_subminor);
    _ready_at = clock::now() + _options.init_time;
    _last = {};
    _pending = 0;
    _completed = 0;
    _page_request_sent = false;
    _fault_struck = false;
    _fatal = _silent = _dead = false;
    _fail_next.clear();
    clear_uar_pages();
    std::fill(_bar0.data() + _layout.msix_table, _bar0.data() + _options.bar0_size, std::byte{0});
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
    if (p.what == fault_plan::kind::none || _fault_struck || _completed < p.after_commands) {
        return;
    }
    _fault_struck = true;
    log().warn("mlx5: planned fault strikes after {} commands", _completed);
    switch (p.what) {
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
