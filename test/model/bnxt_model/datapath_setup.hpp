#pragma once
// Two bnxt functions on one in-process wire, each with its RoCE channel up, a RoCE NQ, MRs, CQs
// and an RC QP connected to the other's, driven raw as docs/bnxt-data-path.md says: WQEs
// written with abi/bnxt/wqe.hpp into the SQ/RQ memory, doorbells stored as one 64-bit word into
// the BAR2 DPI page, CQEs read by their toggle bit, CQ doorbells for the consumer.
#include <atomic>

#include "abi/bnxt/cqe.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "roce_channel.hpp"
// after the rcfw headers (roce_channel.hpp), whose `op` parameters would shadow wqe.hpp's abi::op
#include "abi/bnxt/wqe.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/roce/wire.hpp"

namespace rig::test::bnxt {

inline constexpr std::uint32_t user_dpi = 16;      // the first user DPI (128 KiB L2 area)
inline constexpr std::uint32_t sq_entries = 64, rq_entries = 64, rq_sge = 6;
inline constexpr std::uint64_t buffer_va = 0x7f0000000000;
inline constexpr std::size_t buffer_bytes = 4 * 4096;

// Which word of the QP's 64-byte doorbell block (docs/bnxt-data-path.md "Rig's layout").
enum class db_word : unsigned { sq = 0, rq = 1, send_cq = 2, send_cq_arm = 3, receive_cq = 4, receive_cq_arm = 5 };

struct bnxt_node {
    roce_function r;
    drv::bar_mapping bar2;
    std::uint64_t db_offset = 0x10000;
    std::uint16_t nq = 0;
    served_bnxt::block nq_mem{};
    std::uint32_t nq_entries = 64;
    std::uint32_t key = 0;
    served_bnxt::block buffer{};           // the MR's bytes, at buffer_va
    struct cq {
        std::uint32_t id = 0, entries = 0;
        served_bnxt::block mem{};
        std::uint32_t consumer = 0;        // free-running
    } scq, rcq;
    std::uint32_t qp = 0;
    std::uint64_t qp_handle = 0;
    served_bnxt::block sq{}, rq{};
    std::uint32_t sq_prod = 0, rq_prod = 0;   // free-running WQE counts
    std::array<std::uint8_t, 6> mac{};
    std::array<std::uint8_t, 16> gid{};

    bnxt_node(sim::roce::wire& w, std::uint8_t k, sim::bnxt::function_options o, std::uint32_t send_cq_entries = 64)
        : r(with_mac(o, k)) {
        mac = r.m.fn.with_firmware([](const sim::bnxt::firmware& f) { return f.options().mac; });
        gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, k};
        abi::cmdq_add_gid g;
        g.gid = abi::add_gid_gid(gid);
        g.src_mac = abi::add_gid_src_mac(mac);
        REQUIRE(r.run(g) == std::pair<std::uint8_t, std::uint32_t>{abi::CREQ_QP_EVENT_STATUS_SUCCESS, 1});
        auto mapped = r.m.f->map_bar(drv::region::bar2, drv::caching::uncached);
        REQUIRE(mapped.has_value());
        bar2 = std::move(*mapped);
        make_nq();
        make_mr();
        scq = make_cq(send_cq_entries, 0x5c0000000001ull + k);
        rcq = make_cq(64, 0x7c0000000001ull + k);
        make_qp();
        r.m.fn.attach_wire(w);
    }

    static sim::bnxt::function_options with_mac(sim::bnxt::function_options o, std::uint8_t k) {
        o.firmware.mac = {0x02, 0x52, 0x49, 0x47, 0x42, k};
        return o;
    }

    // A RoCE NQ (RING_ALLOC type NQ, MSI-X vector 2), as bnxt_re_net_ring_alloc makes it.
    void make_nq() {
        abi::hwrm_ring_alloc_input a;
        a.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
        a.length = nq_entries;
        a.page_size = 4;
        a.logical_id = 2;
        a.int_mode = abi::RING_ALLOC_REQ_INT_MODE_MSIX;
        nq_mem = r.m.alloc(std::size_t{nq_entries} * 16);
        a.page_tbl_addr = nq_mem.iova;
        const response resp = r.m.send(a);
        REQUIRE(resp.error_code() == 0);
        nq = resp.as<abi::hwrm_ring_alloc_output>().ring_id;
    }

    void make_mr() {
        abi::cmdq_allocate_mrw alloc;
        alloc.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR;
        alloc.pd_id = 1;
        const auto [status, k] = r.run(alloc);
        REQUIRE(status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        key = k;
        const auto [pages, pbl] = r.paged(buffer_bytes / 4096);
        buffer = pages;
        abi::cmdq_register_mr reg;
        reg.key = key;
        reg.lvl = 1;
        reg.log2_pg_size = 12;
        reg.log2_pbl_pg_size = 12;
        reg.access = abi::CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE | abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE |
                     abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_READ;
        reg.pbl = pbl;
        reg.va = buffer_va;
        reg.mr_size = buffer_bytes;
        REQUIRE(r.run(reg).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    }

    cq make_cq(std::uint32_t entries, std::uint64_t handle) {
        cq c;
        c.entries = entries;
        c.mem = r.m.alloc(32 * entries);
        abi::cmdq_create_cq cmd;
        cmd.cq_handle = handle;
        cmd.cq_size = entries;
        cmd.cnq_id = nq;
        cmd.dpi = user_dpi;
        cmd.pbl = c.mem.iova;
        const auto [status, id] = r.run(cmd);
        REQUIRE(status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        c.id = id;
        return c;
    }

    void make_qp() {
        auto c = r.rc_qp(scq.id, rcq.id);
        c.dpi = user_dpi;
        c.sq_size = sq_entries;
        c.rq_size = rq_entries;
        c.sq_sge = 6;
        c.rq_sge = rq_sge;   // 128-byte RQ WQEs: 8 KiB, two pages
        const auto [sq_pages, sq_pbl] = r.paged(3);   // 64 x (128 + 16) bytes
        const auto [rq_pages, rq_pbl] = r.paged(2);
        sq = sq_pages;
        rq = rq_pages;
        c.sq_pbl = sq_pbl;
        c.rq_lvl = 1;
        c.rq_pbl = rq_pbl;
        qp_handle = c.qp_handle = 0x9900000000000000ull | (std::uint64_t{mac[5]} << 8);
        const auto [status, id] = r.run(c);
        REQUIRE(status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        qp = id;
    }

    // RESET->INIT->RTR->RTS toward `peer` (RoCE v2 over IPv4, path MTU 1024).
    void connect(const bnxt_node& peer, std::uint32_t sq_psn = 0x100, std::uint32_t rq_psn = 0x200) {
        abi::cmdq_modify_qp i;
        i.qp_cid = qp;
        i.modify_mask = abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE | abi::CMDQ_MODIFY_QP_MODIFY_MASK_ACCESS |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_PKEY;
        i.new_state = abi::CMDQ_MODIFY_QP_NEW_STATE_INIT;
        i.access = abi::CMDQ_MODIFY_QP_ACCESS_LOCAL_WRITE | abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_WRITE |
                   abi::CMDQ_MODIFY_QP_ACCESS_REMOTE_READ;
        i.pkey = 0xffff;
        REQUIRE(r.run(i).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        abi::cmdq_modify_qp t;
        t.qp_cid = qp;
        t.modify_mask = abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE | abi::CMDQ_MODIFY_QP_MODIFY_MASK_DGID |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_SGID_INDEX | abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_MAC |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_HOP_LIMIT | abi::CMDQ_MODIFY_QP_MODIFY_MASK_PATH_MTU |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_DEST_QP_ID | abi::CMDQ_MODIFY_QP_MODIFY_MASK_RQ_PSN |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_DEST_RD_ATOMIC |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_MIN_RNR_TIMER;
        t.new_state = abi::CMDQ_MODIFY_QP_NEW_STATE_RTR;
        t.network_type = abi::CMDQ_MODIFY_QP_NETWORK_TYPE_ROCEV2_IPV4;
        t.dgid = peer.gid;
        t.sgid_index = 1;
        t.dest_mac = peer.mac;
        t.hop_limit = 64;
        t.path_mtu = abi::CMDQ_MODIFY_QP_PATH_MTU_MTU_1024;
        t.dest_qp_id = peer.qp;
        t.rq_psn = rq_psn;
        t.max_dest_rd_atomic = 34;
        t.min_rnr_timer = 1;
        REQUIRE(r.run(t).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        abi::cmdq_modify_qp s;
        s.qp_cid = qp;
        s.modify_mask = abi::CMDQ_MODIFY_QP_MODIFY_MASK_STATE | abi::CMDQ_MODIFY_QP_MODIFY_MASK_TIMEOUT |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_RETRY_CNT | abi::CMDQ_MODIFY_QP_MODIFY_MASK_RNR_RETRY |
                        abi::CMDQ_MODIFY_QP_MODIFY_MASK_SQ_PSN | abi::CMDQ_MODIFY_QP_MODIFY_MASK_MAX_RD_ATOMIC;
        s.new_state = abi::CMDQ_MODIFY_QP_NEW_STATE_RTS;
        s.timeout = 14;
        s.retry_cnt = 7;
        s.rnr_retry = 7;
        s.sq_psn = sq_psn;
        s.max_rd_atomic = 17;
        REQUIRE(r.run(s).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    }

    // ---- doorbells: one 64-bit store into the DPI page ----
    std::uint64_t* word(std::uint32_t dpi, unsigned w) {
        const std::uint64_t at = db_offset + std::uint64_t{dpi} * 4096 + 8u * w;
        REQUIRE(bar2.covers(at, 8));
        return reinterpret_cast<std::uint64_t*>(bar2.base + at);
    }
    // The privileged page (dpi 0) is trapped (sim/bnxt notices.cpp): its stores are region writes.
    void store(std::uint32_t dpi, unsigned w, std::uint64_t value) {
        if (dpi == 0) {
            std::array<std::byte, 8> b{};
            rig::abi::store_le<std::uint64_t>(b.data(), value);
            REQUIRE(r.m.f->region_write(drv::region::bar2, db_offset + 8u * w, b).has_value());
            return;
        }
        std::atomic_ref<std::uint64_t>(*word(dpi, w)).store(value, std::memory_order_release);
    }
    void ring(db_word w, std::uint8_t type, std::uint32_t xid, std::uint32_t count, std::uint32_t size) {
        store(user_dpi, static_cast<unsigned>(w), abi::doorbell(type, xid, count % size, ((count / size) & 1) != 0));
    }
    // Whether the model took the word (it reads 0 again).
    bool taken(std::uint32_t dpi, unsigned w, std::chrono::milliseconds timeout = 2000ms) {
        if (dpi == 0) {
            return true;   // trapped: the region write returned once the model took it
        }
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if (std::atomic_ref<std::uint64_t>(*word(dpi, w)).load(std::memory_order_acquire) == 0) {
                return true;
            }
            std::this_thread::sleep_for(50us);
        }
        return false;
    }

    // ---- work entries ----
    std::span<std::byte> sq_ring() { return {sq.host, std::size_t{sq_entries} * 128}; }
    std::span<std::byte> rq_ring() { return {rq.host, std::size_t{rq_entries} * 128}; }
    // Writes the entry at the producer (no doorbell).
    void put(const abi::entry& e) {
        abi::write(sq_ring(), (sq_prod % sq_entries) * abi::static_wqe_slots, abi::wqe_mode::static_128, e);
        ++sq_prod;
    }
    void post(const abi::entry& e) {
        put(e);
        ring_sq();
    }
    void ring_sq() { ring(db_word::sq, abi::DBC_DBC_TYPE_SQ, qp, sq_prod, sq_entries); }
    void receive(std::int64_t address, std::int64_t bytes, std::int64_t wr_id) {
        const abi::local l{address, bytes, key};
        abi::write(rq_ring(), (rq_prod % rq_entries) * abi::static_wqe_slots, abi::wqe_mode::static_128,
                   abi::receive{std::span(&l, 1), wr_id});
        ++rq_prod;
        ring(db_word::rq, abi::DBC_DBC_TYPE_RQ, qp, rq_prod, rq_entries);
    }
    abi::local local(std::int64_t offset, std::int64_t bytes) const {
        return {static_cast<std::int64_t>(buffer_va) + offset, bytes, key};
    }
    abi::remote remote(std::int64_t offset) const { return {static_cast<std::int64_t>(buffer_va) + offset, key}; }

    // ---- completions ----
    // The CQE at free-running index n when it is new (its toggle says the pass), else empty.
    std::optional<std::array<std::byte, 32>> cqe_at(const cq& c, std::uint32_t n) {
        const std::byte* e = c.mem.host + (n % c.entries) * 32;
        const bool phase = ((n / c.entries) & 1) == 0;
        const auto t = std::atomic_ref<const std::byte>(e[24]).load(std::memory_order_acquire);
        if (((std::to_integer<unsigned>(t) & 1) != 0) != phase) {
            return std::nullopt;
        }
        rig::abi::barrier::from_device();
        std::array<std::byte, 32> out;
        std::memcpy(out.data(), e, 32);
        return out;
    }
    // The next CQE of `c`, waited for; consumed (the CQ doorbell is the caller's).
    std::optional<std::array<std::byte, 32>> next(cq& c, std::chrono::milliseconds timeout = 2000ms) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if (auto e = cqe_at(c, c.consumer)) {
                ++c.consumer;
                return e;
            }
            std::this_thread::sleep_for(50us);
        }
        return std::nullopt;
    }
    void consumed(cq& c) {
        ring(&c == &scq ? db_word::send_cq : db_word::receive_cq, abi::DBC_DBC_TYPE_CQ, c.id, c.consumer, c.entries);
    }
    const sim::bnxt::datapath& dp() { return *r.m.fn.data_path(); }
    // Waits for `n` more passes of the data path (a doorbell written before is then seen).
    void passes(std::uint64_t n) {
        const std::uint64_t until = dp().passes() + n;
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (dp().passes() < until && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(100us);
        }
    }
    std::uint8_t queried_state() {
        const auto sb = r.m.alloc(4096);
        abi::cmdq_query_qp q;
        q.qp_cid = qp;
        q.resp_addr = sb.iova;
        REQUIRE(r.run(q).first == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        return abi::decode<abi::creq_query_qp_resp_sb>(std::span<const std::byte>(sb.host, 104))->state;
    }
};

inline abi::cq_req as_req(const std::array<std::byte, 32>& b) { return *abi::decode<abi::cq_req>(b); }
inline abi::cq_res_rc as_res(const std::array<std::byte, 32>& b) { return *abi::decode<abi::cq_res_rc>(b); }

// Two functions on one wire, their QPs connected to each other.
struct bnxt_pair {
    sim::roce::wire wire;
    bnxt_node a, b;
    explicit bnxt_pair(sim::bnxt::function_options o = {}, std::uint32_t a_send_cq_entries = 64)
        : a(wire, 1, o, a_send_cq_entries), b(wire, 2, o) {
        a.connect(b, 0x100, 0x300);
        b.connect(a, 0x300, 0x100);
    }
};

// The next CREQ entry of `n`: a QP_ERROR_NOTIFICATION.
inline abi::creq_qp_error_notification qp_error_of(bnxt_node& n) {
    const auto e = n.r.ch.next();
    REQUIRE(e.has_value());
    const auto ev = *abi::decode<abi::creq_qp_error_notification>(*e);
    CHECK(ev.type == abi::CREQ_BASE_TYPE_QP_EVENT);
    CHECK(ev.event == abi::CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION);
    CHECK(ev.xid == n.qp);
    return ev;
}

}  // namespace rig::test::bnxt
