// Fuzzes the bnxt model's RoCE command channel (sim/bnxt/rcfw.cpp firmware::rcfw_doorbell, and
// behind it rcfw_execute, rcfw_objects.cpp and rcfw_modify_qp.cpp) with CMDQ commands as a
// hostile driver writes them. Each input gets a fresh firmware with a RoCE backing store (made by
// the driver's context_memory, hwrm_bench.hpp), a CREQ NQ, a statistics context and cmdq_init
// (a 256-slot CMDQ at level 0), optionally INITIALIZE_FW and one ADD_GID; then a sequence of ops:
//   0 raw command: any opcode, cmd_size, cookie and body, the producer moved by the slots written
//   1 a well-formed command (CREATE_CQ/QP, MODIFY_QP to any state with any mask, QUERY_QP,
//     DESTROY_QP/CQ, ALLOCATE_MRW, REGISTER_MR, DEREGISTER_MR, DEALLOCATE_KEY, ADD_GID,
//     DELETE_GID, QUERY_FUNC, QUERY_VERSION, INITIALIZE_FW, DEINITIALIZE_FW) naming objects made
//     before (or ids never made), a lying cmd_size by choice, then single-byte overwrites
//   2 the channel restarted (FIRMWARE_FIRST_FLAG with cmdq_init)
// Oracle (roce_hsi.h; qplib_rcfw.c __send_message / bnxt_qplib_process_qp_event; IB spec 1.4
// §10.3.1 for the QP state machine): a command whose cmd_size is the slots written completes
// with exactly one CREQ QP_EVENT carrying its cookie and opcode, with the valid bit of the
// CREQ's pass, and a status roce_hsi.h lists; the firmware counts it. The ledger stays
// consistent: a successful create adds exactly one object of its kind (CQ, key, QP), a
// successful destroy removes exactly one, DEINITIALIZE_FW removes all, any refusal changes no
// object count and no QP state; a MODIFY_QP that succeeds with the STATE bit leaves the QP in
// new_state, and only along a transition ib_modify_qp_is_ok allows. After the sequence
// QUERY_VERSION still completes SUCCESS with its cookie.
#include "abi/bnxt/rcfw.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "test/fuzz/bnxt/hwrm_bench.hpp"

namespace {

using namespace rig::fuzz::bnxt;
using rig::fuzz::require;
namespace ra = ::rig::abi;

// ib_verbs.c ib_modify_qp_is_ok's table, states as CMDQ_MODIFY_QP_NEW_STATE_* (RESET 0 .. ERR 6).
bool ib_allows(std::uint8_t from, std::uint8_t to) {
    constexpr std::uint8_t allowed[7] = {
        0b0000011,   // RESET: RESET, INIT
        0b1000111,   // INIT: RESET, INIT, RTR, ERR
        0b1001001,   // RTR: RESET, RTS, ERR
        0b1011001,   // RTS: RESET, RTS, SQD, ERR
        0b1011001,   // SQD: RESET, RTS, SQD, ERR
        0b1001001,   // SQE: RESET, RTS, ERR
        0b1000001,   // ERR: RESET, ERR
    };
    return from < 7 && to < 7 && ((allowed[from] >> to) & 1) != 0;
}

struct ledger {
    std::size_t cqs, keys, qps;
    std::map<std::uint32_t, std::uint8_t> qp_states;
};
ledger ledger_of(const model::firmware& fw) {
    const auto& r = fw.rcfw();
    ledger l{r.cqs.size(), r.keys.size(), r.qps.size(), {}};
    for (const auto& [id, qp] : r.qps) {
        l.qp_states[id] = qp.state;
    }
    return l;
}

class channel {
public:
    channel(model_bench& b, model::firmware& fw) : _b(b), _fw(fw) {}

    // The backing store, the CREQ, a statistics context and cmdq_init.
    void open() {
        require(_b.send(_fw, bytes_of_layout(_b.backing_store_cfg)).error_code == 0, "the backing store is taken");
        abi::hwrm_ring_alloc_input r;
        r.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
        r.length = model_bench::creq_entries;
        r.page_size = 12;
        r.page_tbl_addr = _b.iova(model_bench::creq_off);
        r.logical_id = 1;
        r.int_mode = abi::RING_ALLOC_REQ_INT_MODE_MSIX;
        require(_b.send(_fw, bytes_of_layout(r)).error_code == 0, "the CREQ is made");
        creq_id = abi::decode<abi::hwrm_ring_alloc_output>(_b.response())->ring_id;
        abi::hwrm_stat_ctx_alloc_input s;
        s.stats_dma_addr = _b.iova(model_bench::stats_off);
        s.update_period_ms = 1000;
        s.stat_ctx_flags = abi::STAT_CTX_ALLOC_REQ_STAT_CTX_FLAGS_ROCE;
        require(_b.send(_fw, bytes_of_layout(s)).error_code == 0, "the statistics context is made");
        stat_ctx = abi::decode<abi::hwrm_stat_ctx_alloc_output>(_b.response())->stat_ctx_id;
        abi::cmdq_init init;
        init.cmdq_pbl = _b.iova(model_bench::cmdq_off);
        init.cmdq_lvl = 0;
        init.cmdq_size = model_bench::cmdq_slots;
        init.creq_ring_id = creq_id;
        const auto ib = abi::to_bytes(init);
        std::memcpy(_mailbox.data(), ib.data(), ib.size());
        restart();
    }
    // The channel (re)started as a driver restarts it: its CMDQ and CREQ zeroed, a producer of
    // 0 with FIRMWARE_FIRST_FLAG rung (the firmware takes cmdq_init again, every object goes).
    void restart() {
        std::memset(_b.host(model_bench::cmdq_off), 0, model_bench::cmdq_slots * 16);
        std::memset(_b.host(model_bench::creq_off), 0, model_bench::creq_entries * 16);
        _prod = 0;
        ring(abi::FIRMWARE_FIRST_FLAG);
        require(_fw.rcfw().enabled && _fw.rcfw().creq_producer == 0 && _fw.rcfw().qps.empty(), "cmdq_init is taken");
    }

    // Writes `cmd` (its cmd_size and cookie as they are) into `slots` slots at the producer,
    // rings, and returns the CREQ entries the doorbell wrote (none when it wrote more than the
    // ring holds: the driver's consumer is then moved past them, as after an overrun).
    std::vector<std::array<std::byte, 16>> submit(std::span<const std::byte> cmd, std::uint32_t slots) {
        for (std::uint32_t s = 0; s < slots; ++s) {
            std::byte* slot = _b.host(model_bench::cmdq_off + (_prod + s) % model_bench::cmdq_slots * 16);
            std::memset(slot, 0, 16);
            if (16 * s < cmd.size()) {
                std::memcpy(slot, cmd.data() + 16 * s, std::min<std::size_t>(16, cmd.size() - 16 * s));
            }
        }
        _prod += slots;
        const std::uint64_t from = _fw.rcfw().creq_producer;
        ring(0);
        const std::uint64_t to = _fw.rcfw().creq_producer;
        std::vector<std::array<std::byte, 16>> out;
        for (std::uint64_t i = from; to - from <= model_bench::creq_entries && i < to; ++i) {
            const std::byte* e = _b.host(model_bench::creq_off + i % model_bench::creq_entries * 16);
            const bool phase = ((i / model_bench::creq_entries) & 1) == 0;   // CREQ_CMP_VALID by pass
            require(abi::creq_is_new(std::span<const std::byte>(e, 16), phase), "each CREQ entry has its pass's valid bit");
            std::array<std::byte, 16> entry;
            std::memcpy(entry.data(), e, 16);
            out.push_back(entry);
        }
        return out;
    }

    std::uint16_t creq_id = 0;
    std::uint32_t stat_ctx = 0;

private:
    model_bench& _b;
    model::firmware& _fw;
    void ring(std::uint32_t flags) {
        ra::store_le<std::uint32_t>(_mailbox.data() + abi::RCFW_PF_VF_COMM_PROD_OFFSET,
                                    (_prod % model_bench::cmdq_slots) | flags);
        _fw.rcfw_doorbell(_mailbox, &_b.dma, nullptr);
    }
    std::array<std::byte, 16> _mailbox{};
    std::uint32_t _prod = 0;
};

// The ids the sequence made, for the commands that name objects.
struct made {
    std::vector<std::uint32_t> cqs, qps, keys, gids;
    static std::uint32_t pick(reader& in, const std::vector<std::uint32_t>& ids) {
        const std::uint8_t k = in.u8();
        return k < ids.size() ? ids[k] : (k >= 0xf0 ? in.u32() : k);   // a made id, or any
    }
};

// A scratch page for queues and tables (0..7) or side buffers (8..15).
std::uint64_t page_of(model_bench& b, unsigned k) { return b.iova(model_bench::free_off + 0x1000 * (k % 16)); }

// The object commands (selector 0..9).
std::vector<std::byte> object_command(unsigned which, reader& in, model_bench& b, channel& ch, const made& m,
                                      std::uint64_t side) {
    const auto page = [&](unsigned k) { return page_of(b, k % 8); };
    switch (which) {
    case 0: {
        abi::cmdq_create_cq c;
        c.cq_handle = in.u64();
        c.cq_size = 1 + in.u8() % 128;   // 32-byte CQEs in one page: level 0
        c.cnq_id = ch.creq_id;
        c.dpi = 1;
        c.pbl = page(in.u8());
        return bytes_of_layout(c);
    }
    case 1: {
        abi::cmdq_create_qp c;
        c.qp_handle = in.u64();
        c.type = in.u8() % 4 == 0 ? abi::CMDQ_CREATE_QP_TYPE_UD : abi::CMDQ_CREATE_QP_TYPE_RC;
        c.sq_size = 16;   // 16 x (128 + 16 PSN) bytes: one page
        c.sq_sge = 1;
        c.rq_size = 16;
        c.rq_sge = 1;
        c.scq_cid = made::pick(in, m.cqs);
        c.rcq_cid = made::pick(in, m.cqs);
        c.pd_id = 1;
        c.dpi = 1;
        c.sq_pbl = page(0);
        c.rq_pbl = page(1);
        c.irrq_addr = page(2);
        c.orrq_addr = page(3);
        return bytes_of_layout(c);
    }
    case 2: {
        abi::cmdq_modify_qp c;
        c.qp_cid = made::pick(in, m.qps);
        c.modify_mask = in.u8() % 2 == 0 ? abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE : in.u32();
        c.new_state = in.u8() % 8;
        c.pkey = 0xffff;
        c.access = in.u8();
        c.path_mtu = in.u8() % 5;
        c.dest_qp_id = in.u32();
        c.sgid_index = static_cast<std::uint16_t>(made::pick(in, m.gids));
        c.dest_mac = {0x02, 0x52, 0x49, 0x47, 0x50, 0x01};
        c.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2};
        c.max_rd_atomic = in.u8() % 17;
        c.max_dest_rd_atomic = in.u8() % 17;
        c.timeout = 14;
        c.retry_cnt = 7;
        c.rnr_retry = 7;
        c.sq_psn = in.u32() & 0xffffff;
        c.rq_psn = in.u32() & 0xffffff;
        return bytes_of_layout(c);
    }
    case 3: {
        abi::cmdq_query_qp c;
        c.qp_cid = made::pick(in, m.qps);
        c.resp_addr = side;
        return bytes_of_layout(c);
    }
    case 4: {
        abi::cmdq_destroy_qp c;
        c.qp_cid = made::pick(in, m.qps);
        return bytes_of_layout(c);
    }
    case 5: {
        abi::cmdq_destroy_cq c;
        c.cq_cid = made::pick(in, m.cqs);
        return bytes_of_layout(c);
    }
    case 6: {
        abi::cmdq_allocate_mrw c;
        c.mrw_handle = in.u64();
        c.mrw_flags = in.u8() % 5;
        c.access = in.u8();
        c.pd_id = 1;
        return bytes_of_layout(c);
    }
    case 7: {
        abi::cmdq_register_mr c;
        c.key = made::pick(in, m.keys);
        c.lvl = 0;
        c.log2_pg_size = 12;
        c.log2_pbl_pg_size = 12;
        c.access = in.u8();
        c.pbl = page(in.u8());
        c.va = in.u64();
        c.mr_size = 1 + in.u16() % 4096;
        return bytes_of_layout(c);
    }
    case 8: {
        abi::cmdq_deregister_mr c;
        c.lkey = made::pick(in, m.keys);
        return bytes_of_layout(c);
    }
    default: {
        abi::cmdq_deallocate_key c;
        c.key = made::pick(in, m.keys);
        c.mrw_flags = in.u8() % 5;
        return bytes_of_layout(c);
    }
    }
}

// The channel's own commands (selector 10..14).
std::vector<std::byte> channel_command(unsigned which, reader& in, channel& ch, const made& m, std::uint64_t side) {
    switch (which) {
    case 10: {
        abi::cmdq_add_gid c;
        std::array<std::uint8_t, 16> gid{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        gid[15] = in.u8();
        c.gid = abi::add_gid_gid(gid);
        c.src_mac = abi::add_gid_src_mac({0x02, 0x52, 0x49, 0x47, 0x50, 0x00});
        return bytes_of_layout(c);
    }
    case 11: {
        abi::cmdq_delete_gid c;
        c.gid_index = static_cast<std::uint16_t>(made::pick(in, m.gids));
        return bytes_of_layout(c);
    }
    case 12: {
        abi::cmdq_query_func c;
        c.resp_addr = side;
        return bytes_of_layout(c);
    }
    case 13: {
        abi::cmdq_initialize_fw c;
        c.stat_ctx_id = ch.stat_ctx;
        return bytes_of_layout(c);
    }
    default:
        return in.u8() % 2 == 0 ? bytes_of_layout(abi::cmdq_deinitialize_fw{}) : bytes_of_layout(abi::cmdq_query_version{});
    }
}

std::vector<std::byte> well_formed(reader& in, model_bench& b, channel& ch, const made& m) {
    const std::uint64_t side = page_of(b, 8 + in.u8() % 8);
    const unsigned which = in.u8() % 15;
    return which < 10 ? object_command(which, in, b, ch, m, side) : channel_command(which, in, ch, m, side);
}

// One command: submitted, its completion and the ledger judged.
void run(model::firmware& fw, channel& ch, made& m, std::vector<std::byte> cmd, std::uint32_t slots, bool honest) {
    const std::uint8_t op = std::to_integer<std::uint8_t>(cmd[0]);
    const std::uint16_t cookie = ra::load_le<std::uint16_t>(cmd.data() + 4);
    const ledger before = ledger_of(fw);
    const std::uint64_t completed = fw.rcfw().completed;
    const auto entries = ch.submit(cmd, slots);
    require(fw.rcfw().completed == completed + entries.size(), "the firmware counts each completion it wrote");
    for (const auto& e : entries) {
        const auto ev = *abi::decode<abi::creq_qp_event>(e);
        require(ev.type == abi::CREQ_BASE_TYPE_QP_EVENT, "a command completes with a QP_EVENT");
        require(ev.status <= abi::CREQ_QP_EVENT_STATUS_INTERNAL_ERROR, "a status roce_hsi.h lists");
    }
    if (!honest) {
        return;   // the slots and cmd_size disagree: the firmware reads what cmd_size says
    }
    require(entries.size() == 1, "a command of cmd_size slots completes once");
    const auto ev = *abi::decode<abi::creq_qp_event>(entries[0]);
    require(ev.cookie == cookie && ev.event == op, "the completion carries the command's cookie and opcode");
    const ledger after = ledger_of(fw);
    const std::uint32_t xid = ra::load_le<std::uint32_t>(entries[0].data() + 4);
    const auto delta = [](std::size_t a, std::size_t b) { return static_cast<long>(a) - static_cast<long>(b); };
    const long dcq = delta(after.cqs, before.cqs), dkey = delta(after.keys, before.keys), dqp = delta(after.qps, before.qps);
    if (ev.status != abi::CREQ_QP_EVENT_STATUS_SUCCESS) {
        require(dcq == 0 && dkey == 0 && dqp == 0 && after.qp_states == before.qp_states,
                "a refused command changes no object");
        return;
    }
    switch (op) {
    case abi::CMDQ_BASE_OPCODE_CREATE_CQ:
        require(dcq == 1 && dkey == 0 && dqp == 0, "CREATE_CQ adds one CQ");
        m.cqs.push_back(xid);
        break;
    case abi::CMDQ_BASE_OPCODE_CREATE_QP:
        require(dcq == 0 && dkey == 0 && dqp == 1 && after.qp_states.at(xid) == 0, "CREATE_QP adds one QP in RESET");
        m.qps.push_back(xid);
        break;
    case abi::CMDQ_BASE_OPCODE_ALLOCATE_MRW:
        require(dcq == 0 && dkey == 1 && dqp == 0, "ALLOCATE_MRW adds one key");
        m.keys.push_back(xid);
        break;
    case abi::CMDQ_BASE_OPCODE_DESTROY_CQ: require(dcq == -1 && dkey == 0 && dqp == 0, "DESTROY_CQ removes one CQ"); break;
    case abi::CMDQ_BASE_OPCODE_DESTROY_QP: require(dcq == 0 && dkey == 0 && dqp == -1, "DESTROY_QP removes one QP"); break;
    case abi::CMDQ_BASE_OPCODE_DEALLOCATE_KEY:
        require(dcq == 0 && dkey == -1 && dqp == 0, "DEALLOCATE_KEY removes one key");
        break;
    case abi::CMDQ_BASE_OPCODE_DEINITIALIZE_FW:
        require(after.cqs == 0 && after.keys == 0 && after.qps == 0, "DEINITIALIZE_FW drops every object");
        break;
    case abi::CMDQ_BASE_OPCODE_ADD_GID: m.gids.push_back(xid); break;
    case abi::CMDQ_BASE_OPCODE_MODIFY_QP: {
        require(dcq == 0 && dkey == 0 && dqp == 0, "MODIFY_QP adds or removes nothing");
        const auto in = *abi::decode<abi::cmdq_modify_qp>(cmd);
        const auto was = before.qp_states.find(in.qp_cid);
        require(was != before.qp_states.end(), "MODIFY_QP succeeds only on a QP that exists");
        const std::uint8_t to = (in.modify_mask & abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE) != 0 ? in.new_state : was->second;
        require(after.qp_states.at(in.qp_cid) == to, "MODIFY_QP leaves the QP in new_state");
        require(ib_allows(was->second, to), "MODIFY_QP succeeds only along a transition IB allows");
        break;
    }
    default:
        require(dcq == 0 && dkey == 0 && dqp == 0, "other commands add or remove no object");
        break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    model_bench& b = restored_bench();
    model::firmware fw(small_firmware());
    channel ch(b, fw);
    ch.open();
    reader in(data, size);
    made m;
    std::uint16_t cookie = 0;
    const std::uint8_t start = in.u8();
    if ((start & 1) != 0) {
        abi::cmdq_initialize_fw init;
        init.stat_ctx_id = ch.stat_ctx;
        init.cookie = ++cookie;
        run(fw, ch, m, bytes_of_layout(init), abi::cmdq_initialize_fw::layout_size / 16, true);
    }
    if ((start & 2) != 0) {
        abi::cmdq_add_gid g;
        g.gid = abi::add_gid_gid({0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x52, 0x49, 0xff, 0xfe, 0x47, 0x50, 0x00});
        g.src_mac = abi::add_gid_src_mac({0x02, 0x52, 0x49, 0x47, 0x50, 0x00});
        g.cookie = ++cookie;
        run(fw, ch, m, bytes_of_layout(g), abi::cmdq_add_gid::layout_size / 16, true);
    }
    for (unsigned ops = 0; !in.empty() && ops < 48; ++ops) {
        switch (in.u8() % 3) {
        case 0: {   // raw
            std::vector<std::byte> cmd(16 * (1 + in.u8() % 12));
            in.copy_some(cmd);
            const std::uint32_t slots = static_cast<std::uint32_t>(cmd.size() / 16);
            run(fw, ch, m, cmd, slots, std::max<std::uint32_t>(std::to_integer<std::uint8_t>(cmd[1]), 1) == slots &&
                                            ra::load_le<std::uint16_t>(cmd.data()) != abi::CMD_DISCR_TLV_ENCAP);
            break;
        }
        case 1: {   // well-formed, maybe lying
            std::vector<std::byte> cmd = well_formed(in, b, ch, m);
            const std::uint32_t slots = static_cast<std::uint32_t>((cmd.size() + 15) / 16);
            ra::store_le<std::uint16_t>(cmd.data() + 4, in.u8() % 8 == 0 ? in.u16() : ++cookie);
            const std::uint8_t lie = in.u8();
            if (lie % 8 == 0) {
                cmd[1] = std::byte{in.u8()};   // cmd_size
            }
            in.overwrite(std::span<std::byte>(cmd).subspan(8), 2);
            run(fw, ch, m, cmd, slots, std::to_integer<std::uint8_t>(cmd[1]) == slots);
            break;
        }
        default:
            ch.restart();
            m = {};
            break;
        }
    }
    abi::cmdq_query_version q;
    q.cookie = 0x7abc;
    run(fw, ch, m, bytes_of_layout(q), 1, true);
    return 0;
}
