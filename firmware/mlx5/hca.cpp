#include "firmware/mlx5/hca.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/hca.hpp"
#include "abi/mlx5/ifc/init_seg.hpp"
#include "abi/mlx5/ifc/vport.hpp"
#include "firmware/log.hpp"
#include "firmware/mlx5/objects.hpp"

namespace rig::firmware::mlx5 {

namespace {

using iseg = ifc::initial_seg;

error with_prefix(error e, const std::string& prefix) {
    e.message = prefix + e.message;
    return e;
}

bool firmware_gone(const error& e) { return e.kind == error_kind::timeout || e.kind == error_kind::fatal; }


}  // namespace

std::string_view to_string(bring_up_step s) noexcept {
    switch (s) {
    case bring_up_step::wait_initializing: return "WAIT_INITIALIZING";
    case bring_up_step::command_queue: return "COMMAND_QUEUE";
    case bring_up_step::enable_hca: return "ENABLE_HCA";
    case bring_up_step::issi: return "ISSI";
    case bring_up_step::boot_pages: return "BOOT_PAGES";
    case bring_up_step::host_endianness: return "HOST_ENDIANNESS";
    case bring_up_step::capabilities: return "CAPABILITIES";
    case bring_up_step::init_pages: return "INIT_PAGES";
    case bring_up_step::init_hca: return "INIT_HCA";
    case bring_up_step::nic_vport: return "NIC_VPORT";
    case bring_up_step::gid: return "GID";
    case bring_up_step::uar: return "UAR";
    case bring_up_step::event_queue: return "EVENT_QUEUE";
    case bring_up_step::ready: return "READY";
    }
    return "UNKNOWN";
}

std::string_view to_string(teardown_step s) noexcept {
    switch (s) {
    case teardown_step::event_queue: return "EVENT_QUEUE";
    case teardown_step::uar: return "DEALLOC_UAR";
    case teardown_step::teardown_hca: return "TEARDOWN_HCA";
    case teardown_step::reclaim_pages: return "RECLAIM_PAGES";
    case teardown_step::disable_hca: return "DISABLE_HCA";
    case teardown_step::done: return "DONE";
    }
    return "UNKNOWN";
}

std::string firmware_version::text() const {
    return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(subminor);
}

std::array<std::uint8_t, 16> link_local_gid(const std::array<std::uint8_t, 6>& mac) noexcept {
    return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, static_cast<std::uint8_t>(mac[0] ^ 0x02), mac[1], mac[2], 0xff, 0xfe,
            mac[3], mac[4], mac[5]};
}

hca::hca(driver::function& fn, const hca_options& options)
    : _fn(fn), _options(options), _stranded(std::make_unique<stranded_memory>()) {
    _options.events.stranded = _stranded.get();
}

hca::~hca() {
    if (!_torn_down) {
        if (auto r = teardown(); !r) {
            log().warn("mlx5 on {}: teardown at destruction: {}", _fn.name(), r.error().message);
        }
    }
    if (dead() && _queue) {
        // The firmware may still write the command queue page and its mailboxes: kept mapped for
        // the life of the process (the stranded report named them), never unmapped.
        keep_for_process(std::shared_ptr<command_queue>(std::move(_queue)));
    }
}

result<std::unique_ptr<hca>> hca::bring_up(driver::function& fn, const hca_options& options) {
    std::unique_ptr<hca> h(new hca(fn, options));
    if (auto r = h->run_steps(); !r) {
        return std::unexpected(std::move(r.error()));
    }
    return h;
}

void hca::note(const error& e) {
    if (!firmware_gone(e)) {
        return;
    }
    std::lock_guard g(_lock);
    if (!_failure) {
        _failure = e;
    }
}

std::optional<error> hca::failure() const {
    {
        std::lock_guard g(_lock);
        if (_failure) {
            return _failure;
        }
    }
    if (_queue) {
        return _queue->failure();
    }
    return std::nullopt;
}

bool hca::dead() const { return failure().has_value(); }

result<void> hca::run_steps() {
    for (auto s = bring_up_step::wait_initializing; s != bring_up_step::ready;
         s = static_cast<bring_up_step>(static_cast<int>(s) + 1)) {
        _reached = s;
        if (auto r = step(s); !r) {
            error e = with_prefix(std::move(r.error()), "bring-up step " + std::string(to_string(s)) + ": ");
            note(e);
            log().debug("mlx5 on {}: {}", _fn.name(), e.message);  // the caller reports it
            if (auto u = undo(); !u) {
                log().warn("mlx5 on {}: undoing the bring-up: {}", _fn.name(), u.error().message);
            }
            return std::unexpected(std::move(e));
        }
    }
    _reached = bring_up_step::ready;
    log().info("mlx5 on {}: up, firmware {}", _fn.name(), _version.text());
    return {};
}

result<void> hca::step(bring_up_step s) {
    const auto& t = _options.timeouts;
    const auto now = clock::now();
    switch (s) {
    case bring_up_step::wait_initializing: return wait_initializing(now + t.wait_initializing);
    case bring_up_step::command_queue: {
        command_queue_options o = _options.queue;
        o.init_timeout = t.command_queue;
        auto q = command_queue::create(_fn, o);
        if (!q) {
            return std::unexpected(std::move(q.error()));
        }
        _queue = std::move(*q);
        if (_options.trace) {
            _queue->trace(_options.trace);
        }
        _pages = std::make_unique<page_supply>(_fn, *_queue, *_stranded, _options.pages);
        return {};
    }
    case bring_up_step::enable_hca: {
        auto r = exec_simple(ifc::opcode::enable_hca, 0, ifc::enable_hca_in::size_bytes,
                             ifc::enable_hca_out::size_bytes, now + t.enable_hca);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
        _enabled = true;
        return {};
    }
    case bring_up_step::issi: return issi(now + t.issi);
    case bring_up_step::boot_pages: return _pages->satisfy(ifc::query_pages_op_mod::boot_pages, now + t.boot_pages);
    case bring_up_step::host_endianness: return host_endianness(now + t.host_endianness);
    case bring_up_step::capabilities: return capabilities(now + t.capabilities);
    case bring_up_step::init_pages: return _pages->satisfy(ifc::query_pages_op_mod::init_pages, now + t.init_pages);
    case bring_up_step::init_hca: {
        auto r = exec_simple(ifc::opcode::init_hca, 0, ifc::init_hca_in::size_bytes, ifc::init_hca_out::size_bytes,
                             now + t.init_hca);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
        _initialized = true;
        return {};
    }
    case bring_up_step::nic_vport: return nic_vport(now + t.nic_vport);
    case bring_up_step::gid: return gid(now + t.gid);
    case bring_up_step::uar: {
        auto u = alloc_uar(*_queue, now + t.uar);
        if (!u) {
            return std::unexpected(std::move(u.error()));
        }
        _uar = *u;
        return {};
    }
    case bring_up_step::event_queue: return _options.use_events ? event_queue(now + t.event_queue) : result<void>{};
    case bring_up_step::ready: return {};
    }
    return {};
}

result<std::vector<std::byte>> hca::exec_simple(ifc::opcode op, std::uint16_t op_mod, std::size_t in_bytes,
                                                std::size_t out_bytes, clock::time_point by) {
    auto in = command_input<ifc::mbox_in>(op, op_mod, in_bytes);
    return _queue->exec(in, out_bytes, by);
}

result<void> hca::wait_initializing(clock::time_point by) {
    // Read as the queue does: one big-endian dword at a time through the function.
    const auto dword = [&](std::uint64_t offset) -> result<std::uint32_t> {
        std::array<std::byte, 4> b{};
        if (auto r = _fn.region_read(driver::region::bar0, offset, b); !r) {
            return std::unexpected(plain_error(error_kind::transport, "mlx5 init segment read at " +
                                                                          abi::hex(offset) + ": " + r.error().message));
        }
        return abi::load_be<std::uint32_t>(b.data());
    };
    auto rev = dword(iseg::fw_rev_minor.byte_offset());
    auto sub = rev ? dword(iseg::fw_rev_subminor.byte_offset() & ~std::size_t{3}) : rev;
    if (!rev || !sub) {
        return std::unexpected(std::move(!rev ? rev.error() : sub.error()));
    }
    // A function that no longer answers PCIe reads (removed, in reset, or dead) reads all ones;
    // the kernel's mlx5 health check treats fw_ver 0xffffffff so (health.c sensor_pci_not_working).
    // Say so now rather than wait out the whole initializing limit.
    if (*rev == 0xffffffffu && *sub == 0xffffffffu) {
        return std::unexpected(plain_error(error_kind::fatal, "the function reads all ones (firmware version "
                                                              "0xffffffff): not responding on PCIe"));
    }
    _version.major = static_cast<std::uint16_t>(*rev & 0xffff);
    _version.minor = static_cast<std::uint16_t>(*rev >> 16);
    _version.subminor = static_cast<std::uint16_t>(*sub & 0xffff);
    const std::uint64_t at = iseg::initializing.off / 32 * 4;
    const std::uint32_t bit = 1u << (31 - iseg::initializing.off % 32);
    auto pause = std::chrono::microseconds(50);
    for (;;) {
        auto d = dword(at);
        if (!d) {
            return std::unexpected(std::move(d.error()));
        }
        if ((*d & bit) == 0) {
            return {};
        }
        const auto now = clock::now();
        if (now >= by) {
            return std::unexpected(plain_error(
                error_kind::timeout, "the firmware did not finish initializing within " +
                                         std::to_string(_options.timeouts.wait_initializing.count()) + " ms"));
        }
        std::this_thread::sleep_for(std::min<clock::duration>(pause, by - now));
        pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
}

result<void> hca::issi(clock::time_point by) {
    using Out = ifc::query_issi_out;
    auto q = exec_simple(ifc::opcode::query_issi, 0, ifc::query_issi_in::size_bytes, Out::size_bytes, by);
    if (!q) {
        return std::unexpected(std::move(q.error()));
    }
    // rdma-core requires ISSI 1 (supported_issi_dw0 bit 1); the objects' layouts are ISSI 1's
    if ((abi::get<Out::supported_issi_dw0>(*q) & 0x2) == 0) {
        return std::unexpected(plain_error(error_kind::bad_output,
                                           "the firmware does not support ISSI 1 (supported_issi_dw0 " +
                                               abi::hex(abi::get<Out::supported_issi_dw0>(*q)) + ")"));
    }
    auto in = command_input<ifc::set_issi_in>(ifc::opcode::set_issi);
    abi::set<ifc::set_issi_in::current_issi>(in, 1);
    auto s = _queue->exec<ifc::set_issi_in, ifc::set_issi_out>(in, by);
    if (!s) {
        return std::unexpected(std::move(s.error()));
    }
    return {};
}

result<void> hca::host_endianness(clock::time_point by) {
    using In = ifc::access_register_in;
    constexpr std::size_t n = ifc::access_reg::host_endianness_bytes;
    auto in = command_input<In>(ifc::opcode::access_reg, ifc::access_reg::op_mod_write, In::size_bytes + n);
    abi::set<In::register_id>(in, ifc::access_reg::reg_host_endianness);
    in[In::size_bytes] = std::endian::native == std::endian::little ? std::byte{0x00} : std::byte{0x80};
    auto r = _queue->exec(in, ifc::access_register_out::size_bytes + n, by);
    if (!r) {
        return std::unexpected(std::move(r.error()));
    }
    return {};
}

result<void> hca::capabilities(clock::time_point by) {
    auto c = negotiate_capabilities(*_queue, _options.init_link_down, by, _options.checksums);
    if (!c) {
        return std::unexpected(std::move(c.error()));
    }
    _caps = *c;
    // The device checks and makes signatures from SET_HCA_CAP on: check its completions too,
    // as the kernel does whenever checksum_disabled is clear (cmd.c verify_signature).
    _queue->verify_signatures(_caps.cmdif_checksum);
    return {};
}

result<void> hca::nic_vport(clock::time_point by) {
    using MIn = ifc::modify_nic_vport_context_in;
    using QIn = ifc::query_nic_vport_context_in;
    using QOut = ifc::query_nic_vport_context_out;
    using ctx = ifc::nic_vport_context;
    auto in = command_input<MIn>(ifc::opcode::modify_nic_vport_context);
    abi::set<MIn::field_select(ifc::modify_nic_vport_field_select::roce_en)>(in, 1);
    abi::set<MIn::nic_vport_context(ctx::roce_en)>(in, 1);
    if (auto r = _queue->exec<MIn, ifc::modify_nic_vport_context_out>(in, by); !r) {
        return std::unexpected(std::move(r.error()));
    }
    auto q = _queue->exec<QIn, QOut>(command_input<QIn>(ifc::opcode::query_nic_vport_context), by);
    if (!q) {
        return std::unexpected(std::move(q.error()));
    }
    if (abi::get<QOut::nic_vport_context(ctx::roce_en)>(*q) != 1) {
        return std::unexpected(
            plain_error(error_kind::bad_output, "RoCE is still disabled after MODIFY_NIC_VPORT_CONTEXT"));
    }
    // the MAC: the last 6 bytes of permanent_address (kernel vport.c copies &out_addr[2])
    constexpr auto permanent = QOut::nic_vport_context(ctx::permanent_address.whole());
    const auto mac = abi::bytes_of(std::span<const std::byte>(*q), permanent);
    for (std::size_t i = 0; i < 6; ++i) {
        _mac[i] = std::to_integer<std::uint8_t>(mac[2 + i]);
    }
    _port_mtu = static_cast<std::uint16_t>(abi::get<QOut::nic_vport_context(ctx::mtu)>(*q));
    using SIn = ifc::query_vport_state_in;
    using SOut = ifc::query_vport_state_out;
    auto st = _queue->exec<SIn, SOut>(command_input<SIn>(ifc::opcode::query_vport_state), by);
    if (!st) {
        return std::unexpected(std::move(st.error()));
    }
    _port_up = abi::get<SOut::state>(*st) == static_cast<std::uint8_t>(ifc::vport_state::up);
    return {};
}

ifc::qpc_mtu hca::path_mtu() const noexcept {
    constexpr int roce_headers = 40 + 8 + 12 + 4 + 28 + 4;  // kernel iboe_get_mtu
    const int room = int{_port_mtu} - roce_headers;
    if (_port_mtu == 0) {
        return ifc::qpc_mtu::bytes_1k;
    }
    if (room >= 4096) {
        return ifc::qpc_mtu::bytes_4k;
    }
    if (room >= 2048) {
        return ifc::qpc_mtu::bytes_2k;
    }
    if (room >= 1024) {
        return ifc::qpc_mtu::bytes_1k;
    }
    return room >= 512 ? ifc::qpc_mtu::bytes_512 : ifc::qpc_mtu::bytes_256;
}

result<void> hca::gid(clock::time_point by) {
    using In = ifc::set_roce_address_in;
    using addr = ifc::roce_addr_layout;
    gid_entry e;
    e.index = 0;
    e.gid = link_local_gid(_mac);
    e.roce_version = ifc::roce_addr::version_2;
    e.l3_type = ifc::roce_addr::l3_type_ipv6;
    auto in = command_input<In>(ifc::opcode::set_roce_address);
    abi::set<In::roce_address_index>(in, e.index);
    auto l3 = abi::bytes_of(std::span<std::byte>(in), In::roce_address(addr::source_l3_address));
    std::transform(e.gid.begin(), e.gid.end(), l3.begin(), [](std::uint8_t b) { return std::byte{b}; });
    abi::set<In::roce_address(addr::source_mac_47_32)>(in, std::uint64_t{_mac[0]} << 8 | _mac[1]);
    abi::set<In::roce_address(addr::source_mac_31_0)>(
        in, std::uint64_t{_mac[2]} << 24 | std::uint64_t{_mac[3]} << 16 | std::uint64_t{_mac[4]} << 8 | _mac[5]);
    abi::set<In::roce_address(addr::roce_version)>(in, e.roce_version);
    abi::set<In::roce_address(addr::roce_l3_type)>(in, e.l3_type);
    if (auto r = _queue->exec<In, ifc::set_roce_address_out>(in, by); !r) {
        return std::unexpected(std::move(r.error()));
    }
    _gids = {e};
    return {};
}

result<void> hca::event_queue(clock::time_point by) {
    event_handlers h;
    h.page_request = [this](std::uint16_t, std::int32_t n) {
        const auto by_ = clock::now() + _options.timeouts.page_request;
        if (n > 0) {
            if (auto r = _pages->give(static_cast<std::size_t>(n), by_, page_supply::slot::page_request); !r) {
                note(r.error());
                log().error("mlx5 on {}: page request for {} page(s): {}", _fn.name(), n, r.error().message);
            }
        } else if (n < 0) {
            auto r = _pages->take(static_cast<std::size_t>(-static_cast<std::int64_t>(n)), by_,
                                  page_supply::slot::page_request);
            if (!r) {
                note(r.error());
                log().error("mlx5 on {}: page return of {} page(s): {}", _fn.name(), -n, r.error().message);
            }
        }
    };
    h.port_change = [this](std::uint8_t port, bool up) {
        _port_up = up;
        if (_options.port_change) {
            _options.port_change(port, up);
        }
    };
    h.completion = _options.completion;
    h.qp_event = _options.qp_event;
    h.fatal = [this](const error& e) {
        {
            std::lock_guard g(_lock);
            if (!_failure) {
                _failure = e;
            }
        }
        if (_options.fatal) {
            _options.fatal(e);
        }
    };
    auto ev = events::start(_fn, *_queue, *_uar, std::move(h), _options.events, by);
    if (!ev) {
        return std::unexpected(std::move(ev.error()));
    }
    _events = std::move(*ev);
    return {};
}

command_queue& hca::commands() {
    if (_torn_down || !_queue) {
        throw std::invalid_argument("mlx5 hca on " + std::string(_fn.name()) + ": commands() after teardown");
    }
    return *_queue;
}

page_supply& hca::pages() {
    if (_torn_down || !_pages) {
        throw std::invalid_argument("mlx5 hca on " + std::string(_fn.name()) + ": pages() after teardown");
    }
    return *_pages;
}

result<void> hca::teardown() {
    if (_torn_down) {
        if (_teardown_error) {
            return std::unexpected(*_teardown_error);
        }
        return {};
    }
    auto r = undo();
    _torn_down = true;
    if (!r) {
        _teardown_error = r.error();
    }
    return r;
}

result<void> hca::undo() {
    const auto& t = _options.timeouts;
    std::optional<error> first;
    const auto failed_at = [&](teardown_step s, error e) {
        note(e);
        e = with_prefix(std::move(e), "teardown step " + std::string(to_string(s)) + ": ");
        log().debug("mlx5 on {}: {}", _fn.name(), e.message);  // the caller reports the first
        if (!first) {
            first = std::move(e);
        }
    };
    if (_events) {
        if (auto r = _events->stop(*_stranded, clock::now() + t.stop_events); !r) {
            failed_at(teardown_step::event_queue, std::move(r.error()));
        }
        _events.reset();
    }
    if (_uar && !dead()) {
        if (auto r = dealloc_uar(*_queue, *_uar, clock::now() + t.dealloc_uar); !r) {
            failed_at(teardown_step::uar, std::move(r.error()));
        }
    }
    _uar.reset();
    if (_initialized && !dead()) {
        using In = ifc::teardown_hca_in;
        using Out = ifc::teardown_hca_out;
        auto in = command_input<In>(ifc::opcode::teardown_hca);
        abi::set<In::profile>(in, static_cast<std::uint16_t>(ifc::teardown_profile::graceful_close));
        auto r = _queue->exec<In, Out>(in, clock::now() + t.teardown_hca);
        if (!r) {
            failed_at(teardown_step::teardown_hca, std::move(r.error()));
        } else if (abi::get<Out::state>(*r) != static_cast<std::uint8_t>(ifc::teardown_state::success)) {
            failed_at(teardown_step::teardown_hca,
                      plain_error(error_kind::bad_output, "TEARDOWN_HCA reports state FAIL"));
        }
    }
    _initialized = false;
    if (_pages && !dead()) {
        if (auto r = _pages->reclaim(clock::now() + t.reclaim_pages); !r) {
            failed_at(teardown_step::reclaim_pages, std::move(r.error()));
        }
    }
    if (_enabled && !dead()) {
        auto r = exec_simple(ifc::opcode::disable_hca, 0, ifc::disable_hca_in::size_bytes,
                             ifc::disable_hca_out::size_bytes, clock::now() + t.disable_hca);
        if (!r) {
            failed_at(teardown_step::disable_hca, std::move(r.error()));
        }
    }
    _enabled = false;
    if (_pages) {
        if (dead() || _pages->given() != 0) {
            // the firmware may still use what it was given: never freed
            _pages->strand(dead() ? "the firmware stopped answering" : "not taken back");
        }
        _pages.reset();
    }
    if (_queue && !dead()) {
        _queue.reset();  // unmaps the queue page and the mailboxes
    }
    if (first) {
        return std::unexpected(std::move(*first));
    }
    return {};
}

std::vector<stranded_region> hca::stranded() const {
    std::vector<stranded_region> out = _stranded->report();
    if (_queue) {
        for (const stranded_command& c : _queue->stranded()) {
            const std::string slot = "command slot " + std::to_string(c.slot);
            out.push_back({slot + " (" + std::string(ifc::to_string(c.opcode)) + ")", c.entry_iova, 64});
            for (const std::uint64_t b : c.mailbox_iovas) {
                out.push_back({"mailbox block of " + slot, b, 1024});
            }
        }
        if (dead()) {
            out.push_back({"command queue page", _queue->queue_iova(), 4096});
        }
    }
    return out;
}

}  // namespace rig::firmware::mlx5
