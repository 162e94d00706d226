// The firmware's capability, vport and RoCE-address commands (firmware.hpp): QUERY_HCA_CAP,
// SET_HCA_CAP, ACCESS_REG (HOST_ENDIANNESS), QUERY_VPORT_STATE, QUERY/MODIFY_NIC_VPORT_CONTEXT,
// SET/QUERY_ROCE_ADDRESS: as rdma-core's mlx5_vfio_alloc_context and the kernel's main.c
// handle_hca_cap, vport.c and lib/gid.c send them.
//
// The capability set is a ConnectX-6 Dx as a RoCE RC driver sees it (Ethernet port, RoCE v2,
// one port), with the limits the model enforces taken from firmware_options, so that a driver
// that stays within the caps stays within the model.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "abi/mlx5/ifc/hca.hpp"
#include "abi/mlx5/ifc/hca_cap.hpp"
#include "abi/mlx5/ifc/vport.hpp"
#include "sim/mlx5/call.hpp"
#include "sim/mlx5/function_model.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace {

using cap = ifc::cmd_hca_cap;
using rcap = ifc::roce_cap;
using page = std::array<std::byte, 256>;

// log2 of a count, rounded down, clamped to what a field of `bits` bits holds.
std::uint64_t log2_within(std::uint64_t n, unsigned bits) {
    const std::uint64_t l = n == 0 ? 0 : static_cast<std::uint64_t>(std::bit_width(n) - 1);
    return std::min<std::uint64_t>(l, (1ull << bits) - 1);
}

// The fields a driver may change with SET_HCA_CAP, each to at most its MAX value (rdma-core
// mlx5_vfio.c set_hca_cap, kernel main.c handle_hca_cap). Everything else in
// the page must come back exactly as QUERY_HCA_CAP(CUR) gave it.
constexpr abi::field general_settable[] = {
    cap::cmdif_checksum,  cap::log_uar_page_sz, cap::uar_4k,           cap::mkey_by_name,
    cap::disable_link_up, cap::pkey_table_size, cap::log_max_qp,       cap::cache_line_128byte,
};
constexpr abi::field roce_settable[] = {rcap::sw_r_roce_src_udp_port};

constexpr std::size_t cap_page_at = ifc::query_hca_cap_out::capability.whole().byte_offset();
static_assert(cap_page_at == ifc::set_hca_cap_in::capability.whole().byte_offset());

std::atomic<std::uint32_t> next_mac{1};

}  // namespace

void firmware::assign_mac() {
    std::uint64_t m = _options.mac;
    if (m == 0) {
        // 02:52:49:47:xx:xx: locally administered ("RIG"), one per firmware in this process
        m = 0x0252'4947'0000ull | (next_mac.fetch_add(1) & 0xffffu);
    }
    for (std::size_t i = 0; i < 6; ++i) {
        _mac[i] = static_cast<std::uint8_t>(m >> (8 * (5 - i)));
    }
}

page firmware::general_max() const {
    page p{};
    const std::span<std::byte> b(p);
    const auto objects = _options.max_objects;
    abi::set<cap::log_max_qp>(b, log2_within(objects, 5));
    abi::set<cap::log_max_qp_sz>(b, _options.log_max_qp_sz);
    abi::set<cap::log_max_cq>(b, log2_within(objects, 5));
    abi::set<cap::log_max_cq_sz>(b, _options.log_max_cq_sz);
    abi::set<cap::log_max_eq>(b, log2_within(objects, 4));
    abi::set<cap::log_max_eq_sz>(b, _options.log_max_eq_sz);
    abi::set<cap::log_max_mkey>(b, log2_within(objects, 6));
    abi::set<cap::log_max_pd>(b, log2_within(objects, 5));
    abi::set<cap::log_max_msg>(b, _options.log_max_msg);
    abi::set<cap::log_max_ra_req_qp>(b, _options.log_max_ra_req_qp);
    abi::set<cap::log_max_ra_res_qp>(b, _options.log_max_ra_res_qp);
    abi::set<cap::gid_table_size>(b, _options.gid_table_size);
    abi::set<cap::port_type>(b, static_cast<std::uint8_t>(ifc::port_type::ethernet));
    abi::set<cap::num_ports>(b, 1);
    abi::set<cap::native_port_num>(b, 1);
    abi::set<cap::roce>(b, 1);
    abi::set<cap::cqe_version>(b, 1);
    abi::set<cap::umem_uid_0>(b, 1);
    abi::set<cap::log_pg_sz>(b, 12);
    // UARs are whole 4 KiB BAR0 pages; uar_sz is log2 of the pages of the UAR area
    const std::uint64_t uar_area = std::bit_ceil(std::uint64_t{_options.first_uar_page} + _options.uar_pages);
    abi::set<cap::uar_sz>(b, log2_within(uar_area, 6));
    abi::set<cap::bf>(b, 1);               // BlueFlame copies taken (doorbells.cpp)
    abi::set<cap::log_bf_reg_size>(b, log_bf_reg_size);  // 512-byte BlueFlame registers (UAR + 0x800)
    abi::set<cap::max_wqe_sz_sq>(b, 1024);
    abi::set<cap::max_wqe_sz_rq>(b, 512);
    abi::set<cap::force_teardown>(b, 1);    // TEARDOWN_HCA profile 1 is implemented, 2 is not
    abi::set<cap::disable_link_up>(b, 1);   // the link may be kept down by INIT_HCA
    abi::set<cap::cache_line_128byte>(b, 1);
    abi::set<cap::max_num_eqs>(b, std::min<std::uint32_t>(objects, 0xffff));
    abi::set<cap::device_frequency_khz>(b, 1'000'000);
    // Command signatures: the engine can check and make them (cmdq.cpp); CUR starts disabled
    // (reset_caps), as the kernel and rdma-core leave it (both set cmdif_checksum 0).
    abi::set<cap::cmdif_checksum>(b, static_cast<std::uint8_t>(ifc::cmdif_checksum_mode::enabled));
    // uar_4k, mkey_by_name, fast_teardown: 0 (the model does none of them)
    return p;
}

page firmware::roce_max() const {
    page p{};
    const std::span<std::byte> b(p);
    abi::set<rcap::sw_r_roce_src_udp_port>(b, 1);
    abi::set<rcap::fl_rc_qp_when_roce_enabled>(b, 1);
    abi::set<rcap::l3_type>(b, (1u << 1) | (1u << 2));  // IPv4 and IPv6 GIDs
    abi::set<rcap::roce_version>(b, 1u << 2);           // RoCE v2 only
    abi::set<rcap::r_roce_dest_udp_port>(b, 4791);
    abi::set<rcap::r_roce_min_src_udp_port>(b, 0xc000);
    abi::set<rcap::r_roce_max_src_udp_port>(b, 0xffff);
    abi::set<rcap::roce_address_table_size>(b, _options.gid_table_size);
    return p;
}

void firmware::reset_caps() {
    _general_cur = general_max();
    // CUR: the settable fields start at the safe setting, not at the maximum
    const std::span<std::byte> g(_general_cur);
    abi::set<cap::disable_link_up>(g, 0);
    abi::set<cap::cache_line_128byte>(g, 0);
    abi::set<cap::cmdif_checksum>(g, static_cast<std::uint8_t>(ifc::cmdif_checksum_mode::disabled));
    _roce_cur = roce_max();
    abi::set<rcap::sw_r_roce_src_udp_port>(std::span<std::byte>(_roce_cur), 0);
    _roce_en = false;
    _gids.assign(_options.gid_table_size, roce_addr{});
    _gid_valid.assign(_options.gid_table_size, false);
}

bool firmware::port_up() const noexcept {
    return _state == hca_state::initialized && _link_up &&
           abi::get<cap::disable_link_up>(std::span<const std::byte>(_general_cur)) == 0;
}

const roce_addr* firmware::gid(std::uint32_t index) const {
    if (index >= _gids.size() || !_gid_valid[index]) {
        return nullptr;
    }
    return &_gids[index];
}

void firmware::query_hca_cap(call& c) {
    using In = ifc::query_hca_cap_in;
    if (!c.sizes<In, ifc::query_hca_cap_out>()) {
        return;
    }
    if (_state == hca_state::disabled) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return;
    }
    if (c.get(In::other_function) != 0 || c.get(In::function_id) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    const auto type = static_cast<ifc::cap_type>(c.op_mod >> 1);
    const bool cur = (c.op_mod & 1) != 0;
    page p;
    if (type == ifc::cap_type::general_device) {
        p = cur ? _general_cur : general_max();
    } else if (type == ifc::cap_type::roce) {
        p = cur ? _roce_cur : roce_max();
    } else {
        c.fail(cmd_status::bad_param_err, failure::unknown_cap_type);
        return;
    }
    std::copy(p.begin(), p.end(), c.out.begin() + static_cast<std::ptrdiff_t>(cap_page_at));
}

void firmware::set_hca_cap(call& c) {
    using In = ifc::set_hca_cap_in;
    // Capabilities are set between ENABLE_HCA and INIT_HCA (kernel main.c mlx5_function_enable)
    if (!c.sizes<In, ifc::set_hca_cap_out>() || !in_state(c, hca_state::enabled)) {
        return;
    }
    if (c.get(In::other_function) != 0 || c.get(In::function_id) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    page* cur = nullptr;
    page max;
    std::span<const abi::field> settable;
    if (c.op_mod == ifc::set_hca_cap_op_mod(ifc::cap_type::general_device)) {
        cur = &_general_cur;
        max = general_max();
        settable = general_settable;
    } else if (c.op_mod == ifc::set_hca_cap_op_mod(ifc::cap_type::roce)) {
        cur = &_roce_cur;
        max = roce_max();
        settable = roce_settable;
    } else {
        c.fail(cmd_status::bad_param_err, failure::unknown_cap_type);
        return;
    }
    page want;
    std::memcpy(want.data(), c.in.data() + cap_page_at, want.size());
    page rest = want;  // the request with its settable fields put back to CUR: must equal CUR
    for (const abi::field f : settable) {
        const std::uint64_t v = abi::get(std::span<const std::byte>(want), f);
        if (v > abi::get(std::span<const std::byte>(max), f)) {
            log().info("mlx5: SET_HCA_CAP asks for a field (bit {:#x}) = {} past its maximum", f.off, v);
            c.fail(cmd_status::bad_param_err, failure::not_settable);
            return;
        }
        abi::set(std::span<std::byte>(rest), f, abi::get(std::span<const std::byte>(*cur), f));
    }
    // cmdif_checksum is a mode, not a limit: a driver turns signatures off or on; INITIAL_STATE
    // (1) is the device's own state and 2 names nothing (mlx5_ifc.h CMDIF_CHECKSUM_*).
    if (settable.data() == general_settable) {
        const auto mode =
            static_cast<ifc::cmdif_checksum_mode>(abi::get<cap::cmdif_checksum>(std::span<const std::byte>(want)));
        if (mode != ifc::cmdif_checksum_mode::disabled && mode != ifc::cmdif_checksum_mode::enabled) {
            log().info("mlx5: SET_HCA_CAP asks for cmdif_checksum {}, neither disabled nor enabled",
                       static_cast<unsigned>(mode));
            c.fail(cmd_status::bad_param_err, failure::not_settable);
            return;
        }
    }
    if (rest != *cur) {
        const auto at = std::mismatch(rest.begin(), rest.end(), cur->begin()).first - rest.begin();
        log().info("mlx5: SET_HCA_CAP op_mod {:#x} changes byte {:#x} of the page, which no driver may set",
                   c.op_mod, at);
        c.fail(cmd_status::bad_param_err, failure::not_settable);
        return;
    }
    *cur = want;
}

void firmware::access_reg(call& c) {
    using In = ifc::access_register_in;
    if (!c.sizes<In, ifc::access_register_out>()) {
        return;
    }
    if (_state == hca_state::disabled) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return;
    }
    const auto reg = static_cast<std::uint16_t>(c.get(In::register_id));
    if (reg != ifc::access_reg::reg_host_endianness) {
        c.fail(cmd_status::bad_param_err, failure::unknown_register);
        return;
    }
    // HOST_ENDIANNESS (16 bytes): byte 0 he = 0x00 little-endian host, 0x80 big-endian
    constexpr std::size_t data_at = In::size_bytes;
    constexpr std::size_t n = ifc::access_reg::host_endianness_bytes;
    if (c.op_mod == ifc::access_reg::op_mod_write) {
        if (c.inlen < data_at + n) {
            c.fail(cmd_status::bad_inp_len_err, failure::input_too_short);
            return;
        }
        const auto he = std::to_integer<std::uint8_t>(c.in[data_at]);
        if ((he & 0x7f) != 0 || std::any_of(c.in.begin() + data_at + 1, c.in.begin() + data_at + n,
                                            [](std::byte b) { return b != std::byte{0}; })) {
            c.fail(cmd_status::bad_param_err, failure::bad_parameter);
            return;
        }
        return;
    }
    if (c.op_mod == ifc::access_reg::op_mod_read) {
        if (c.outlen < ifc::access_register_out::size_bytes + n) {
            c.fail(cmd_status::bad_outp_len_err, failure::output_too_short);
            return;
        }
        return;  // little-endian host as the model sees it: all zero
    }
    c.fail(cmd_status::bad_param_err, failure::bad_parameter);
}

void firmware::query_vport_state(call& c) {
    using In = ifc::query_vport_state_in;
    using Out = ifc::query_vport_state_out;
    if (!c.sizes<In, Out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    if (c.get(In::other_vport) != 0 || c.get(In::vport_number) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    const auto up = static_cast<std::uint8_t>(port_up() ? ifc::vport_state::up : ifc::vport_state::down);
    c.set(Out::admin_state, up);
    c.set(Out::state, up);
}

void firmware::query_nic_vport_context(call& c) {
    using In = ifc::query_nic_vport_context_in;
    using Out = ifc::query_nic_vport_context_out;
    using ctx = ifc::nic_vport_context;
    if (!c.sizes<In, Out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    if (c.get(In::other_vport) != 0 || c.get(In::vport_number) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    c.set(Out::nic_vport_context(ctx::roce_en), _roce_en ? 1 : 0);
    c.set(Out::nic_vport_context(ctx::mtu), _options.port_mtu);
    const auto mac = ctx::permanent_address;
    c.set(Out::nic_vport_context(mac(ifc::mac_address_layout::mac_addr_47_32)),
          std::uint64_t{_mac[0]} << 8 | _mac[1]);
    c.set(Out::nic_vport_context(mac(ifc::mac_address_layout::mac_addr_31_0)),
          std::uint64_t{_mac[2]} << 24 | std::uint64_t{_mac[3]} << 16 | std::uint64_t{_mac[4]} << 8 | _mac[5]);
}

void firmware::modify_nic_vport_context(call& c) {
    using In = ifc::modify_nic_vport_context_in;
    using sel = ifc::modify_nic_vport_field_select;
    if (!c.sizes<In, ifc::modify_nic_vport_context_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    if (c.get(In::other_vport) != 0 || c.get(In::vport_number) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    // The model applies roce_en and mtu; any other selected field is refused rather than
    // silently ignored.
    const std::uint64_t selected = abi::get(c.in, In::field_select.whole());
    const std::uint64_t known = 1ull << (31 - (sel::roce_en.off)) | 1ull << (31 - (sel::mtu.off));
    if ((selected & ~known) != 0) {
        c.fail(cmd_status::bad_param_err, failure::not_settable);
        return;
    }
    if (c.get(In::field_select(sel::mtu)) != 0) {
        const std::uint64_t mtu = c.get(In::nic_vport_context(ifc::nic_vport_context::mtu));
        if (mtu < 68 || mtu > 9978) {
            c.fail(cmd_status::bad_param_err, failure::bad_parameter);
            return;
        }
    }
    if (c.get(In::field_select(sel::roce_en)) != 0) {
        _roce_en = c.get(In::nic_vport_context(ifc::nic_vport_context::roce_en)) != 0;
    }
}

void firmware::set_roce_address(call& c) {
    using In = ifc::set_roce_address_in;
    using addr = ifc::roce_addr_layout;
    if (!c.sizes<In, ifc::set_roce_address_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    const std::uint64_t index = c.get(In::roce_address_index);
    if (index >= _gids.size()) {
        c.fail(cmd_status::bad_param_err, failure::bad_gid_index);
        return;
    }
    if (c.get(In::vhca_port_num) > 1) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    roce_addr a;
    const auto l3 = abi::bytes_of(c.in, In::roce_address(addr::source_l3_address));
    std::transform(l3.begin(), l3.end(), a.gid.begin(), [](std::byte b) { return std::to_integer<std::uint8_t>(b); });
    const std::uint64_t mac_hi = c.get(In::roce_address(addr::source_mac_47_32));
    const std::uint64_t mac_lo = c.get(In::roce_address(addr::source_mac_31_0));
    const std::uint64_t mac = mac_hi << 32 | mac_lo;
    for (std::size_t i = 0; i < 6; ++i) {
        a.mac[i] = static_cast<std::uint8_t>(mac >> (8 * (5 - i)));
    }
    a.roce_version = static_cast<std::uint8_t>(c.get(In::roce_address(addr::roce_version)));
    a.l3_type = static_cast<std::uint8_t>(c.get(In::roce_address(addr::roce_l3_type)));
    a.vlan_valid = c.get(In::roce_address(addr::vlan_valid)) != 0;
    a.vlan_id = static_cast<std::uint16_t>(c.get(In::roce_address(addr::vlan_id)));
    const bool clear = std::all_of(a.gid.begin(), a.gid.end(), [](std::uint8_t b) { return b == 0; });
    if (clear) {  // an all-zero address deletes the entry (kernel mlx5_core_roce_gid_set)
        _gids[index] = roce_addr{};
        _gid_valid[index] = false;
        return;
    }
    // roce_cap.roce_version advertises v2 only; l3 type 0 IPv4 (v4-mapped GID), 1 IPv6
    if (a.roce_version != ifc::roce_addr::version_2 ||
        (a.l3_type != ifc::roce_addr::l3_type_ipv4 && a.l3_type != ifc::roce_addr::l3_type_ipv6) ||
        std::all_of(a.mac.begin(), a.mac.end(), [](std::uint8_t b) { return b == 0; })) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    _gids[index] = a;
    _gid_valid[index] = true;
}

void firmware::query_roce_address(call& c) {
    using In = ifc::query_roce_address_in;
    using Out = ifc::query_roce_address_out;
    using addr = ifc::roce_addr_layout;
    if (!c.sizes<In, Out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    const std::uint64_t index = c.get(In::roce_address_index);
    if (index >= _gids.size() || c.get(In::vhca_port_num) > 1) {
        c.fail(cmd_status::bad_param_err, index >= _gids.size() ? failure::bad_gid_index : failure::bad_parameter);
        return;
    }
    if (!_gid_valid[index]) {
        return;  // an empty entry reads as all zero
    }
    const roce_addr& a = _gids[index];
    auto l3 = abi::bytes_of(std::span<std::byte>(c.out), Out::roce_address(addr::source_l3_address));
    std::transform(a.gid.begin(), a.gid.end(), l3.begin(), [](std::uint8_t b) { return std::byte{b}; });
    c.set(Out::roce_address(addr::source_mac_47_32), std::uint64_t{a.mac[0]} << 8 | a.mac[1]);
    c.set(Out::roce_address(addr::source_mac_31_0), std::uint64_t{a.mac[2]} << 24 | std::uint64_t{a.mac[3]} << 16 |
                                                         std::uint64_t{a.mac[4]} << 8 | a.mac[5]);
    c.set(Out::roce_address(addr::roce_version), a.roce_version);
    c.set(Out::roce_address(addr::roce_l3_type), a.l3_type);
    c.set(Out::roce_address(addr::vlan_valid), a.vlan_valid ? 1 : 0);
    c.set(Out::roce_address(addr::vlan_id), a.vlan_id);
}

// ---- the function model's inspection of them ----

std::array<std::uint8_t, 6> function_model::mac() const {
    std::lock_guard g(_lock);
    return _fw.mac();
}

bool function_model::roce_enabled() const {
    std::lock_guard g(_lock);
    return _fw.roce_enabled();
}

std::optional<roce_addr> function_model::gid(std::uint32_t index) const {
    std::lock_guard g(_lock);
    const roce_addr* a = _fw.gid(index);
    return a != nullptr ? std::optional<roce_addr>(*a) : std::nullopt;
}

std::vector<page_violation> function_model::page_violations() const {
    return _fw.page_violations();  // the ledger has its own lock
}

}  // namespace rig::sim::mlx5
