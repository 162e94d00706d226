// The RoCE command channel of the bnxt firmware model ("Bono"; roce_hsi.h, qplib_rcfw.c): cmdq_init
// in the BAR0 mailbox, the CMDQ producer and trigger, commands of cmd_size 16-byte slots read by
// DMA, completions on the CREQ (an NQ ring made by HWRM RING_ALLOC) with the valid bit by pass,
// side buffers. Commands: QUERY_VERSION, QUERY_FUNC, INITIALIZE_FW (P5: no context tables, the
// backing store carries them), DEINITIALIZE_FW, ADD_GID, DELETE_GID (the GID table of max_gid
// entries, docs/hardware.md for the refusals), the object commands (rcfw_objects.cpp,
// rcfw_modify_qp.cpp); every other opcode completes NOT_IMPLEMENTED, and before INITIALIZE_FW
// every command but the first three completes INVALID_CMD. Sources:
// roce_hsi.h (cmdq_init, cmdq_base, creq_qp_event, the commands), qplib_rcfw.c
// (bnxt_qplib_start_rcfw, __send_message, bnxt_qplib_service_creq), qplib_sp.c
// (bnxt_qplib_get_dev_attr, bnxt_qplib_add_sgid, bnxt_qplib_del_sgid).
#include <algorithm>
#include <cstring>

#include "abi/bits.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "sim/bnxt/call.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace abi = ::rig::bnxt::abi;
using rig::abi::hex;
using rig::abi::load_le;

namespace {
constexpr std::uint64_t cmdq_page = 4096;   // bnxt_qplib's CMDQ pages (PAGE_SIZE on x86)
}  // namespace

// cmdq_init (roce_hsi.h): the CMDQ's PBL and level, its size in slots, the CREQ ring id. The
// CREQ must be an NQ this function made (P5: bnxt_re_net_ring_alloc with RING_TYPE_NQ).
bool firmware::rcfw_start(std::span<const std::byte> mailbox, vfio_user::dma_space* dma) {
    const auto init = *abi::decode<abi::cmdq_init>(mailbox);
    rcfw_state next;
    auto refuse = [&](std::string why) {
        _rcfw.enabled = false;
        _rcfw.last_error = "cmdq_init: " + why;
        log().warn("bnxt rcfw: {}", _rcfw.last_error);
        return false;
    };
    const auto creq = _rings.find(init.creq_ring_id);
    if (creq == _rings.end() || creq->second.type != abi::RING_ALLOC_REQ_RING_TYPE_NQ) {
        return refuse("creq_ring_id " + hex(init.creq_ring_id) + " is no NQ ring of this function");
    }
    if (init.cmdq_size == 0 || init.cmdq_pbl == 0 || init.cmdq_lvl > 2) {
        return refuse("cmdq_size " + std::to_string(init.cmdq_size) + ", level " +
                      std::to_string(init.cmdq_lvl) + ", pbl " + hex(init.cmdq_pbl));
    }
    next.slots = init.cmdq_size;
    next.level = static_cast<std::uint8_t>(init.cmdq_lvl);
    next.creq_ring = init.creq_ring_id;
    if (init.cmdq_lvl == 0) {
        next.pages = {init.cmdq_pbl};
    } else {
        call c;
        c.dma = dma;
        std::vector<std::uint64_t> tables;
        const std::uint64_t count = (std::uint64_t{next.slots} * abi::cmdq_slot_size + cmdq_page - 1) / cmdq_page;
        if (!walk_pages(c, init.cmdq_pbl, static_cast<std::uint8_t>(init.cmdq_lvl), cmdq_page, count, next.pages, tables)) {
            return refuse("the CMDQ's page table: " + c.why);
        }
    }
    next.enabled = true;
    _rcfw = std::move(next);
    ++_roce_changes;   // the objects went with the old channel
    _changes.note_all();
    return true;
}

std::optional<std::uint64_t> firmware::cmdq_slot_address(std::uint32_t slot) const {
    const std::uint64_t off = std::uint64_t{slot % _rcfw.slots} * abi::cmdq_slot_size;
    if (_rcfw.level == 0) {
        return _rcfw.pages[0] + off;
    }
    if (off / cmdq_page >= _rcfw.pages.size()) {
        return std::nullopt;
    }
    return _rcfw.pages[off / cmdq_page] + off % cmdq_page;
}

// One CREQ entry at the producer, its valid bit (byte 8 bit 0: 1 on the first pass through the
// ring, 0 on the second, ... CREQ_CMP_VALID) written after the rest.
bool firmware::rcfw_complete(vfio_user::dma_space* dma, std::span<std::byte, 16> entry) {
    const auto it = _rings.find(_rcfw.creq_ring);
    if (it == _rings.end()) {
        return false;
    }
    const ring& creq = it->second;
    const std::uint32_t p = _rcfw.creq_producer;
    const bool phase = ((p / creq.length) & 1) == 0;
    entry[8] = (entry[8] & std::byte{0xfe}) | std::byte{phase ? std::uint8_t{1} : std::uint8_t{0}};
    const auto at = creq.entry_address(p % creq.length);
    const std::span<const std::byte> e(entry);
    if (!at || !dma->write(*at, e.first(8)) || !dma->write(*at + 9, e.subspan(9)) ||
        !dma->write_last_byte_last(*at + 8, e.subspan(8, 1))) {
        _rcfw.last_error = "CREQ entry " + std::to_string(p) + " refused by the IOMMU";
        log().warn("bnxt rcfw: {}", _rcfw.last_error);
        return false;
    }
    ++_rcfw.creq_producer;
    return true;
}

bool firmware::nq_post(std::uint16_t ring_id, std::span<std::byte, 16> entry, vfio_user::dma_space* dma) {
    if (_rcfw.enabled && ring_id == _rcfw.creq_ring) {
        return rcfw_complete(dma, entry);
    }
    const auto it = _rings.find(ring_id);
    if (it == _rings.end() || it->second.type != abi::RING_ALLOC_REQ_RING_TYPE_NQ || dma == nullptr) {
        return false;
    }
    ring& nq = it->second;
    const bool phase = ((nq.producer / nq.length) & 1) == 0;
    entry[8] = (entry[8] & std::byte{0xfe}) | std::byte{phase ? std::uint8_t{1} : std::uint8_t{0}};
    const auto at = nq.entry_address(nq.producer % nq.length);
    const std::span<const std::byte> e(entry);
    if (!at || !dma->write(*at, e.first(8)) || !dma->write(*at + 9, e.subspan(9)) ||
        !dma->write_last_byte_last(*at + 8, e.subspan(8, 1))) {
        log().warn("bnxt: NQ {} entry {} refused by the IOMMU", ring_id, nq.producer);
        return false;
    }
    ++nq.producer;
    return true;
}

std::optional<std::uint16_t> firmware::nq_vector(std::uint16_t ring_id) const {
    const auto it = _rings.find(ring_id);
    if (it == _rings.end() || it->second.int_mode != abi::RING_ALLOC_REQ_INT_MODE_MSIX) {
        return std::nullopt;
    }
    return it->second.logical_id;
}

std::vector<std::uint16_t> firmware::rcfw_doorbell(std::span<const std::byte> mailbox, vfio_user::dma_space* dma,
                                                   rcfw_injection* inject) {
    std::vector<std::uint16_t> vectors;
    if (dma == nullptr || mailbox.size() < 16) {
        return vectors;
    }
    const std::uint32_t prod_reg = load_le<std::uint32_t>(mailbox.data() + 12);
    if ((prod_reg & abi::FIRMWARE_FIRST_FLAG) != 0 && !rcfw_start(mailbox, dma)) {
        return vectors;
    }
    if (!_rcfw.enabled) {
        _rcfw.last_error = "CMDQ trigger before a cmdq_init with FIRMWARE_FIRST_FLAG";
        log().warn("bnxt rcfw: {}", _rcfw.last_error);
        return vectors;
    }
    const std::uint32_t prod = (prod_reg & ~abi::FIRMWARE_FIRST_FLAG) % _rcfw.slots;
    bool completed = false;
    while (_rcfw.consumer % _rcfw.slots != prod) {
        std::array<std::byte, 16> head{};
        const auto at = cmdq_slot_address(_rcfw.consumer);
        if (!at || !dma->read(*at, head)) {
            _rcfw.last_error = "CMDQ slot " + std::to_string(_rcfw.consumer) + " not readable";
            log().warn("bnxt rcfw: {}", _rcfw.last_error);
            break;
        }
        // a TLV-framed command (abi roce_tlv): its slots are total_size, its cmdq_base follows
        const bool tlv = load_le<std::uint16_t>(head.data()) == abi::CMD_DISCR_TLV_ENCAP;
        const std::uint32_t n = std::max<std::uint32_t>(
            tlv ? std::to_integer<std::uint32_t>(head[abi::roce_tlv_total_size_offset]) : abi::decode<abi::cmdq_base>(head)->cmd_size, 1);
        std::vector<std::byte> framed(std::max<std::size_t>(n * abi::cmdq_slot_size, 160 + abi::roce_tlv_bytes));
        // A command's slots all lie before the producer (qplib_rcfw.c __send_message writes
        // cmd_size slots, then moves the producer past them): one whose cmd_size runs past it
        // is cut there and refused INVALID_PARAMETER, and the firmware waits at the producer.
        // Stepping past it instead would circle the CMDQ forever on stale slots (fuzz
        // bnxt-cmdq: a lying cmd_size hung the firmware thread).
        const std::uint32_t before_producer = (prod + _rcfw.slots - _rcfw.consumer % _rcfw.slots) % _rcfw.slots;
        const std::uint32_t taken = std::min(n, before_producer);   // the slots read (the cookie's too)
        bool readable = true;
        for (std::uint32_t i = 0; i < taken && readable; ++i) {
            const auto a = cmdq_slot_address(_rcfw.consumer + i);
            readable = a && dma->read(*a, std::span<std::byte>(framed.data() + 16 * i, 16));
        }
        readable = readable && taken == n;
        _rcfw.consumer = (_rcfw.consumer + taken) % _rcfw.slots;
        const std::span<const std::byte> cmd = std::span<const std::byte>(framed).subspan(tlv ? abi::roce_tlv_bytes : 0);
        const auto base = *abi::decode<abi::cmdq_base>(cmd);
        readable = readable && (!tlv || n >= 2);   // a TLV command has its header and a cmdq_base
        std::array<std::byte, 16> entry{};
        abi::creq_qp_event ev;
        ev.type = abi::CREQ_BASE_TYPE_QP_EVENT;
        ev.cookie = base.cookie;
        ev.event = base.opcode;
        if (!readable) {
            ev.status = abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
        } else if (inject != nullptr && *inject && (*inject)->first == base.opcode) {
            ev.status = (*inject)->second;
            inject->reset();
        } else {
            ev.status = rcfw_execute(cmd, dma, entry);
        }
        // the command's own completion fields (xid, sizes) in `entry`, then the common ones
        const auto common = abi::to_bytes(ev);
        for (std::size_t i : {0u, 1u, 2u, 3u, 8u, 9u}) {
            entry[i] = common[i];
        }
        ++_roce_changes;
        log().debug("bnxt rcfw: {} ({:#x}) cookie {:#x}: {}", abi::cmdq_opcode_name(base.opcode), base.opcode,
                    base.cookie, abi::creq_qp_event_status_name(ev.status));   // the trace
        if (!rcfw_complete(dma, entry)) {
            break;
        }
        ++_rcfw.completed;
        completed = true;
    }
    return completed ? creq_vectors() : vectors;
}

// The MSI-X vector new CREQ entries raise: the CREQ ring's logical_id when its int_mode is
// MSI-X and the driver armed it (NQ_ARM: bnxt_qplib_service_creq re-arms after each service,
// bnxt_qplib_rcfw_start_irq arms first); unarmed, the entries wait for the next arm.
std::vector<std::uint16_t> firmware::creq_vectors() {
    if (const auto v = announce(_rcfw.creq_ring)) {
        return {*v};
    }
    return {};
}

// The doorbell pages (DPIs) of BAR2 after the L2 doorbell area (bnxt_re main.c: l2_db_size;
// qplib_res.c bnxt_qplib_alloc_dpi).
std::uint32_t firmware::max_dpi() const noexcept {
    return static_cast<std::uint32_t>((_o.bar2_bytes - (std::uint64_t{_o.l2_doorbell_bar_size_kb} << 10)) / 4096);
}

// QUERY_FUNC: the function's RoCE limits in the side buffer at resp_addr (resp_size 10), from
// the context memory the driver gave (qplib_sp.c bnxt_qplib_get_dev_attr reads them).
std::uint8_t firmware::rcfw_query_func(const abi::cmdq_base& base, vfio_user::dma_space* dma,
                                       std::array<std::byte, 16>& entry) {
    if (base.resp_size < abi::creq_query_func_resp_sb::layout_size / 16 || base.resp_addr == 0) {
        return abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    }
    abi::creq_query_func_resp_sb sb;
    sb.opcode = base.opcode;
    sb.cookie = base.cookie;
    sb.resp_size = static_cast<std::uint8_t>(abi::creq_query_func_resp_sb::layout_size / 16);
    const auto area = [&](const char* t) -> std::uint32_t {
        const auto a = _ctx.find(t);
        return a == _ctx.end() ? 0 : a->second.entries;
    };
    const std::uint32_t qp = area("QP");
    const auto qp_l2 = _ctx.contains("QP") ? _ctx.at("QP").l2_entries : 0;
    sb.max_mr_size = 1ull << 40;
    sb.max_qp = qp > qp_l2 ? qp - qp_l2 : 0;   // excludes QP1 (the driver adds it)
    sb.max_qp_wr = 0xffff;
    sb.max_cq = area("CQ") > _o.cq_max_l2_entries ? area("CQ") - _o.cq_max_l2_entries : 0;
    sb.max_cqe = 0xfffff;
    sb.max_pd = 0x10000;
    sb.max_sge = 6;
    sb.max_srq_sge = 6;
    sb.max_qp_rd_atom = 16;
    sb.max_qp_init_rd_atom = 16;
    sb.max_mr = area("MRAV") / 2;
    sb.max_mw = area("MRAV") / 2;
    sb.max_ah = area("MRAV") / 2;
    sb.max_srq_wr = 0xffff;
    sb.max_pkeys = 1;
    sb.max_inline_data = 96;
    sb.l2_db_space_size = static_cast<std::uint8_t>(_o.l2_doorbell_bar_size_kb / 4 - 1);
    sb.max_srq = static_cast<std::uint16_t>(std::min<std::uint32_t>(0xffff, area("SRQ")));
    sb.max_gid = _o.max_gid;
    // the doorbell pages after the L2 area of BAR2 (qplib_res.c bnxt_qplib_alloc_dpi)
    sb.max_dpi = max_dpi();
    const auto b = abi::to_bytes(sb);
    if (!dma->write(base.resp_addr, b)) {
        return abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    }
    abi::creq_query_func_resp r;
    r.size = sb.resp_size;
    const auto e = abi::to_bytes(r);
    std::memcpy(entry.data(), e.data(), entry.size());
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// INITIALIZE_FW on P5: no context tables (the backing store has them), the RoCE stat context.
std::uint8_t firmware::rcfw_initialize_fw(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_initialize_fw>(cmd);
    if (_rcfw.initialized) {
        return abi::CREQ_QP_EVENT_STATUS_INVALID_CMD;
    }
    if (!roce_backing_store()) {
        // P5 RoCE context lives in the backing store (bnxt.c bnxt_alloc_ctx_mem): too little of it,
        // no RoCE
        return abi::CREQ_QP_EVENT_STATUS_RESOURCES;
    }
    if (!_stats.contains(in.stat_ctx_id)) {
        return abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    }
    _rcfw.initialized = true;
    _rcfw.gids.assign(_o.max_gid, std::nullopt);
    const auto e = abi::to_bytes(abi::creq_initialize_fw_resp{});
    std::memcpy(entry.data(), e.data(), entry.size());
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// ADD_GID (bnxt_qplib_add_sgid): the GID into the lowest free slot of the table, whose index
// is the xid. The driver writes the GID's 16 bytes reversed and the MAC's pairs swapped
// (abi add_gid_gid / add_gid_src_mac, which are their own inverses). Refusals, the model's
// judgement (the kernel checks its own table first and never sends these): the zero GID (the
// kernel's free-slot mark), a group MAC, VLAN id 0xfff (reserved, IEEE 802.1Q), a stats_ctx_id
// that names no statistics context, a GID already in the table with the same vlan word:
// INVALID_PARAMETER; no free slot: RESOURCES.
std::uint8_t firmware::rcfw_add_gid(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_add_gid>(cmd);
    gid_entry g;
    g.gid = abi::add_gid_gid(in.gid);
    g.src_mac = abi::add_gid_src_mac(in.src_mac);
    g.vlan = rig::abi::load_le<std::uint16_t>(cmd.data() + 38);
    g.ipid = in.ipid;
    if (in.stats_ctx_valid != 0) {
        g.stats_ctx = in.stats_ctx_id;
    }
    const bool zero = std::ranges::all_of(g.gid, [](std::uint8_t b) { return b == 0; });
    const bool group_mac = (g.src_mac[0] & 1) != 0;
    const bool bad_vlan = in.vlan_en != 0 && in.vlan_id == 0x0fff;
    const bool bad_stats = g.stats_ctx && !_stats.contains(*g.stats_ctx);
    const bool duplicate = std::ranges::any_of(_rcfw.gids, [&](const std::optional<gid_entry>& e) {
        return e && e->gid == g.gid && e->vlan == g.vlan;
    });
    if (zero || group_mac || bad_vlan || bad_stats || duplicate) {
        return abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    }
    const auto slot = std::ranges::find_if(_rcfw.gids, [](const std::optional<gid_entry>& e) { return !e; });
    if (slot == _rcfw.gids.end()) {
        return abi::CREQ_QP_EVENT_STATUS_RESOURCES;
    }
    *slot = g;
    abi::creq_add_gid_resp r;
    r.xid = static_cast<std::uint32_t>(slot - _rcfw.gids.begin());
    const auto e = abi::to_bytes(r);
    std::memcpy(entry.data(), e.data(), entry.size());
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// DELETE_GID (bnxt_qplib_del_sgid): by the index ADD_GID answered; an index holding no GID is
// refused INVALID_PARAMETER (the model's judgement).
std::uint8_t firmware::rcfw_delete_gid(std::span<const std::byte> cmd, std::array<std::byte, 16>& entry) {
    const auto in = *abi::decode<abi::cmdq_delete_gid>(cmd);
    if (in.gid_index >= _rcfw.gids.size() || !_rcfw.gids[in.gid_index]) {
        return abi::CREQ_QP_EVENT_STATUS_INVALID_PARAMETER;
    }
    _rcfw.gids[in.gid_index].reset();
    abi::creq_delete_gid_resp r;
    r.xid = in.gid_index;
    const auto e = abi::to_bytes(r);
    std::memcpy(entry.data(), e.data(), entry.size());
    return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
}

// Runs one command; its completion's own fields go into `entry`; the CREQ status is returned.
std::uint8_t firmware::rcfw_execute(std::span<const std::byte> cmd, vfio_user::dma_space* dma,
                                    std::array<std::byte, 16>& entry) {
    const auto base = *abi::decode<abi::cmdq_base>(cmd);
    auto put = [&](const auto& resp) {
        const auto b = abi::to_bytes(resp);
        std::memcpy(entry.data(), b.data(), entry.size());
    };
    const bool before_init_ok = base.opcode == abi::CMDQ_BASE_OPCODE_QUERY_VERSION ||
                                base.opcode == abi::CMDQ_BASE_OPCODE_QUERY_FUNC ||
                                base.opcode == abi::CMDQ_BASE_OPCODE_INITIALIZE_FW;
    switch (base.opcode) {
    case abi::CMDQ_BASE_OPCODE_QUERY_VERSION: {
        abi::creq_query_version_resp r;
        r.fw_maj = _o.roce_fw_maj;
        r.fw_minor = _o.roce_fw_min;
        r.fw_bld = _o.roce_fw_bld;
        r.intf_maj = _o.hwrm_intf_maj;
        r.intf_minor = _o.hwrm_intf_min;
        r.intf_bld = _o.hwrm_intf_upd;
        put(r);
        return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
    }
    case abi::CMDQ_BASE_OPCODE_QUERY_FUNC: return rcfw_query_func(base, dma, entry);
    case abi::CMDQ_BASE_OPCODE_INITIALIZE_FW: return rcfw_initialize_fw(cmd, entry);
    case abi::CMDQ_BASE_OPCODE_ADD_GID:
        return _rcfw.initialized ? rcfw_add_gid(cmd, entry) : abi::CREQ_QP_EVENT_STATUS_INVALID_CMD;
    case abi::CMDQ_BASE_OPCODE_DELETE_GID:
        return _rcfw.initialized ? rcfw_delete_gid(cmd, entry) : abi::CREQ_QP_EVENT_STATUS_INVALID_CMD;
    case abi::CMDQ_BASE_OPCODE_DEINITIALIZE_FW:
        if (!_rcfw.initialized) {
            return abi::CREQ_QP_EVENT_STATUS_INVALID_CMD;
        }
        _rcfw.initialized = false;
        _rcfw.gids.clear();
        drop_roce_objects();
        put(abi::creq_deinitialize_fw_resp{});
        return abi::CREQ_QP_EVENT_STATUS_SUCCESS;
    default:
        if (!_rcfw.initialized && !before_init_ok) {
            return abi::CREQ_QP_EVENT_STATUS_INVALID_CMD;
        }
        return rcfw_object_command(cmd, dma, entry);
    }
}

}  // namespace rig::sim::bnxt
