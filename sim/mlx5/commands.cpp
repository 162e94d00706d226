// The firmware's commands (firmware.hpp). Order of checks in every command, as a card does:
// opcode known, input and output long enough for the command's fixed part, function state,
// then parameters.
#include <algorithm>
#include <array>

#include "abi/mlx5/ifc/cmdq.hpp"
#include "abi/mlx5/ifc/hca.hpp"
#include "sim/mlx5/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;
using ifc::cmd_status;

firmware::firmware(firmware_options options) : _options(options) {}

void firmware::reset() {
    _state = hca_state::disabled;
    _issi = 0;
    _pages.clear();
}

std::vector<std::byte> firmware::execute(std::span<const std::byte> in, std::size_t inlen, std::size_t outlen,
                                         vfio_user::dma_space* dma) {
    call c{.in = in,
           .inlen = inlen,
           .outlen = outlen,
           .out = std::vector<std::byte>(std::max(outlen, ifc::cmdq::inline_bytes)),
           .opcode = static_cast<std::uint16_t>(abi::get<ifc::mbox_in::opcode>(in)),
           .op_mod = static_cast<std::uint16_t>(abi::get<ifc::mbox_in::op_mod>(in)),
           .dma = dma};
    ++_executed;
    using op = ifc::opcode;
    switch (static_cast<op>(c.opcode)) {
    case op::nop: nop(c); break;
    case op::enable_hca: enable_hca(c); break;
    case op::disable_hca: disable_hca(c); break;
    case op::query_issi: query_issi(c); break;
    case op::set_issi: set_issi(c); break;
    case op::query_pages: query_pages(c); break;
    case op::manage_pages: manage_pages(c); break;
    case op::init_hca: init_hca(c); break;
    case op::teardown_hca: teardown_hca(c); break;
    // ---- capabilities, vport, RoCE address (caps.cpp) ----
    // ---- event queues (events.cpp) ----
    // ---- resource objects: UAR, PD, MKEY, CQ, QP (objects.cpp, qp.cpp) ----
    default: c.fail(cmd_status::bad_op_err, failure::bad_opcode); break;
    }
    if (!c.failed) {
        log().debug("command {:#x} ({}) op_mod {:#x}: ok", c.opcode, ifc::to_string(static_cast<op>(c.opcode)),
                    c.op_mod);
    }
    return std::move(c.out);
}

void firmware::nop(call& c) {
    c.sizes<ifc::nop_in, ifc::nop_out>();
}

void firmware::enable_hca(call& c) {
    using In = ifc::enable_hca_in;
    if (!c.sizes<In, ifc::enable_hca_out>()) {
        return;
    }
    if (_state != hca_state::disabled) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return;
    }
    if (c.get(In::function_id) != 0 || c.get(In::embedded_cpu_function) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    _state = hca_state::enabled;
}

void firmware::disable_hca(call& c) {
    using In = ifc::disable_hca_in;
    if (!c.sizes<In, ifc::disable_hca_out>()) {
        return;
    }
    if (_state == hca_state::disabled) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return;
    }
    if (c.get(In::function_id) != 0 || c.get(In::embedded_cpu_function) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    _state = hca_state::disabled;
    _issi = 0;
}

void firmware::query_issi(call& c) {
    using Out = ifc::query_issi_out;
    if (!c.sizes<ifc::query_issi_in, Out>()) {
        return;
    }
    c.set(Out::current_issi, _issi);
    c.set(Out::supported_issi_dw0, 0x3);  // ISSI 0 and 1, as firmware with ISSI 1 support
}

void firmware::set_issi(call& c) {
    using In = ifc::set_issi_in;
    if (!c.sizes<In, ifc::set_issi_out>()) {
        return;
    }
    const std::uint64_t issi = c.get(In::current_issi);
    if (issi > 1) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    _issi = static_cast<std::uint16_t>(issi);
}

void firmware::query_pages(call& c) {
    using In = ifc::query_pages_in;
    using Out = ifc::query_pages_out;
    if (!c.sizes<In, Out>()) {
        return;
    }
    if (c.get(In::function_id) != 0 || c.get(In::embedded_cpu_function) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    const std::size_t owned = _pages.size();
    const std::size_t boot = _options.boot_pages;
    const std::size_t init = boot + _options.init_pages;
    std::size_t wanted = 0;
    switch (static_cast<ifc::query_pages_op_mod>(c.op_mod)) {
    case ifc::query_pages_op_mod::boot_pages: wanted = owned >= boot ? 0 : boot - owned; break;
    case ifc::query_pages_op_mod::init_pages: wanted = owned >= init ? 0 : init - owned; break;
    case ifc::query_pages_op_mod::regular_pages: wanted = 0; break;
    default: c.fail(cmd_status::bad_param_err, failure::bad_parameter); return;
    }
    c.set(Out::function_id, 0);
    c.set(Out::num_pages, static_cast<std::uint32_t>(wanted));
}

void firmware::manage_pages(call& c) {
    using In = ifc::manage_pages_in;
    using Out = ifc::manage_pages_out;
    if (!c.sizes<In, Out>()) {
        return;
    }
    if (c.get(In::function_id) != 0 || c.get(In::embedded_cpu_function) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    const std::uint64_t n = c.get(In::input_num_entries);
    switch (static_cast<ifc::manage_pages_op_mod>(c.op_mod)) {
    case ifc::manage_pages_op_mod::allocation_fail:
        return;  // the driver could not give what was asked: nothing changes
    case ifc::manage_pages_op_mod::allocation_success: {
        if (n > _options.max_pages || _pages.size() + n > _options.max_pages) {
            c.fail(cmd_status::bad_param_err, failure::too_many_pages);
            return;
        }
        if (c.inlen < ifc::length_with_pas<In>(n)) {
            c.fail(cmd_status::bad_inp_len_err, failure::input_too_short);
            return;
        }
        // all or nothing: check every page before keeping any
        std::vector<std::uint64_t> given;
        given.reserve(n);
        std::array<std::byte, 4096> probe;
        for (std::size_t i = 0; i < n; ++i) {
            const std::uint64_t pa = c.get(ifc::pas_entry<In>(i));
            if ((pa & 0xfff) != 0) {
                c.fail(cmd_status::bad_param_err, failure::unaligned_page);
                return;
            }
            if (_pages.contains(pa) || std::find(given.begin(), given.end(), pa) != given.end()) {
                c.fail(cmd_status::bad_param_err, failure::page_already_given);
                return;
            }
            // the page must lie in memory the driver mapped for the device (a refused probe is
            // recorded as a DMA fault by dma_space)
            if (c.dma == nullptr || !c.dma->read(pa, probe)) {
                c.fail(cmd_status::bad_param_err, failure::page_not_mapped);
                return;
            }
            given.push_back(pa);
        }
        _pages.insert(given.begin(), given.end());
        return;
    }
    case ifc::manage_pages_op_mod::hca_return_pages: {
        if (n > _options.max_pages) {
            c.fail(cmd_status::bad_param_err, failure::too_many_pages);
            return;
        }
        if (c.outlen < ifc::length_with_pas<Out>(n)) {
            c.fail(cmd_status::bad_outp_len_err, failure::output_too_short);
            return;
        }
        // While initialized the firmware keeps the boot and init pages it runs on; it returns
        // up to n of the others (output_num_entries says how many, as on a card).
        std::size_t keep = 0;
        if (_state == hca_state::initialized) {
            keep = std::size_t{_options.boot_pages} + _options.init_pages;
        }
        const std::size_t spare = _pages.size() > keep ? _pages.size() - keep : 0;
        const std::size_t returned = std::min<std::size_t>(spare, n);
        for (std::size_t i = 0; i < returned; ++i) {
            auto last = std::prev(_pages.end());
            c.set(ifc::pas_entry<Out>(i), *last);
            _pages.erase(last);
        }
        c.set(Out::output_num_entries, returned);
        return;
    }
    }
    c.fail(cmd_status::bad_param_err, failure::bad_parameter);
}

void firmware::init_hca(call& c) {
    if (!c.sizes<ifc::init_hca_in, ifc::init_hca_out>()) {
        return;
    }
    if (_state != hca_state::enabled) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return;
    }
    if (_pages.size() < std::size_t{_options.boot_pages} + _options.init_pages) {
        c.fail(cmd_status::bad_sys_state_err, failure::pages_missing);
        return;
    }
    _state = hca_state::initialized;
}

void firmware::teardown_hca(call& c) {
    using In = ifc::teardown_hca_in;
    using Out = ifc::teardown_hca_out;
    if (!c.sizes<In, Out>()) {
        return;
    }
    if (_state != hca_state::initialized) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return;
    }
    const auto profile = static_cast<ifc::teardown_profile>(c.get(In::profile));
    if (profile != ifc::teardown_profile::graceful_close && profile != ifc::teardown_profile::force_close) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);  // no fast teardown (not advertised)
        return;
    }
    _state = hca_state::enabled;
    c.set(Out::state, static_cast<std::uint8_t>(ifc::teardown_state::success));
}

}  // namespace rig::sim::mlx5
