// Fuzzes the bnxt model's HWRM channel (sim/bnxt/hwrm.cpp firmware::run, and every command
// handler behind its dispatch table) with requests as a hostile driver writes them: a sequence
// of ops, each a BAR0 window image handed to firmware::run as the trigger hands it over, against
// one fresh firmware with in-process DMA memory (hwrm_bench.hpp). Ops:
//   0 raw window: req_type (a known one by index, or any), cmpl_ring, seq_id, target_id,
//     resp_addr (the response buffer, unmapped, straddling the window's end, or any), body
//     bytes, and the window length the trigger found (shorter than the header too)
//   1 short command: the full request in DMA memory; the short header's req_type, size and
//     req_addr honest or lying
//   2 a well-formed request of one of the model's commands (realistic fields: rings on scratch
//     pages, the backing store the driver's own code made), then single-byte overwrites
//   3 function reset (firmware::reset, as FLR)
// Oracle, per request (bnxt_hsi.h, bnxt_hwrm.c __hwrm_send; the model's contract in
// sim/bnxt/firmware.hpp): a request whose full bytes were fetched and whose resp_addr is the
// response buffer is answered there, with req_type and seq_id echoed, resp_len the response's
// length and HWRM_RESP_VALID_KEY its last byte; error_code is what the outcome reports; an
// unknown req_type gets CMD_NOT_SUPPORTED; a short command with a lying size or req_type gets
// INVALID_PARAMS; a refusal is a 16-byte hwrm_err_output whose cmd_err names a reason (never 0,
// CMD_NOT_SUPPORTED aside) and never UNKNOWN_ERR (a handler that made no response); a refused
// request leaves the firmware's objects (rings, statistics contexts, VNICs, filters, context
// pages, the registration) as they were. After the sequence a well-formed VER_GET still works.
#include <set>

#include "test/fuzz/bnxt/hwrm_bench.hpp"

namespace {

using namespace rig::fuzz::bnxt;
using rig::fuzz::require;
namespace ra = ::rig::abi;

constexpr std::uint16_t known_types[] = {
    abi::HWRM_VER_GET, abi::HWRM_FUNC_RESET, abi::HWRM_FUNC_QCAPS, abi::HWRM_FUNC_QCFG, abi::HWRM_FUNC_CFG,
    abi::HWRM_FUNC_DRV_RGTR, abi::HWRM_FUNC_DRV_UNRGTR, abi::HWRM_FUNC_RESOURCE_QCAPS,
    abi::HWRM_FUNC_BACKING_STORE_QCAPS, abi::HWRM_FUNC_BACKING_STORE_CFG, abi::HWRM_RING_ALLOC, abi::HWRM_RING_FREE,
    abi::HWRM_STAT_CTX_ALLOC, abi::HWRM_STAT_CTX_FREE, abi::HWRM_VNIC_ALLOC, abi::HWRM_VNIC_FREE, abi::HWRM_VNIC_CFG,
    abi::HWRM_CFA_L2_FILTER_ALLOC, abi::HWRM_CFA_L2_FILTER_FREE, abi::HWRM_PORT_PHY_QCFG, abi::HWRM_PORT_PHY_QCAPS,
    abi::HWRM_QUEUE_QPORTCFG, abi::HWRM_FW_SET_TIME,
    // and some the model does not run (CMD_NOT_SUPPORTED)
    abi::HWRM_ERROR_RECOVERY_QCFG, abi::HWRM_FUNC_DRV_IF_CHANGE, abi::HWRM_PORT_MAC_CFG,
    abi::HWRM_FUNC_BACKING_STORE_CFG_V2, abi::HWRM_FUNC_BACKING_STORE_QCAPS_V2};
constexpr std::size_t implemented = 23;   // the first ones above: the model's dispatch table

bool is_implemented(std::uint16_t t) {
    return std::find(known_types, known_types + implemented, t) != known_types + implemented;
}

// What a refused request must leave as it was.
struct objects {
    std::size_t rings, stats, vnics, filters, pages;
    bool registered;
    bool operator==(const objects&) const = default;
};
objects objects_of(const model::firmware& fw) {
    return {fw.rings().size(), fw.stat_ctxs().size(), fw.vnics().size(), fw.l2_filters().size(), fw.context_pages(),
            fw.registered()};
}

// The request the driver would write: what the firmware fetches as the full request.
struct expectation {
    std::uint16_t req_type = 0;
    std::uint16_t seq_id = 0;
    std::uint64_t resp_addr = 0;
    bool fetchable = true;                         // the full request is readable
    std::optional<std::uint16_t> error;            // a refusal the channel rules fix
};

std::uint64_t resp_addr_of(reader& in, model_bench& b) {
    switch (in.u8() % 4) {
    case 0: return b.iova(model_bench::resp_off);
    case 1: return 0xdead0000;                                             // never mapped
    case 2: return b.iova(model_bench::scratch_bytes - 8);                 // runs past the window's end
    default: return in.u64();
    }
}

void check(model_bench& b, model::firmware& fw, const expectation& e, const model::outcome& o, const objects& before) {
    if (!o.responded) {
        require(!o.fault.empty(), "an unanswered request says why");
        require(!e.fetchable || e.resp_addr != b.iova(model_bench::resp_off),
                "a fetched request with resp_addr at the response buffer is answered");
        require(objects_of(fw) == before || o.error_code == 0, "an unanswered refusal changes nothing");
        return;
    }
    require(e.fetchable, "a request whose full bytes were unreadable is not answered");
    require(o.resp_addr == e.resp_addr && o.seq_id == e.seq_id && o.req_type == e.req_type,
            "the outcome names the request");
    if (e.error) {
        require(o.error_code == *e.error, "the channel rules' refusal (CMD_NOT_SUPPORTED, INVALID_PARAMS)");
    }
    require(o.error_code != abi::HWRM_ERR_CODE_UNKNOWN_ERR, "every handler makes a response or a refusal");
    if (o.error_code != 0) {
        require(objects_of(fw) == before, "a refused request leaves the firmware's objects as they were");
        require(o.error_code == abi::HWRM_ERR_CODE_CMD_NOT_SUPPORTED || o.cmd_err != 0, "a refusal names its reason");
    }
    if (e.resp_addr != b.iova(model_bench::resp_off)) {
        return;   // written elsewhere in DMA memory: the outcome is what can be checked
    }
    const std::byte* r = b.host(model_bench::resp_off);
    const auto len = ra::load_le<std::uint16_t>(r + 6);
    require(ra::load_le<std::uint16_t>(r + 0) == o.error_code, "error_code in the response");
    require(ra::load_le<std::uint16_t>(r + 2) == e.req_type, "req_type echoed");
    require(ra::load_le<std::uint16_t>(r + 4) == e.seq_id, "seq_id echoed");
    require(len >= 16 && len <= fw.options().max_resp_len, "resp_len within the header and max_resp_len");
    require(std::to_integer<std::uint8_t>(r[len - 1]) == abi::HWRM_RESP_VALID_KEY, "the valid byte last");
    if (o.error_code != 0) {
        require(len == abi::hwrm_err_output::layout_size, "a refusal is an hwrm_err_output");
        require(std::to_integer<std::uint8_t>(r[14]) == o.cmd_err, "cmd_err in the response");
    }
}

std::uint16_t req_type_of(reader& in) {
    const std::uint8_t k = in.u8();
    return k < std::size(known_types) ? known_types[k] : in.u16();
}

// op 0: a raw window.
void raw_window(reader& in, model_bench& b, model::firmware& fw) {
    std::array<std::byte, 128> window{};
    expectation e;
    e.req_type = req_type_of(in);
    ra::store_le<std::uint16_t>(window.data(), e.req_type);
    ra::store_le<std::uint16_t>(window.data() + 2, in.u16());   // cmpl_ring (0x4321: a short command)
    e.seq_id = in.u16();
    ra::store_le<std::uint16_t>(window.data() + 4, e.seq_id);
    ra::store_le<std::uint16_t>(window.data() + 6, in.u16());   // target_id
    e.resp_addr = resp_addr_of(in, b);
    ra::store_le<std::uint64_t>(window.data() + 8, e.resp_addr);
    in.copy_some(std::span<std::byte>(window).subspan(16, in.u8() % 113));
    const std::size_t length = in.u8() % 2 == 0 ? window.size() : in.u8() % 129;
    const bool short_signature = ra::load_le<std::uint16_t>(window.data() + 2) == abi::SHORT_REQ_SIGNATURE_SHORT_CMD;
    if (short_signature || length < 16) {
        e.fetchable = false;   // read as a short command (req_addr = resp_addr here), or no header
        std::memset(b.host(model_bench::resp_off), 0, 16);
        const auto o = fw.run(std::span<const std::byte>(window).first(length), &b.dma);
        require(length >= 16 || !o.responded, "a window shorter than the header is not answered");
        return;
    }
    if (!is_implemented(e.req_type)) {
        e.error = abi::HWRM_ERR_CODE_CMD_NOT_SUPPORTED;
    }
    std::memset(b.host(model_bench::resp_off), 0, 0x1000);
    const objects before = objects_of(fw);
    check(b, fw, e, fw.run(std::span<const std::byte>(window).first(length), &b.dma), before);
}

// op 1: a short command, honest or lying.
void short_command(reader& in, model_bench& b, model::firmware& fw) {
    std::vector<std::byte> full(16 + in.u16() % 512);
    expectation e;
    e.req_type = req_type_of(in);
    e.seq_id = in.u16();
    e.resp_addr = resp_addr_of(in, b);
    ra::store_le<std::uint16_t>(full.data(), e.req_type);
    ra::store_le<std::uint16_t>(full.data() + 4, e.seq_id);
    ra::store_le<std::uint16_t>(full.data() + 6, 0xffff);
    ra::store_le<std::uint64_t>(full.data() + 8, e.resp_addr);
    in.copy_some(std::span<std::byte>(full).subspan(16));
    std::memcpy(b.host(model_bench::short_off), full.data(), full.size());
    abi::hwrm_short_input s;
    const std::uint8_t lies = in.u8();
    s.req_type = (lies & 1) != 0 ? in.u16() : e.req_type;
    s.size = (lies & 2) != 0 ? in.u16() : static_cast<std::uint16_t>(full.size());
    s.req_addr = (lies & 4) != 0 ? in.u64() : b.iova(model_bench::short_off);
    s.target_id = 0xffff;
    std::array<std::byte, 128> window{};
    const auto sb = abi::to_bytes(s);
    std::memcpy(window.data(), sb.data(), sb.size());
    if ((lies & 4) != 0) {
        e.fetchable = b.in_scratch(s.req_addr, std::max<std::size_t>(16, s.size));
        if (!e.fetchable || s.req_addr != b.iova(model_bench::short_off)) {
            std::memset(b.host(model_bench::resp_off), 0, 16);
            fw.run(window, &b.dma);   // its header is wherever req_addr points: no expectation
            return;
        }
    }
    if (s.size < 16 || s.size > fw.options().max_ext_req_len || s.req_type != e.req_type) {
        e.error = abi::HWRM_ERR_CODE_INVALID_PARAMS;
    } else if (!is_implemented(e.req_type)) {
        e.error = abi::HWRM_ERR_CODE_CMD_NOT_SUPPORTED;
    }
    std::memset(b.host(model_bench::resp_off), 0, 0x1000);
    const objects before = objects_of(fw);
    check(b, fw, e, fw.run(window, &b.dma), before);
}

// The function-level requests (selector 0..9).
std::vector<std::byte> function_request(unsigned which, model_bench& b) {
    switch (which) {
    case 0: return bytes_of_layout(abi::hwrm_ver_get_input{});
    case 1: return bytes_of_layout(abi::hwrm_func_reset_input{});
    case 2: return bytes_of_layout(abi::hwrm_func_qcaps_input{});
    case 3: return bytes_of_layout(abi::hwrm_func_qcfg_input{});
    case 4: {
        abi::hwrm_func_drv_rgtr_input r;
        r.enables = abi::FUNC_DRV_RGTR_REQ_ENABLES_OS_TYPE | abi::FUNC_DRV_RGTR_REQ_ENABLES_VER;
        r.os_type = abi::FUNC_DRV_RGTR_REQ_OS_TYPE_LINUX;
        return bytes_of_layout(r);
    }
    case 5: return bytes_of_layout(abi::hwrm_func_drv_unrgtr_input{});
    case 6: return bytes_of_layout(abi::hwrm_func_resource_qcaps_input{});
    case 7: return bytes_of_layout(abi::hwrm_func_backing_store_qcaps_input{});
    case 8: return bytes_of_layout(b.backing_store_cfg);
    default: {
        abi::hwrm_func_cfg_input r;
        r.enables = abi::FUNC_CFG_REQ_ENABLES_NUM_MSIX | abi::FUNC_CFG_REQ_ENABLES_NUM_STAT_CTXS |
                    abi::FUNC_CFG_REQ_ENABLES_NUM_VNICS;
        r.num_msix = 2;
        r.num_stat_ctxs = 1;
        r.num_vnics = 1;
        return bytes_of_layout(r);
    }
    }
}

// The resource requests (selector 10..19).
std::vector<std::byte> resource_request(unsigned which, reader& in, model_bench& b) {
    switch (which) {
    case 10: {
        abi::hwrm_ring_alloc_input r;   // an NQ (the CREQ's kind) on one scratch page
        r.ring_type = in.u8() % 2 == 0 ? abi::RING_ALLOC_REQ_RING_TYPE_NQ : abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL;
        r.length = 256;
        r.page_tbl_addr = b.iova(model_bench::free_off + 0x1000 * (in.u8() % 16));
        r.logical_id = in.u8() % 4;
        r.int_mode = abi::RING_ALLOC_REQ_INT_MODE_MSIX;
        return bytes_of_layout(r);
    }
    case 11: {
        abi::hwrm_ring_free_input r;
        r.ring_type = in.u8() % 2 == 0 ? abi::RING_ALLOC_REQ_RING_TYPE_NQ : abi::RING_ALLOC_REQ_RING_TYPE_L2_CMPL;
        r.ring_id = in.u8();
        return bytes_of_layout(r);
    }
    case 12: {
        abi::hwrm_stat_ctx_alloc_input r;
        r.stats_dma_addr = b.iova(model_bench::stats_off);
        r.update_period_ms = 1000;
        r.stat_ctx_flags = abi::STAT_CTX_ALLOC_REQ_STAT_CTX_FLAGS_ROCE;
        return bytes_of_layout(r);
    }
    case 13: {
        abi::hwrm_stat_ctx_free_input r;
        r.stat_ctx_id = in.u8();
        return bytes_of_layout(r);
    }
    case 14: return bytes_of_layout(abi::hwrm_vnic_alloc_input{});
    case 15: {
        abi::hwrm_vnic_cfg_input r;
        r.vnic_id = in.u8();
        r.flags = abi::VNIC_CFG_REQ_FLAGS_ROCE_DUAL_VNIC_MODE;
        return bytes_of_layout(r);
    }
    case 16: {
        abi::hwrm_vnic_free_input r;
        r.vnic_id = in.u8();
        return bytes_of_layout(r);
    }
    case 17: {
        abi::hwrm_cfa_l2_filter_alloc_input r;
        r.flags = abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_PATH_RX | abi::CFA_L2_FILTER_ALLOC_REQ_FLAGS_TRAFFIC_ROCE;
        r.enables = abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR | abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_L2_ADDR_MASK |
                    abi::CFA_L2_FILTER_ALLOC_REQ_ENABLES_DST_ID;
        r.l2_addr = small_firmware().mac;
        r.l2_addr_mask = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
        r.dst_id = in.u8();
        return bytes_of_layout(r);
    }
    case 18: {
        abi::hwrm_cfa_l2_filter_free_input r;
        r.l2_filter_id = in.u8();
        return bytes_of_layout(r);
    }
    default: {
        constexpr std::uint16_t port[] = {abi::HWRM_PORT_PHY_QCFG, abi::HWRM_PORT_PHY_QCAPS, abi::HWRM_QUEUE_QPORTCFG,
                                          abi::HWRM_FW_SET_TIME};
        std::vector<std::byte> r(32);
        ra::store_le<std::uint16_t>(r.data(), port[in.u8() % 4]);
        ra::store_le<std::uint16_t>(r.data() + 2, 0xffff);
        ra::store_le<std::uint16_t>(r.data() + 6, 0xffff);
        return r;
    }
    }
}

// op 2: a well-formed request of one of the model's commands.
std::vector<std::byte> template_request(reader& in, model_bench& b) {
    const unsigned which = in.u8() % 20;
    return which < 10 ? function_request(which, b) : resource_request(which, in, b);
}

void well_formed(reader& in, model_bench& b, model::firmware& fw) {
    std::vector<std::byte> req = template_request(in, b);
    in.overwrite(std::span<std::byte>(req).subspan(16), 4);   // the header stays the channel's
    expectation e;
    e.req_type = ra::load_le<std::uint16_t>(req.data());
    e.seq_id = static_cast<std::uint16_t>(b.seq + 1);
    e.resp_addr = b.iova(model_bench::resp_off);
    const objects before = objects_of(fw);
    check(b, fw, e, b.send(fw, std::move(req)), before);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    model_bench& b = restored_bench();
    model::firmware fw(small_firmware());
    reader in(data, size);
    for (unsigned ops = 0; !in.empty() && ops < 64; ++ops) {
        switch (in.u8() % 4) {
        case 0: raw_window(in, b, fw); break;
        case 1: short_command(in, b, fw); break;
        case 2: well_formed(in, b, fw); break;
        default: fw.reset(); break;
        }
    }
    // whatever came before, the channel still takes a well-formed VER_GET
    const auto o = b.send(fw, bytes_of_layout(abi::hwrm_ver_get_input{}));
    require(o.responded && o.error_code == 0 && o.seq_id == b.seq, "a well-formed VER_GET still works");
    const auto r = b.response();
    require(r.size() == abi::hwrm_ver_get_output::layout_size && std::to_integer<std::uint8_t>(r.back()) == 1,
            "VER_GET's whole response, valid byte last");
    return 0;
}
