#pragma once
// A driver's RoCE command channel on the bnxt model, raw as bnxt_qplib drives it (qplib_rcfw.c
// bnxt_qplib_start_rcfw, __send_message, bnxt_qplib_service_creq): a CREQ NQ made by HWRM
// RING_ALLOC, a CMDQ at level 1, cmdq_init written to the BAR0 mailbox; commands copied in with
// cookies, the producer and trigger written, completions read by the valid bit's pass; and
// roce_function: a function with the channel initialized and a GID, with the objects' commands.
#include <algorithm>
#include <poll.h>
#include <unistd.h>

#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/rcfw_cmds.hpp"
#include "context_setup.hpp"

namespace rig::test::bnxt {

struct roce_channel {
    served_bnxt& m;
    std::uint32_t slots;
    served_bnxt::block cmdq{}, creq{};
    std::uint32_t creq_len;
    std::uint16_t creq_id = 0;
    std::uint32_t prod = 0;      // CMDQ producer (slots)
    std::uint32_t cons = 0;      // CREQ consumer
    bool first = true;
    std::uint16_t cookie = 0;
    std::vector<int> irqs;

    // A CREQ NQ of `creq_entries` (depth 0, MSI-X vector 1) and a CMDQ of `cmdq_slots` at
    // level 1 (one PTE page), cmdq_init written.
    roce_channel(served_bnxt& s, std::uint32_t creq_entries = 256, std::uint32_t cmdq_slots = 1024)
        : m(s), slots(cmdq_slots), creq_len(creq_entries) {
        auto v = m.f->enable_irqs(drv::irq_kind::msix, 4);
        REQUIRE(v.has_value());
        irqs = *v;
        abi::hwrm_ring_alloc_input r;
        r.ring_type = abi::RING_ALLOC_REQ_RING_TYPE_NQ;
        r.length = creq_entries;
        r.page_size = 4;
        r.logical_id = 1;
        r.int_mode = abi::RING_ALLOC_REQ_INT_MODE_MSIX;
        creq = m.alloc(std::size_t{creq_entries} * 16);
        r.page_tbl_addr = creq.iova;
        const response a = m.send(r);
        REQUIRE(a.error_code() == 0);
        creq_id = a.as<abi::hwrm_ring_alloc_output>().ring_id;
        arm();   // bnxt_qplib_rcfw_start_irq: the CREQ armed before the channel starts
        cmdq = m.alloc(std::size_t{cmdq_slots} * 16);
        const auto pte = m.alloc(4096);
        for (std::size_t p = 0; p < (std::size_t{cmdq_slots} * 16 + 4095) / 4096; ++p) {
            rig::abi::store_le<std::uint64_t>(pte.host + 8 * p, (cmdq.iova + 4096 * p) | 1);
        }
        abi::cmdq_init init;
        init.cmdq_pbl = pte.iova;
        init.cmdq_lvl = 1;
        init.cmdq_size = static_cast<std::uint16_t>(cmdq_slots);
        init.creq_ring_id = creq_id;
        const auto b = abi::to_bytes(init);
        for (std::size_t off = 0; off < 16; off += 4) {
            m.write32(abi::RCFW_COMM_BASE_OFFSET + off, rig::abi::load_le<std::uint32_t>(b.data() + off));
        }
    }

    // Copies a command into the CMDQ (cookie set) without ringing.
    template <class Cmd>
    std::uint16_t queue(Cmd c) {
        c.cookie = ++cookie;
        const auto b = abi::to_bytes(c);
        // whole 16-byte slots, the last one zero-padded (a command need not fill it: reading
        // 16 bytes there ran past `b`, UBSan found)
        for (std::size_t i = 0; i < b.size(); i += 16) {
            std::byte* slot = cmdq.host + (prod % slots) * 16;
            const std::size_t n = std::min<std::size_t>(16, b.size() - i);
            std::memcpy(slot, b.data() + i, n);
            std::memset(slot + n, 0, 16 - n);
            ++prod;
        }
        return c.cookie;
    }
    void ring() {
        std::uint32_t p = prod % slots;
        if (first) {
            p |= abi::FIRMWARE_FIRST_FLAG;
            first = false;
        }
        m.write32(abi::RCFW_COMM_BASE_OFFSET + abi::RCFW_PF_VF_COMM_PROD_OFFSET, p);
        m.write32(abi::RCFW_COMM_BASE_OFFSET + abi::RCFW_COMM_TRIG_OFFSET, abi::RCFW_CMDQ_TRIG_VAL);
    }
    // The next CREQ entry, once its valid bit says this pass (CREQ_CMP_VALID); empty on timeout.
    std::optional<std::array<std::byte, 16>> next(std::chrono::milliseconds timeout = 2000ms) {
        const std::byte* e = creq.host + (cons % creq_len) * 16;
        const std::uint8_t want = ((cons / creq_len) & 1) == 0 ? 1 : 0;
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if ((std::to_integer<std::uint8_t>(reinterpret_cast<const volatile std::byte*>(e)[8]) & 1) == want) {
                rig::abi::barrier::from_device();   // the rest after the valid byte
                std::array<std::byte, 16> out;
                std::memcpy(out.data(), e, 16);
                ++cons;
                arm();   // bnxt_qplib_service_creq: NQ_ARM at the new consumer after a service
                return out;
            }
            std::this_thread::sleep_for(50us);
        }
        return std::nullopt;
    }
    // NQ_ARM on the CREQ at the consumer (bnxt_qplib_ring_nq_db arm): the privileged page's
    // first word in BAR2 (db_offset 0x10000); the CREQ's next entry raises its vector.
    void arm() {
        std::array<std::byte, 8> b{};
        rig::abi::store_le<std::uint64_t>(
            b.data(), abi::doorbell(abi::DBC_DBC_TYPE_NQ_ARM, creq_id, cons % creq_len, ((cons / creq_len) & 1) != 0));
        REQUIRE(m.f->region_write(drv::region::bar2, abi::DB_PF_OFFSET_P5, b).has_value());
    }
    template <class Cmd>
    abi::creq_qp_event run(Cmd c, std::array<std::byte, 16>* raw = nullptr) {
        const std::uint16_t k = queue(c);
        ring();
        const auto e = next();
        REQUIRE(e.has_value());
        if (raw != nullptr) {
            *raw = *e;
        }
        const auto ev = *abi::decode<abi::creq_qp_event>(*e);
        CHECK(ev.cookie == k);
        CHECK(ev.type == abi::CREQ_BASE_TYPE_QP_EVENT);
        return ev;
    }
    std::uint64_t interrupts(unsigned vector) {
        pollfd p{irqs.at(vector), POLLIN, 0};
        if (::poll(&p, 1, 200) != 1) {
            return 0;
        }
        std::uint64_t n = 0;
        REQUIRE(::read(irqs[vector], &n, sizeof n) == sizeof n);
        return n;
    }
};

inline void roce_backing_store(served_bnxt& m, context_memory& cm) {
    REQUIRE(m.send(roce_request(cm, qcaps(m))).error_code() == 0);
    REQUIRE(m.fn.roce_backing_store());
}

inline std::uint32_t roce_stat_ctx(served_bnxt& m) {
    abi::hwrm_stat_ctx_alloc_input s;
    s.stats_dma_addr = m.alloc(4096).iova;
    s.update_period_ms = 1000;
    s.stat_ctx_flags = abi::STAT_CTX_ALLOC_REQ_STAT_CTX_FLAGS_ROCE;
    const response r = m.send(s);
    REQUIRE(r.error_code() == 0);
    return r.as<abi::hwrm_stat_ctx_alloc_output>().stat_ctx_id;
}


// ---- a function with its RoCE channel initialized, and the objects' commands ------------------

inline constexpr std::array<std::uint8_t, 6> port_mac{0x02, 0x52, 0x49, 0x47, 0x50, 0x00};
inline constexpr std::array<std::uint8_t, 16> peer_gid{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2};

// A function with its RoCE channel up: backing store, stat context, INITIALIZE_FW, one GID.
struct roce_function {
    served_bnxt m;
    context_memory cm{m};
    roce_channel ch{(roce_backing_store(m, cm), m)};
    explicit roce_function(rig::sim::bnxt::function_options o = {}) : m(o) {
        abi::cmdq_initialize_fw init;
        init.stat_ctx_id = roce_stat_ctx(m);
        REQUIRE(ch.run(init).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
        abi::cmdq_add_gid g;
        g.gid = abi::add_gid_gid({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1});
        g.src_mac = abi::add_gid_src_mac(port_mac);
        REQUIRE(ch.run(g).status == abi::CREQ_QP_EVENT_STATUS_SUCCESS);
    }
    // Runs `c`; its status, and its completion's xid when it succeeded.
    template <class Cmd>
    std::pair<std::uint8_t, std::uint32_t> run(const Cmd& c) {
        std::array<std::byte, 16> raw{};
        const auto e = ch.run(c, &raw);
        return {e.status, rig::abi::load_le<std::uint32_t>(raw.data() + 4)};
    }
    // `pages` 4 KiB pages and a level-1 table of valid PTEs over them.
    std::pair<served_bnxt::block, std::uint64_t> paged(std::size_t pages) {
        const auto data = m.alloc(4096 * pages);
        const auto pte = m.alloc(4096);
        for (std::size_t p = 0; p < pages; ++p) {
            rig::abi::store_le<std::uint64_t>(pte.host + 8 * p, (data.iova + 4096 * p) | 1);
        }
        return {data, pte.iova};
    }
    abi::cmdq_create_cq cq(std::uint32_t entries, std::uint64_t handle) {
        abi::cmdq_create_cq c;
        c.cq_handle = handle;
        c.cq_size = entries;
        c.cnq_id = ch.creq_id;   // an NQ ring of this function
        c.dpi = 1;
        c.pbl = m.alloc(32 * entries).iova;   // one contiguous page: level 0
        return c;
    }
    abi::cmdq_create_qp rc_qp(std::uint32_t scq, std::uint32_t rcq) {
        abi::cmdq_create_qp c;
        c.qp_handle = 0xabcdef0012345678;
        c.type = abi::CMDQ_CREATE_QP_TYPE_RC;
        c.sq_size = 64;   // 64 x (128 + 16 PSN) = 9216 bytes: three pages at level 1
        c.sq_sge = 1;
        c.rq_size = 64;   // 64 x (32 + 16) = 3072 bytes: one page at level 0
        c.rq_sge = 1;
        c.scq_cid = scq;
        c.rcq_cid = rcq;
        c.pd_id = 1;
        c.dpi = 1;
        c.sq_lvl = 1;
        c.sq_pbl = paged(3).second;
        c.rq_pbl = m.alloc(4096).iova;
        c.irrq_addr = m.alloc(4096).iova;
        c.orrq_addr = m.alloc(4096).iova;
        return c;
    }
    // The context record the model wrote for entry `index` of `type`: its first 16 bytes.
    std::array<std::byte, 16> record(const char* type, std::uint32_t index) {
        std::array<std::byte, 16> out{};
        m.fn.with_firmware([&](const rig::sim::bnxt::firmware& f) {
            const auto& a = f.context().at(type);
            const std::uint64_t at = std::uint64_t{index} * a.entry_size;
            std::memcpy(out.data(), cm.host(a.pages.at(at / a.page_bytes) + at % a.page_bytes), 16);
        });
        return out;
    }
};

}  // namespace rig::test::bnxt
