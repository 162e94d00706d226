// The RoCE objects of the bnxt firmware model's command channel (roce_hsi.h,
// roce_objects.hpp): CREATE_CQ / DESTROY_CQ, ALLOCATE_MRW / REGISTER_MR / DEREGISTER_MR /
// DEALLOCATE_KEY, CREATE_QP / DESTROY_QP / QUERY_QP, and QP_ERROR_NOTIFICATION. MODIFY_QP's
// state machine is rcfw_modify_qp.cpp. Sources: roce_hsi.h (the layouts), qplib_fp.c
// (bnxt_qplib_create_cq, bnxt_qplib_create_qp), qplib_sp.c (bnxt_qplib_alloc_mrw,
// bnxt_qplib_reg_mr, bnxt_qplib_free_mrw), ib_verbs.c (bnxt_re_get_dma_mr).
//
// Every object takes a context entry of its type (the backing store, bnxt.c bnxt_alloc_ctx_mem) and
// the model writes its record there (write_context): too little context memory is RESOURCES,
// context memory the driver unmapped while the firmware owns it is a context violation (the ledger)
// and the command completes HARDWARE_ERROR. Refusals, the model's judgement where the HSI is silent
// (docs/hardware.md): an id that names nothing, a field out of its range, a page table that is
// not valid or not readable by the device: INVALID_PARAMETER; no free entry: RESOURCES.
#include <algorithm>
#include <cstring>

#include "abi/bits.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "sim/bnxt/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;
using rig::abi::hex;

namespace {

constexpr std::uint64_t cqe_bytes = 32;         // cq_base (roce_hsi.h)
constexpr std::uint64_t sq_wqe_bytes = 128;     // static mode: 8 slots a WQE (roce_hsi.h)
constexpr std::uint64_t psn_entry_bytes = 16;   // roce_hsi.h sq_psn_search_ext (P5)
constexpr std::uint64_t rq_header_bytes = 32;   // roce_hsi.h rq_wqe_hdr
constexpr std::uint64_t sge_bytes = 16;
constexpr std::uint32_t max_cqe = 0xfffff;      // QUERY_FUNC max_cqe
constexpr std::uint32_t max_qp_wqes = 0xffff;   // QUERY_FUNC max_qp_wr
constexpr std::uint8_t max_sge = 6;             // QUERY_FUNC max_sge (static WQEs)

// The model's context record kinds (written at an entry's first byte; 0: the entry is free).
constexpr std::uint8_t record_cq = 'C', record_key = 'K', record_qp = 'Q';

template <class Resp>
void put(std::array<std::byte, 16>& entry, const Resp& r) {
    const auto b = abi::to_bytes(r);
    std::memcpy(entry.data(), b.data(), entry.size());
}

// A refusal, logged with its reason and kept for tests (rcfw_state::last_error).
std::uint8_t refuse(firmware::rcfw_state& s, std::uint8_t status, std::string why) {
    s.last_error = std::move(why);
    log().debug("bnxt rcfw: {}", s.last_error);
    return status;
}

// The lowest id in [first, end) no object holds.
template <class Map>
std::optional<std::uint32_t> free_id(const Map& taken, std::uint32_t first, std::uint32_t end) {
    for (std::uint32_t id = first; id < end; ++id) {
        if (!taken.contains(id)) {
            return id;
        }
    }
    return std::nullopt;
}

}  // namespace

// ---- context entries -------------------------------------------------------------------------

std::optional<std::uint64_t> firmware::context_entry(const char* type, std::uint32_t index) const {
    const auto a = _ctx.find(type);
    if (a == _ctx.end() || index >= a->second.entries) {
        return std::nullopt;
    }
    const std::uint64_t at = std::uint64_t{index} * a->second.entry_size;
    const std::uint64_t page = at / a->second.page_bytes;
    if (page >= a->second.pages.size()) {
        return std::nullopt;
    }
    return a->second.pages[page] + at % a->second.page_bytes;
}

// The record: kind, 1, the id (4 bytes), the object's handle (8 bytes). With kind 0 the entry's
// first 16 bytes go back to how bnxt_en gave them: zero, the initializer at its offset
// (bnxt.c bnxt_init_ctx_mem).
bool firmware::write_context(const char* type, std::uint32_t index, std::uint8_t kind, std::uint64_t handle,
                             vfio_user::dma_space* dma) {
    const auto at = context_entry(type, index);
    if (!at || dma == nullptr) {
        return false;
    }
    std::array<std::byte, 16> record{};
    if (kind != 0) {
        record[0] = std::byte{kind};
        record[1] = std::byte{1};
        rig::abi::store_le<std::uint32_t>(record.data() + 4, index);
        rig::abi::store_le<std::uint64_t>(record.data() + 8, handle);
    } else {
        const std::string t = type;
        const std::uint16_t bit = t == "QP" ? 0x1 : t == "CQ" ? 0x4 : t == "MRAV" ? 0x20 : 0;
        const std::uint8_t offset = t == "QP" ? _o.qp_init_offset : t == "CQ" ? _o.cq_init_offset : _o.mrav_init_offset;
        if ((_o.ctx_init_mask & bit) != 0 && offset * 4u < record.size()) {
            record[offset * 4u] = std::byte{_o.ctx_kind_initializer};
        }
    }
    if (dma->write(*at, record)) {
        return true;
    }
    std::lock_guard g(_ledger->lock);
    _ledger->report(*at, std::string(type) + " context entry " + std::to_string(index) +
                             " not writable: the driver took it from the firmware");
    return false;
}

void firmware::drop_roce_objects() {
    _changes.note_all();
    _rcfw.cqs.clear();
    _rcfw.keys.clear();
    _rcfw.qps.clear();
}

// ---- completion queues -----------------------------------------------------------------------

std::uint8_t firmware::rcfw_create_cq(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                      std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_create_cq>(cmd);
    const auto nq = _rings.find(static_cast<std::uint16_t>(in.cnq_id));
    if (nq == _rings.end() || nq->second.type != abi::RING_ALLOC_REQ_RING_TYPE_NQ) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "CREATE_CQ: cnq_id " + hex(in.cnq_id) + " is no NQ ring of this function");
    }
    roce_cq cq{.handle = in.cq_handle, .entries = in.cq_size, .nq = static_cast<std::uint16_t>(in.cnq_id),
               .dpi = in.dpi, .memory = {.page_bytes = page_bytes_of(static_cast<std::uint8_t>(in.pg_size))}};
    if (cq.entries == 0 || cq.entries > max_cqe || cq.memory.page_bytes == 0 || in.lvl > 2 || in.dpi >= max_dpi()) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "CREATE_CQ: cq_size " + std::to_string(in.cq_size) + " (1.." + std::to_string(max_cqe) +
                          "), pg_size " + std::to_string(in.pg_size) + ", level " + std::to_string(in.lvl) +
                          ", dpi " + std::to_string(in.dpi));
    }
    const auto area = _ctx.find("CQ");
    const auto id = area == _ctx.end() ? std::nullopt : free_id(_rcfw.cqs, _o.cq_max_l2_entries, area->second.entries);
    if (!id) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_RESOURCES, "CREATE_CQ: no free CQ context entry");
    }
    call c;
    c.dma = dma;
    std::vector<std::uint64_t> tables;
    const std::uint64_t pages = (cqe_bytes * cq.entries + cq.memory.page_bytes - 1) / cq.memory.page_bytes;
    if (!walk_pages(c, in.pbl, static_cast<std::uint8_t>(in.lvl), cq.memory.page_bytes, pages, cq.memory.pages, tables)) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER, "CREATE_CQ: the CQ's pages: " + c.why);
    }
    if (!write_context("CQ", *id, record_cq, in.cq_handle, dma)) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_HARDWARE_ERROR, "CREATE_CQ: context entry not writable");
    }
    _rcfw.cqs.emplace(*id, std::move(cq));
    _changes.note(&object_changes::cqs, *id);
    put(entry, abi::creq_create_cq_resp{.xid = *id});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// A CQ that a queue pair still names is not destroyed (the model's judgement: a card would go
// on writing its CQEs).
std::uint8_t firmware::rcfw_destroy_cq(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                       std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_destroy_cq>(cmd);
    const auto cq = _rcfw.cqs.find(in.cq_cid);
    if (cq == _rcfw.cqs.end()) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "DESTROY_CQ: cq_cid " + std::to_string(in.cq_cid) + " names no CQ");
    }
    if (cq->second.queue_pairs != 0) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "DESTROY_CQ: CQ " + std::to_string(in.cq_cid) + " is named by " +
                          std::to_string(cq->second.queue_pairs) + " queue pair(s)");
    }
    write_context("CQ", in.cq_cid, 0, 0, dma);
    _rcfw.cqs.erase(cq);
    _changes.note(&object_changes::cqs, in.cq_cid);
    put(entry, abi::creq_destroy_cq_resp{.xid = in.cq_cid});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// ---- memory keys -----------------------------------------------------------------------------

std::uint8_t firmware::rcfw_allocate_mrw(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                         std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_allocate_mrw>(cmd);
    if (in.mrw_flags > abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_MW_TYPE2B) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "ALLOCATE_MRW: mrw_flags " + std::to_string(in.mrw_flags) + " (MR, PMR, MW type 1, 2A, 2B)");
    }
    const auto area = _ctx.find("MRAV");
    const auto key = area == _ctx.end() ? std::nullopt : free_id(_rcfw.keys, 1, area->second.entries);
    if (!key) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_RESOURCES, "ALLOCATE_MRW: no free MRAV context entry");
    }
    if (!write_context("MRAV", *key, record_key, in.mrw_handle, dma)) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_HARDWARE_ERROR, "ALLOCATE_MRW: context entry not writable");
    }
    _rcfw.keys.emplace(*key, roce_key{.kind = static_cast<std::uint8_t>(in.mrw_flags), .pd = in.pd_id, .handle = in.mrw_handle});
    _changes.note(&object_changes::keys, *key);
    put(entry, abi::creq_allocate_mrw_resp{.xid = *key});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// REGISTER_MR on a key ALLOCATE_MRW made (MR or PMR; again on a registered one: re-registration).
// pbl 0 with mr_size all ones is the DMA MR bnxt_re_get_dma_mr registers: every address the
// IOMMU lets the function reach. ALLOC_MR is not offered (QUERY_FUNC has no MR_REGISTER_ALLOC).
std::uint8_t firmware::rcfw_register_mr(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                        std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_register_mr>(cmd);
    const auto k = _rcfw.keys.find(in.key);
    auto bad = [&](const std::string& why) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER, "REGISTER_MR key " + hex(in.key) + ": " + why);
    };
    if ((in.flags & abi::CMDQ_REGISTER_MR_FLAGS_ALLOC_MR) != 0) {
        return bad("ALLOC_MR, which QUERY_FUNC does not offer");
    }
    if (k == _rcfw.keys.end() || k->second.kind > abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_PMR) {
        return bad("names no MR or PMR key");
    }
    const bool remote_write = (in.access & (abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE | abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_ATOMIC)) != 0;
    if (in.access > 0x3f || (remote_write && (in.access & abi::CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE) == 0)) {
        return bad("access " + hex(in.access) + " (remote write or atomic needs local write, IB 10.6.3.1)");
    }
    roce_key next = k->second;
    next.registered = true;
    next.access = in.access;
    next.va = in.va;
    next.bytes = in.mr_size;
    next.memory = {.page_bytes = std::uint64_t{1} << std::min<std::uint8_t>(in.log2_pg_size, 63)};
    if (in.pbl == 0 && in.mr_size == ~std::uint64_t{0}) {
        next.memory.pages.clear();   // the DMA MR: no page list
    } else {
        if (in.log2_pg_size < 12 || in.log2_pg_size > 30 || in.lvl > 2 || in.mr_size == 0 || in.pbl == 0) {
            return bad("log2_pg_size " + std::to_string(in.log2_pg_size) + " (12..30), level " + std::to_string(in.lvl) +
                       ", mr_size " + std::to_string(in.mr_size) + ", pbl " + hex(in.pbl));
        }
        const std::uint64_t page = next.memory.page_bytes;
        const bool zero_based = (in.access & abi::CMDQ_REGISTER_MR_ACCESS_ZERO_BASED) != 0;
        const std::uint64_t first = zero_based ? 0 : in.va % page;
        const std::uint64_t count = (first + in.mr_size + page - 1) / page;
        const std::uint64_t table_page = std::uint64_t{1} << std::clamp<std::uint16_t>(in.log2_pbl_pg_size, 12, 30);
        call c;
        c.dma = dma;
        std::vector<std::uint64_t> tables;
        if (!walk_pages(c, in.pbl, static_cast<std::uint8_t>(in.lvl), page, count, next.memory.pages, tables, table_page)) {
            return bad("the page list: " + c.why);
        }
    }
    k->second = std::move(next);
    _changes.note(&object_changes::keys, in.key);
    put(entry, abi::creq_register_mr_resp{.xid = in.key});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

std::uint8_t firmware::rcfw_deregister_mr(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_deregister_mr>(cmd);
    const auto k = _rcfw.keys.find(in.lkey);
    if (k == _rcfw.keys.end() || !k->second.registered) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "DEREGISTER_MR: lkey " + hex(in.lkey) + " names no registered MR");
    }
    k->second.registered = false;
    k->second.memory = {};
    _changes.note(&object_changes::keys, in.lkey);
    put(entry, abi::creq_deregister_mr_resp{.xid = in.lkey});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// DEALLOCATE_KEY frees a key, registered or not (bnxt_re_dereg_mr sends only this), when its
// mrw_flags name the key's kind.
std::uint8_t firmware::rcfw_deallocate_key(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                           std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_deallocate_key>(cmd);
    const auto k = _rcfw.keys.find(in.key);
    if (k == _rcfw.keys.end() || k->second.kind != in.mrw_flags) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "DEALLOCATE_KEY: key " + hex(in.key) + " of kind " + std::to_string(in.mrw_flags) + " names nothing");
    }
    write_context("MRAV", in.key, 0, 0, dma);
    _rcfw.keys.erase(k);
    _changes.note(&object_changes::keys, in.key);
    put(entry, abi::creq_deallocate_key_resp{.xid = in.key});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// ---- queue pairs -----------------------------------------------------------------------------

namespace {

// One queue's pages (CREATE_QP sq_pbl/rq_pbl with their level and page size code), `bytes` long.
bool queue_pages(firmware::call& c, std::uint64_t pbl, std::uint8_t level, std::uint8_t pg_size,
                 std::uint64_t bytes, queue_memory& q) {
    q.page_bytes = page_bytes_of(pg_size);
    if (q.page_bytes == 0) {
        c.why = "page size code " + std::to_string(pg_size);
        return false;
    }
    std::vector<std::uint64_t> tables;
    return walk_pages(c, pbl, level, q.page_bytes, (bytes + q.page_bytes - 1) / q.page_bytes, q.pages, tables);
}

}  // namespace

std::uint8_t firmware::rcfw_create_qp(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                      std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_create_qp>(cmd);
    auto bad = [&](const std::string& why) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER, "CREATE_QP: " + why);
    };
    const bool rc = in.type == abi::CMDQ_CREATE_QP_TYPE_RC;
    if (!rc && in.type != abi::CMDQ_CREATE_QP_TYPE_UD && in.type != abi::CMDQ_CREATE_QP_TYPE_GSI) {
        return bad("type " + std::to_string(in.type) + " (RC 2, UD 4, GSI 7)");
    }
    if ((in.qp_flags & (abi::CMDQ_CREATE_QP_QP_FLAGS_SRQ_USED | abi::CMDQ_CREATE_QP_QP_FLAGS_VARIABLE_SIZED_WQE_ENABLED)) != 0) {
        return bad("qp_flags " + hex(in.qp_flags) + ": SRQs and variable-sized WQEs are not modelled");
    }
    if (in.sq_size == 0 || in.sq_size > max_qp_wqes || in.rq_size == 0 || in.rq_size > max_qp_wqes ||
        in.sq_sge == 0 || in.sq_sge > max_sge || in.rq_sge == 0 || in.rq_sge > max_sge || in.dpi >= max_dpi()) {
        return bad("sq_size " + std::to_string(in.sq_size) + ", rq_size " + std::to_string(in.rq_size) + " (1.." +
                   std::to_string(max_qp_wqes) + "), sq_sge " + std::to_string(in.sq_sge) + ", rq_sge " +
                   std::to_string(in.rq_sge) + " (1..6), dpi " + std::to_string(in.dpi));
    }
    const auto scq = _rcfw.cqs.find(in.scq_cid);
    const auto rcq = _rcfw.cqs.find(in.rcq_cid);
    if (scq == _rcfw.cqs.end() || rcq == _rcfw.cqs.end()) {
        return bad("scq_cid " + std::to_string(in.scq_cid) + " / rcq_cid " + std::to_string(in.rcq_cid) + " names no CQ");
    }
    if (rc && (in.irrq_addr == 0 || in.orrq_addr == 0)) {
        return bad("an RC queue pair without IRRQ and ORRQ memory");
    }
    roce_qp qp{.type = static_cast<std::uint8_t>(in.type), .handle = in.qp_handle, .flags = in.qp_flags,
               .state = abi::CMDQ_MODIFY_QP_NEW_STATE_RESET, .pd = in.pd_id, .dpi = in.dpi,
               .sq_entries = in.sq_size, .rq_entries = in.rq_size, .sq_sge = static_cast<std::uint8_t>(in.sq_sge),
               .rq_sge = static_cast<std::uint8_t>(in.rq_sge), .send_cq = in.scq_cid, .receive_cq = in.rcq_cid,
               .irrq = in.irrq_addr, .orrq = in.orrq_addr};
    call c;
    c.dma = dma;
    const std::uint64_t sq_bytes = std::uint64_t{in.sq_size} * (sq_wqe_bytes + (rc ? psn_entry_bytes : 0));
    const std::uint64_t rq_bytes = std::uint64_t{in.rq_size} * (rq_header_bytes + sge_bytes * in.rq_sge);
    if (!queue_pages(c, in.sq_pbl, static_cast<std::uint8_t>(in.sq_lvl), static_cast<std::uint8_t>(in.sq_pg_size), sq_bytes, qp.sq)) {
        return bad("the send queue's pages: " + c.why);
    }
    if (!queue_pages(c, in.rq_pbl, static_cast<std::uint8_t>(in.rq_lvl), static_cast<std::uint8_t>(in.rq_pg_size), rq_bytes, qp.rq)) {
        return bad("the receive queue's pages: " + c.why);
    }
    const auto area = _ctx.find("QP");
    const std::uint32_t ids = area == _ctx.end() || area->second.entries <= area->second.l2_entries
                                  ? 0 : area->second.entries - area->second.l2_entries + 1;
    const auto id = in.type == abi::CMDQ_CREATE_QP_TYPE_GSI ? (ids > 1 && !_rcfw.qps.contains(1) ? std::optional<std::uint32_t>{1} : std::nullopt)
                                                             : free_id(_rcfw.qps, 2, ids);
    if (!id) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_RESOURCES,
                      in.type == abi::CMDQ_CREATE_QP_TYPE_GSI ? "CREATE_QP: the GSI queue pair exists, or no context for it"
                                                              : "CREATE_QP: no free QP context entry");
    }
    if (!write_context("QP", area->second.l2_entries + *id - 1, record_qp, in.qp_handle, dma)) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_HARDWARE_ERROR, "CREATE_QP: context entry not writable");
    }
    ++scq->second.queue_pairs;
    ++rcq->second.queue_pairs;
    _rcfw.qps.emplace(*id, std::move(qp));
    _changes.note(&object_changes::qps, *id);
    put(entry, abi::creq_create_qp_resp{.xid = *id});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// DESTROY_QP in any state: the NIC runs none of its entries after the completion.
std::uint8_t firmware::rcfw_destroy_qp(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                       std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_destroy_qp>(cmd);
    const auto qp = _rcfw.qps.find(in.qp_cid);
    if (qp == _rcfw.qps.end()) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "DESTROY_QP: qp_cid " + std::to_string(in.qp_cid) + " names no queue pair");
    }
    for (const std::uint32_t cq : {qp->second.send_cq, qp->second.receive_cq}) {
        if (const auto it = _rcfw.cqs.find(cq); it != _rcfw.cqs.end() && it->second.queue_pairs != 0) {
            --it->second.queue_pairs;
        }
    }
    write_context("QP", _ctx.at("QP").l2_entries + in.qp_cid - 1, 0, 0, dma);
    _rcfw.qps.erase(qp);
    _changes.note(&object_changes::qps, in.qp_cid);
    put(entry, abi::creq_destroy_qp_resp{.xid = in.qp_cid});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// QUERY_QP: the state and MODIFY_QP's attributes into the side buffer (resp_size 7).
std::uint8_t firmware::rcfw_query_qp(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                     std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_query_qp>(cmd);
    const auto it = _rcfw.qps.find(in.qp_cid);
    if (it == _rcfw.qps.end()) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "QUERY_QP: qp_cid " + std::to_string(in.qp_cid) + " names no queue pair");
    }
    constexpr std::uint8_t sb_slots = (abi::creq_query_qp_resp_sb::layout_size + 15) / 16;
    if (in.resp_size < sb_slots || in.resp_addr == 0) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER,
                      "QUERY_QP: side buffer of " + std::to_string(in.resp_size) + " slots (" + std::to_string(sb_slots) + " needed)");
    }
    const roce_qp& q = it->second;
    const roce_qp_attributes& a = q.attributes;
    abi::creq_query_qp_resp_sb sb{.opcode = in.opcode, .cookie = in.cookie, .resp_size = sb_slots, .xid = in.qp_cid,
                                  .state = q.state, .access = a.access, .pkey = a.pkey, .qkey = a.qkey, .dgid = a.dgid,
                                  .flow_label = a.flow_label, .sgid_index = a.sgid_index, .hop_limit = a.hop_limit,
                                  .traffic_class = a.traffic_class, .dest_mac = a.dest_mac,
                                  .dest_vlan_id = static_cast<std::uint16_t>(a.vlan & 0x0fff), .path_mtu = a.path_mtu,
                                  .timeout = a.timeout, .retry_cnt = a.retry_cnt, .rnr_retry = a.rnr_retry,
                                  .min_rnr_timer = a.min_rnr_timer, .rq_psn = a.rq_psn, .sq_psn = a.sq_psn,
                                  .max_rd_atomic = a.max_rd_atomic, .max_dest_rd_atomic = a.max_dest_rd_atomic,
                                  .sq_size = q.sq_entries, .rq_size = q.rq_entries, .sq_sge = q.sq_sge, .rq_sge = q.rq_sge,
                                  .max_inline_data = 96, .dest_qp_id = a.dest_qp_id, .src_mac = a.src_mac,
                                  .vlan_id = static_cast<std::uint16_t>(a.vlan & 0x0fff)};
    if (!dma->write(in.resp_addr, abi::to_bytes(sb))) {
        return refuse(_rcfw, abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER, "QUERY_QP: side buffer not writable");
    }
    put(entry, abi::creq_query_qp_resp{.size = sb_slots});
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// ---- the NIC's own word: QP_ERROR_NOTIFICATION (roce_hsi.h creq_*, qplib_rcfw.c) ----------------

std::vector<std::uint16_t> firmware::rcfw_qp_error(std::uint32_t qpn, std::uint8_t req_reason, std::uint8_t res_reason,
                                                   std::uint16_t sq_cons, std::uint16_t rq_cons, vfio_user::dma_space* dma) {
    const auto qp = _rcfw.qps.find(qpn);
    if (qp == _rcfw.qps.end() || !_rcfw.enabled || dma == nullptr) {
        return {};
    }
    qp->second.state = abi::CMDQ_MODIFY_QP_NEW_STATE_ERR;
    _changes.note(&object_changes::qps, qpn);
    abi::creq_qp_error_notification n{.type = abi::CREQ_BASE_TYPE_QP_EVENT, .req_err_state_reason = req_reason,
                                      .xid = qpn, .event = abi::CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION,
                                      .res_err_state_reason = res_reason, .sq_cons_idx = sq_cons, .rq_cons_idx = rq_cons};
    auto e = abi::to_bytes(n);
    if (!rcfw_complete(dma, e)) {
        return {};
    }
    return creq_vectors();
}

// ---- dispatch --------------------------------------------------------------------------------

std::uint8_t firmware::rcfw_object_command(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                           std::array<std::byte, 16>& entry) {
    switch (abi::decode<abi::cmdq_base>(cmd)->opcode) {
    case abi::CMDQ_BASE_OPCODE_CREATE_CQ: return rcfw_create_cq(cmd, dma, entry);
    case abi::CMDQ_BASE_OPCODE_DESTROY_CQ: return rcfw_destroy_cq(cmd, dma, entry);
    case abi::CMDQ_BASE_OPCODE_ALLOCATE_MRW: return rcfw_allocate_mrw(cmd, dma, entry);
    case abi::CMDQ_BASE_OPCODE_REGISTER_MR: return rcfw_register_mr(cmd, dma, entry);
    case abi::CMDQ_BASE_OPCODE_DEREGISTER_MR: return rcfw_deregister_mr(cmd, entry);
    case abi::CMDQ_BASE_OPCODE_DEALLOCATE_KEY: return rcfw_deallocate_key(cmd, dma, entry);
    case abi::CMDQ_BASE_OPCODE_CREATE_QP: return rcfw_create_qp(cmd, dma, entry);
    case abi::CMDQ_BASE_OPCODE_DESTROY_QP: return rcfw_destroy_qp(cmd, dma, entry);
    case abi::CMDQ_BASE_OPCODE_MODIFY_QP: return rcfw_modify_qp(cmd, entry);
    case abi::CMDQ_BASE_OPCODE_QUERY_QP: return rcfw_query_qp(cmd, dma, entry);
    default: return abi::CREQ_QP_EVENT_STATUS_NOT_IMPLEMENTED;
    }
}

}  // namespace rig::sim::bnxt
