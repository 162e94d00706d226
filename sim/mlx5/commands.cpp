// The firmware's commands (firmware.hpp). Order of checks in every command, as a card does:
// opcode known, input and output long enough for the command's fixed part, function state,
// then parameters.
#include <algorithm>
#include <array>
#include <cstring>

#include "abi/mlx5/ifc/cmdq.hpp"
#include "abi/mlx5/ifc/hca.hpp"
#include "abi/pci_ids.hpp"
#include "sim/mlx5/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace ifc = rig::mlx5::ifc;
using ifc::cmd_status;

namespace {
constexpr std::uint32_t mellanox_oui = 0x0002c9;
}  // namespace

firmware::firmware(firmware_options options) : _options(options) {
    assign_mac();
    reset_caps();
}

void firmware::reset() {
    _state = hca_state::disabled;
    _issi = 0;
    {
        std::lock_guard g(_ledger->lock);
        _ledger->pages.clear();  // a function reset takes the pages from the firmware, lawfully
    }
    reset_caps();
    drop_objects();  // resource objects (objects.cpp)
}

// ---- firmware pages -------------------------------------------------------------------------

void page_ledger::violation(std::uint64_t iova, std::string what) {
    violations.push_back({iova, std::move(what)});
}

void page_ledger::unmapped(std::uint64_t iova, std::uint64_t size) {
    std::lock_guard g(lock);
    std::size_t n = 0;
    for (auto it = pages.lower_bound(iova); it != pages.end() && *it < iova + size; ++it, ++n) {
        violation(*it, "unmapped by the driver while owned by the firmware");
    }
    if (n > 0) {
        log().error("mlx5: {} firmware page(s) unmapped by the driver while owned by the firmware, the first at "
                    "{:#x} (DMA window [{:#x}, +{:#x}))",
                    n, violations[violations.size() - n].iova, iova, size);
    }
}

std::set<std::uint64_t> firmware::pages() const {
    std::lock_guard g(_ledger->lock);
    return _ledger->pages;
}

std::size_t firmware::pages_owned() const {
    std::lock_guard g(_ledger->lock);
    return _ledger->pages.size();
}

bool firmware::owns(std::uint64_t page) const {
    std::lock_guard g(_ledger->lock);
    return _ledger->pages.contains(page);
}

std::vector<page_violation> firmware::page_violations() const {
    std::lock_guard g(_ledger->lock);
    return _ledger->violations;
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
    case op::query_adapter: query_adapter(c); break;
    // ---- capabilities, vport, RoCE address (caps.cpp) ----
    case op::query_hca_cap: query_hca_cap(c); break;
    case op::set_hca_cap: set_hca_cap(c); break;
    case op::access_reg: access_reg(c); break;
    case op::query_vport_state: query_vport_state(c); break;
    case op::query_nic_vport_context: query_nic_vport_context(c); break;
    case op::modify_nic_vport_context: modify_nic_vport_context(c); break;
    case op::set_roce_address: set_roce_address(c); break;
    case op::query_roce_address: query_roce_address(c); break;
    // ---- resource objects: UAR, PD, MKEY, CQ, QP (objects.cpp, qp.cpp) ----
    case op::alloc_uar: alloc_uar(c); break;
    case op::dealloc_uar: dealloc_uar(c); break;
    case op::alloc_pd: alloc_pd(c); break;
    case op::dealloc_pd: dealloc_pd(c); break;
    case op::create_mkey: create_mkey(c); break;
    case op::destroy_mkey: destroy_mkey(c); break;
    case op::create_eq: create_eq(c); break;
    case op::destroy_eq: destroy_eq(c); break;
    case op::create_cq: create_cq(c); break;
    case op::destroy_cq: destroy_cq(c); break;
    case op::create_qp: create_qp(c); break;
    case op::destroy_qp: destroy_qp(c); break;
    case op::rst2init_qp:
    case op::init2init_qp:
    case op::init2rtr_qp:
    case op::rtr2rts_qp:
    case op::rts2rts_qp:
    case op::sqerr2rts_qp:
    case op::sqd_rts_qp:
    case op::qp_2err:
    case op::qp_2rst: modify_qp(c); break;
    case op::query_qp: query_qp(c); break;
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
    if (!c.sizes<In, ifc::enable_hca_out>() || !in_state(c, hca_state::disabled)) {
        return;
    }
    if (c.get(In::function_id) != 0 || c.get(In::embedded_cpu_function) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    _state = hca_state::enabled;
    reset_caps();  // a freshly enabled function starts from its default capabilities
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
    _disabled_with = held{pages_owned(), objects()};
    drop_objects();  // resource objects (objects.cpp)
    // The kernel takes every page back before DISABLE_HCA (main.c: mlx5_reclaim_startup_pages
    // before mlx5_core_disable_hca); pages still held
    // here are lost to the driver's bookkeeping while a card might still use them: reported,
    // then dropped with the function's state.
    std::lock_guard g(_ledger->lock);
    if (!_ledger->pages.empty()) {
        log().error("mlx5: {} firmware page(s) still owned by the firmware at DISABLE_HCA, the first at {:#x}",
                    _ledger->pages.size(), *_ledger->pages.begin());
    }
    for (const std::uint64_t pa : _ledger->pages) {
        _ledger->violation(pa, "still owned by the firmware at DISABLE_HCA");
    }
    _ledger->pages.clear();
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
    const std::size_t owned = pages_owned();
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
        if (n > _options.max_pages || pages_owned() + n > _options.max_pages) {
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
            if (owns(pa) || std::find(given.begin(), given.end(), pa) != given.end()) {
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
        {
            std::lock_guard g(_ledger->lock);
            _ledger->pages.insert(given.begin(), given.end());
        }
        // from now on an unmap of these pages is reported (dma_space holds the ledger weakly)
        c.dma->watch_unmaps(_ledger);
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
        std::lock_guard g(_ledger->lock);
        std::set<std::uint64_t>& pages = _ledger->pages;
        const std::size_t spare = pages.size() > keep ? pages.size() - keep : 0;
        const std::size_t returned = std::min<std::size_t>(spare, n);
        for (std::size_t i = 0; i < returned; ++i) {
            auto last = std::prev(pages.end());
            c.set(ifc::pas_entry<Out>(i), *last);
            pages.erase(last);
        }
        c.set(Out::output_num_entries, returned);
        return;
    }
    }
    c.fail(cmd_status::bad_param_err, failure::bad_parameter);
}

void firmware::init_hca(call& c) {
    if (!c.sizes<ifc::init_hca_in, ifc::init_hca_out>() || !in_state(c, hca_state::enabled)) {
        return;
    }
    if (pages_owned() < std::size_t{_options.boot_pages} + _options.init_pages) {
        c.fail(cmd_status::bad_sys_state_err, failure::pages_missing);
        return;
    }
    _state = hca_state::initialized;
    // a new HCA session: RoCE off, GID table empty until the driver sets them (the kernel's
    // lib/gid.c and vport.c set them after INIT_HCA)
    _roce_en = false;
    _gids.assign(_options.gid_table_size, roce_addr{});
    _gid_valid.assign(_options.gid_table_size, false);
}

void firmware::teardown_hca(call& c) {
    using In = ifc::teardown_hca_in;
    using Out = ifc::teardown_hca_out;
    if (!c.sizes<In, Out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    const auto profile = static_cast<ifc::teardown_profile>(c.get(In::profile));
    if (profile != ifc::teardown_profile::graceful_close && profile != ifc::teardown_profile::force_close) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);  // no fast teardown (not advertised)
        return;
    }
    _state = hca_state::enabled;
    drop_objects();  // resource objects (objects.cpp): TEARDOWN_HCA ends them all
    c.set(Out::state, static_cast<std::uint8_t>(ifc::teardown_state::success));
}

// The board's identity (fw.c mlx5_query_board_id, mlx5_core_query_vendor_id). ieee_vendor_id
// is the IEEE OUI of the vendor (Mellanox 00:02:c9, the OUI of its cards' MACs); vsd_vendor_id
// the PCI-SIG vendor ID that formats the VSD and PSID (0x15b3). The VSD (vendor-specific data)
// is left empty: the kernel does not read it. Answered once the function is enabled: the
// kernel asks after INIT_HCA (main.c mlx5_init_once).
void firmware::query_adapter(call& c) {
    using P = ifc::query_adapter_param_block;
    constexpr auto at = ifc::query_adapter_out::query_adapter_struct;
    if (!c.sizes<ifc::query_adapter_in, ifc::query_adapter_out>()) {
        return;
    }
    if (_state == hca_state::disabled) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return;
    }
    c.set(at(P::ieee_vendor_id), mellanox_oui);
    c.set(at(P::vsd_vendor_id), ::rig::abi::pci::vendor_mellanox);
    std::array<std::byte, P::vsd_contd_psid.bits / 8> psid{};
    const std::size_t n = std::min(psid.size(), _options.psid.size());
    std::memcpy(psid.data(), _options.psid.data(), n);
    abi::set_bytes(c.out, at(P::vsd_contd_psid), psid);
}

}  // namespace rig::sim::mlx5
