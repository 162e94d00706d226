// Every abi/bnxt layout against the kernel's own struct (bnxt_hsi.h, roce_hsi.h of Linux 6.12):
// sizes, every field alone at its largest value and at a pattern, all fields at once, the
// driver's default preparation, and every constant. The bytes come from bnxt_oracle.c, which
// fills the kernel structs with the kernel's member names and *_MASK/*_SFT defines.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "abi/bnxt/bnxt.hpp"
#include "oracle.hpp"

namespace abi = rig::bnxt::abi;
using rig::test::bnxt::from_hex;
using rig::test::bnxt::oracle_dump;
using rig::test::bnxt::to_hex;
using rig::test::bnxt::words;

namespace {

// A value for one field: a number, or the bytes of a byte string.
struct assignment {
    std::string field;
    std::uint64_t value = 0;
    std::vector<std::byte> bytes;
    bool is_bytes = false;
};

template <class T>
constexpr bool is_array_v = false;
template <std::size_t N>
constexpr bool is_array_v<std::array<std::uint8_t, N>> = true;

template <class L>
L zeroed() {
    L v{};
    L::for_each_field(v, [](const abi::field_desc&, auto& m) { m = {}; });
    return v;
}

// Sets the named field; false if L has no such field (or its shape differs).
template <class L>
bool assign(L& v, const assignment& a) {
    bool found = false;
    L::for_each_field(v, [&](const abi::field_desc& d, auto& m) {
        if (d.name != a.field) {
            return;
        }
        using M = std::remove_cvref_t<decltype(m)>;
        if constexpr (is_array_v<M>) {
            if (a.is_bytes && a.bytes.size() == m.size()) {
                std::memcpy(m.data(), a.bytes.data(), m.size());
                found = true;
            }
        } else {
            if (!a.is_bytes) {
                m = static_cast<M>(a.value);
                found = true;
            }
        }
    });
    return found;
}

// "" if every field of `v` equals the assignments (fields not assigned: zero), else what differs.
template <class L>
std::string compare_fields(const L& v, const std::vector<assignment>& as) {
    std::string diff;
    L::for_each_field(v, [&](const abi::field_desc& d, const auto& m) {
        const assignment* a = nullptr;
        for (const assignment& x : as) {
            if (x.field == d.name) {
                a = &x;
            }
        }
        using M = std::remove_cvref_t<decltype(m)>;
        if constexpr (is_array_v<M>) {
            const std::vector<std::byte> want =
                a ? a->bytes : std::vector<std::byte>(m.size(), std::byte{0});
            if (std::memcmp(m.data(), want.data(), m.size()) != 0) {
                diff += std::string(L::layout_name) + "." + std::string(d.name) + " decoded as " +
                        to_hex(reinterpret_cast<const std::byte*>(m.data()), m.size()) + "; ";
            }
        } else {
            const std::uint64_t want = a ? a->value : 0;
            if (static_cast<std::uint64_t>(m) != want) {
                diff += std::string(L::layout_name) + "." + std::string(d.name) + " decoded as " +
                        rig::abi::hex(static_cast<std::uint64_t>(m)) + ", kernel " +
                        rig::abi::hex(want) + "; ";
            }
        }
    });
    return diff;
}

std::string first_difference(const std::vector<std::byte>& ours, const std::vector<std::byte>& k) {
    for (std::size_t i = 0; i < std::min(ours.size(), k.size()); ++i) {
        if (ours[i] != k[i]) {
            return "first difference at byte " + std::to_string(i);
        }
    }
    return ours.size() == k.size() ? "" : "sizes differ";
}

// The type-erased face of one layout.
struct layout_ops {
    std::size_t size;
    std::vector<std::string> fields;
    std::function<std::vector<std::byte>(const std::vector<assignment>&, std::string&)> encode;
    std::function<std::string(const std::vector<std::byte>&, const std::vector<assignment>&)>
        check_decode;
    std::function<std::vector<std::byte>()> defaults;
    bool has_defaults;
};

template <class L>
layout_ops ops() {
    layout_ops o;
    o.size = L::layout_size;
    for (const abi::field_desc& d : L::fields) {
        o.fields.emplace_back(d.name);
    }
    o.encode = [](const std::vector<assignment>& as, std::string& err) {
        L v = zeroed<L>();
        for (const assignment& a : as) {
            if (!assign(v, a)) {
                err += std::string(L::layout_name) + " has no field " + a.field + "; ";
            }
        }
        std::vector<std::byte> out(L::layout_size);
        abi::encode(std::span<std::byte>(out), v);
        return out;
    };
    o.check_decode = [](const std::vector<std::byte>& bytes, const std::vector<assignment>& as) {
        auto v = abi::decode<L>(std::span<const std::byte>(bytes));
        if (!v) {
            return v.error().message();
        }
        std::string diff = compare_fields(*v, as);
        // and back: the decoded value encodes to the same bytes
        const auto again = abi::to_bytes(*v);
        if (std::memcmp(again.data(), bytes.data(), again.size()) != 0) {
            diff += std::string(L::layout_name) + ": decode then encode changed the bytes; ";
        }
        return diff;
    };
    o.defaults = [] {
        const auto b = abi::to_bytes(L{});
        return std::vector<std::byte>(b.begin(), b.end());
    };
    o.has_defaults = !(L{} == zeroed<L>());
    return o;
}

template <class... L>
std::map<std::string, layout_ops> registry() {
    return {{std::string(L::layout_name), ops<L>()}...};
}

const std::map<std::string, layout_ops>& layouts() {
    using namespace abi;
    static const auto r = registry<
        // HWRM
        hwrm_cmd_hdr, hwrm_resp_hdr, hwrm_short_input, hwrm_err_output, hwrm_ver_get_input,
        hwrm_ver_get_output, hwrm_func_reset_input, hwrm_func_reset_output,
        hwrm_func_drv_rgtr_input, hwrm_func_drv_rgtr_output, hwrm_func_drv_unrgtr_input,
        hwrm_func_qcaps_input, hwrm_func_qcaps_output, hwrm_func_qcfg_input,
        hwrm_func_qcfg_output, hwrm_func_cfg_input, hwrm_func_backing_store_qcaps_input,
        hwrm_func_backing_store_qcaps_output, hwrm_func_backing_store_cfg_input,
        hwrm_func_backing_store_qcaps_v2_input, hwrm_func_backing_store_qcaps_v2_output,
        hwrm_func_backing_store_cfg_v2_input, hwrm_ring_alloc_input, hwrm_ring_alloc_output,
        hwrm_ring_free_input, hwrm_stat_ctx_alloc_input, hwrm_stat_ctx_alloc_output,
        hwrm_stat_ctx_free_input, hwrm_vnic_alloc_input, hwrm_vnic_alloc_output,
        hwrm_vnic_cfg_input, hwrm_cfa_l2_filter_alloc_input, hwrm_cfa_l2_filter_alloc_output,
        hwrm_func_resource_qcaps_input, hwrm_func_resource_qcaps_output, hwrm_vnic_free_input,
        hwrm_cfa_l2_filter_free_input, hwrm_port_phy_qcfg_input, hwrm_port_phy_qcfg_output,
        hwrm_port_phy_qcaps_input, hwrm_port_phy_qcaps_output, hwrm_queue_qportcfg_input, hwrm_queue_qportcfg_output, hwrm_fw_set_time_input, hwrm_async_event_cmpl,
        hwrm_async_event_cmpl_reset_notify,
        // RCFW
        tlv, cmdq_init, cmdq_base, creq_base, creq_qp_event, creq_qp_error_notification,
        creq_cq_error_notification, creq_func_event, cmdq_query_version, creq_query_version_resp,
        cmdq_initialize_fw, creq_initialize_fw_resp, cmdq_deinitialize_fw,
        creq_deinitialize_fw_resp, cmdq_query_func, creq_query_func_resp,
        creq_query_func_resp_sb, cmdq_set_func_resources, cmdq_create_qp, creq_create_qp_resp,
        cmdq_destroy_qp, creq_destroy_qp_resp, cmdq_modify_qp, creq_modify_qp_resp,
        cmdq_query_qp, creq_query_qp_resp, creq_query_qp_resp_sb, cmdq_create_cq,
        creq_create_cq_resp, cmdq_destroy_cq, creq_destroy_cq_resp, cmdq_allocate_mrw,
        creq_allocate_mrw_resp, cmdq_deallocate_key, creq_deallocate_key_resp, cmdq_register_mr,
        creq_register_mr_resp, cmdq_deregister_mr, creq_deregister_mr_resp, cmdq_add_gid,
        creq_add_gid_resp, cmdq_delete_gid, creq_delete_gid_resp, cmdq_modify_gid,
        // data path
        sq_sge, sq_send_hdr, sq_rdma_hdr, rq_wqe_hdr, sq_psn_search_ext, sq_msn_search, cq_base,
        cq_req, cq_res_rc, cq_res_ud, cq_terminal, cq_cutoff, nq_cn, dbc_dbc>();
    return r;
}

// The oracle's lines of one kind, split into words.
std::vector<std::vector<std::string>> lines_of(const std::string& kind) {
    std::vector<std::vector<std::string>> out;
    for (const std::string& l : oracle_dump()) {
        auto w = words(l);
        if (!w.empty() && w[0] == kind) {
            out.push_back(std::move(w));
        }
    }
    return out;
}

assignment parse_assignment(const std::vector<std::string>& w) {
    assignment a;
    a.field = w[2];
    if (w[0] == "A") {
        a.is_bytes = true;
        a.bytes = from_hex(w[3]);
    } else {
        a.value = std::stoull(w[3], nullptr, 16);
    }
    return a;
}

}  // namespace

TEST_CASE("bnxt: every layout is a kernel struct of the same size", "[bnxt][vendor]") {
    std::set<std::string> seen;
    for (const auto& w : lines_of("S")) {
        INFO("struct " << w[1]);
        const auto it = layouts().find(w[1]);
        REQUIRE(it != layouts().end());
        CHECK(it->second.size == std::stoul(w[2]));
        seen.insert(w[1]);
    }
    for (const auto& [name, o] : layouts()) {
        INFO("abi/bnxt layout " << name << " has no kernel struct in the oracle");
        CHECK(seen.count(name) == 1);
    }
    CHECK(seen.size() == 104);
}

TEST_CASE("bnxt: every field alone encodes and decodes as the kernel's", "[bnxt][vendor]") {
    std::map<std::string, std::set<std::string>> covered;
    std::size_t checked = 0;
    for (const std::string& l : oracle_dump()) {
        const auto w = words(l);
        if (w.empty() || (w[0] != "F" && w[0] != "A")) {
            continue;
        }
        const std::string& st = w[1];
        const assignment a = parse_assignment(w);
        const std::vector<std::byte> kernel = from_hex(w.back());
        INFO(st << "." << a.field << " = " << (a.is_bytes ? w[3] : rig::abi::hex(a.value)));
        const auto it = layouts().find(st);
        REQUIRE(it != layouts().end());
        std::string err;
        const std::vector<std::byte> ours = it->second.encode({a}, err);
        CHECK(err == "");
        INFO("ours   " << to_hex(ours.data(), ours.size()));
        INFO("kernel " << to_hex(kernel.data(), kernel.size()));
        CHECK(first_difference(ours, kernel) == "");
        CHECK(it->second.check_decode(kernel, {a}) == "");
        covered[st].insert(a.field);
        ++checked;
    }
    // every field our layouts declare was pinned by the kernel's definition
    for (const auto& [name, o] : layouts()) {
        for (const std::string& f : o.fields) {
            INFO(name << "." << f << " has no golden line");
            CHECK(covered[name].count(f) == 1);
        }
    }
    CHECK(checked > 900);
}

TEST_CASE("bnxt: all fields at once encode and decode as the kernel's", "[bnxt][vendor]") {
    // the second F line of a field carries its pattern value; A lines the byte pattern
    std::map<std::string, std::map<std::string, assignment>> pattern;
    for (const std::string& l : oracle_dump()) {
        const auto w = words(l);
        if (!w.empty() && (w[0] == "F" || w[0] == "A")) {
            pattern[w[1]][w[2]] = parse_assignment(w);
        }
    }
    std::size_t structs = 0;
    for (const auto& w : lines_of("U")) {
        INFO("struct " << w[1]);
        const auto it = layouts().find(w[1]);
        REQUIRE(it != layouts().end());
        std::vector<assignment> as;
        for (const auto& [f, a] : pattern[w[1]]) {
            as.push_back(a);
        }
        const std::vector<std::byte> kernel = from_hex(w[2]);
        std::string err;
        const std::vector<std::byte> ours = it->second.encode(as, err);
        CHECK(err == "");
        INFO("ours   " << to_hex(ours.data(), ours.size()));
        INFO("kernel " << to_hex(kernel.data(), kernel.size()));
        CHECK(first_difference(ours, kernel) == "");
        CHECK(it->second.check_decode(kernel, as) == "");
        ++structs;
    }
    CHECK(structs == layouts().size());
}

TEST_CASE("bnxt: default requests are what the kernel driver prepares", "[bnxt][vendor]") {
    std::set<std::string> seen;
    for (const auto& w : lines_of("D")) {
        INFO("struct " << w[1]);
        const auto it = layouts().find(w[1]);
        REQUIRE(it != layouts().end());
        const std::vector<std::byte> ours = it->second.defaults();
        const std::vector<std::byte> kernel = from_hex(w[2]);
        INFO("ours   " << to_hex(ours.data(), ours.size()));
        INFO("kernel " << to_hex(kernel.data(), kernel.size()));
        CHECK(first_difference(ours, kernel) == "");
        seen.insert(w[1]);
    }
    for (const auto& [name, o] : layouts()) {
        if (o.has_defaults) {
            INFO(name << " has defaults but no kernel preparation to compare with");
            CHECK(seen.count(name) == 1);
        }
    }
}

TEST_CASE("bnxt: every constant is the kernel's", "[bnxt][vendor]") {
    struct constant {
        const char* name;
        std::uint64_t value;
    };
    using namespace abi;
    static const constant ours[] = {
#define KN(name, expr) {#name, static_cast<std::uint64_t>(name)},
#define K(name) KN(name, name)
#define KS(name, sft) KN(name, name)
#include "constants.def"
#undef K
#undef KS
#undef KN
    };
    std::map<std::string, std::uint64_t> kernel;
    for (const auto& w : lines_of("C")) {
        kernel[w[1]] = std::stoull(w[2], nullptr, 16);
    }
    REQUIRE(kernel.size() == std::size(ours));
    for (const constant& c : ours) {
        INFO(c.name);
        REQUIRE(kernel.count(c.name) == 1);
        CHECK(rig::abi::hex(c.value) == rig::abi::hex(kernel[c.name]));
    }
}
