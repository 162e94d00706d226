// The bnxt data path's doorbells and work entries: the BAR2 doorbell pages polled (the
// privileged page and every DPI page a QP or CQ names), each doorbell decoded by its payload
// (abi dbc_dbc), and new send and receive WQEs fetched from the queues' memory into the rc_qp
// (docs/bnxt-data-path.md "Doorbell pages", "Queues";
// qplib_res.h bnxt_qplib_ring_db, bnxt_qplib_ring_prod_db; datapath.hpp).
#include <emmintrin.h>

#include <algorithm>
#include <atomic>

// function_model.hpp (rcfw.hpp) before wqe.hpp, whose abi::op would be shadowed by rcfw.hpp's
#include "sim/bnxt/function_model.hpp"
#include "abi/bits.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/wqe.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::bnxt {

namespace {

namespace abi = ::rig::bnxt::abi;

constexpr std::uint64_t db_page_bytes = 4096;   // a DPI page (qplib_res.c bnxt_qplib_alloc_dpi)
constexpr std::uint64_t sq_wqe_bytes = abi::static_wqe_slots * abi::wqe_slot_size;   // static mode
constexpr std::uint64_t rq_header_bytes = abi::rq_wqe_hdr::layout_size;
constexpr std::uint64_t sge_bytes = abi::sq_sge::layout_size;

}  // namespace

// A block of a doorbell page with nothing written since its last look: its bytes ORed 16 at a
// time into four accumulators (SSE2, x86-64's baseline: two loads a cycle, no branch), before
// any word of it is looked at one by one (below). A page is 4 KiB: a branch per word made the
// scan most of an idle bnxt pass (bench-model's latency), and every word must be watched,
// whatever offset a driver rings at. The loads are plain: a word found set is taken atomically.
namespace {
constexpr std::size_t scan_block = 512;
constexpr std::size_t words_per_block = scan_block / sizeof(std::uint64_t);
bool block_clear(const std::byte* block) noexcept {
    const auto* v = reinterpret_cast<const __m128i*>(block);
    __m128i a = _mm_setzero_si128(), b = a, c = a, d = a;
    for (std::size_t i = 0; i < scan_block / sizeof(__m128i); i += 4) {
        a = _mm_or_si128(a, _mm_load_si128(v + i));
        b = _mm_or_si128(b, _mm_load_si128(v + i + 1));
        c = _mm_or_si128(c, _mm_load_si128(v + i + 2));
        d = _mm_or_si128(d, _mm_load_si128(v + i + 3));
    }
    const __m128i all = _mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d));
    return _mm_movemask_epi8(_mm_cmpeq_epi8(all, _mm_setzero_si128())) == 0xffff;
}
}  // namespace

// Every 8-byte word of the polled pages: a plain load first (most words were not written since
// the last look, and a locked exchange on each of them costs more than the rest of an idle
// pass), then the exchange with 0 that takes a written word (docs/bnxt-data-path.md: a RoCE
// doorbell always has valid set, so it is never 0).
bool datapath::poll_doorbells() {
    std::byte* bar = _fn._bar2.data();
    const std::uint64_t bar_bytes = _fn._bar2.size();
    const std::uint64_t db_offset = std::uint64_t{_fn._fw.options().legacy_l2_db_size_kb} << 10;
    bool seen = false;
    for (const std::uint32_t dpi : _pages) {
        if (dpi == 0) {
            continue;   // the privileged page is trapped: function_model hands its stores over
        }
        const std::uint64_t base = db_offset + std::uint64_t{dpi} * db_page_bytes;
        if (base + db_page_bytes > bar_bytes) {
            continue;   // CREATE_QP/CREATE_CQ refuse a dpi past max_dpi: never so
        }
        auto* words = reinterpret_cast<std::uint64_t*>(bar + base);
        for (std::size_t block = 0; block < db_page_bytes / scan_block; ++block) {
            std::uint64_t* first = words + block * words_per_block;
            if (block_clear(reinterpret_cast<const std::byte*>(first))) {
                continue;
            }
            for (std::uint64_t* w = first; w != first + words_per_block; ++w) {
                std::atomic_ref<std::uint64_t> cell(*w);
                if (cell.load(std::memory_order_relaxed) == 0) {
                    continue;
                }
                const std::uint64_t raw = cell.exchange(0, std::memory_order_acquire);
                if (raw != 0) {
                    // the driver's one 64-bit little-endian store (bnxt_qplib_write_db)
                    doorbell(dpi, rig::abi::load_le<std::uint64_t>(reinterpret_cast<const std::byte*>(&raw)));
                    seen = true;
                }
            }
        }
    }
    return seen;
}

// A doorbell of the trapped privileged page (function_model::privileged_write_locked), lock held:
// the objects followed first when a command ran since the last pass (a queue made by the command
// just answered is rung at once).
void datapath::take_doorbell(std::uint32_t dpi, std::uint64_t value) {
    if (_memory && (_fn._resets != _seen_resets || _fn._fw.commands_executed() != _seen_commands ||
                    _fn._fw.roce_changes() != _seen_roce)) {
        follow_objects();
    }
    doorbell(dpi, value);
}

void datapath::ignore() noexcept {
    ++_fn._ignored;   // function_model::doorbells_ignored (the lock is held)
}

// One doorbell taken from page `dpi`, decoded by its payload (type, xid), as a card decodes it.
void datapath::doorbell(std::uint32_t dpi, std::uint64_t value) {
    const abi::dbc_dbc f = abi::doorbell_fields(value);
    if (f.path != abi::DBC_DBC_PATH_ROCE || f.valid == 0) {
        return ignore();
    }
    const bool epoch = f.epoch != 0;
    switch (f.type) {
    case abi::DBC_DBC_TYPE_SQ:
    case abi::DBC_DBC_TYPE_RQ: {
        const auto it = _qps.find(f.xid);
        if (it == _qps.end() || it->second.q->dpi != dpi) {
            return ignore();   // a card drops a doorbell for a queue of another DPI
        }
        return producer(it->second, f.type == abi::DBC_DBC_TYPE_SQ, f.index, epoch);
    }
    case abi::DBC_DBC_TYPE_CQ:
    case abi::DBC_DBC_TYPE_CQ_ARMSE:
    case abi::DBC_DBC_TYPE_CQ_ARMALL:
    case abi::DBC_DBC_TYPE_CQ_ARMENA: {
        const auto it = _cqs.find(f.xid);
        // ARMENA: the privileged page for every CQ (qplib_fp.c bnxt_qplib_armen_db)
        const bool page_ok = it != _cqs.end() && (it->second.cq->dpi == dpi ||
                                                  (f.type == abi::DBC_DBC_TYPE_CQ_ARMENA && dpi == 0));
        if (!page_ok) {
            return ignore();
        }
        if (f.type == abi::DBC_DBC_TYPE_CQ_ARMENA) {
            return;   // enables arming: taken, nothing to do
        }
        // an arm carries the consumer too (bnxt_qplib_ring_db: index = cq cons); a stale one is
        // no news, only a CQ doorbell must be a consumer this CQ can have
        if (!consumer(it->second, f.index, epoch) && f.type == abi::DBC_DBC_TYPE_CQ) {
            return ignore();
        }
        if (f.type != abi::DBC_DBC_TYPE_CQ) {
            arm_cq(it->second);
        }
        return;
    }
    case abi::DBC_DBC_TYPE_NQ_ARM:
    case abi::DBC_DBC_TYPE_NQ: {
        // every NQ's (the CREQ's too) on the privileged page: the firmware's (interrupts.cpp)
        std::optional<std::uint16_t> now;
        if (dpi != 0 || !_fn._fw.nq_doorbell(value, now)) {
            return ignore();
        }
        if (now) {
            raise(*now);
        }
        return;
    }
    default:
        return ignore();   // SRQs, NQ masks, push and cut-off doorbells: not modelled
    }
}

// An SQ or RQ producer: `index` (mod the ring) and `epoch` (flipped per wrap) name the position
// modulo twice the ring, taken as the one at most a ring ahead of what the model took
// (bnxt_qplib_hwq_incr_prod; docs/bnxt-data-path.md "Queues").
void datapath::producer(qp_slot& s, bool send, std::uint32_t index, bool epoch) {
    const std::uint32_t size = send ? s.q->sq_entries : s.q->rq_entries;
    std::uint32_t& taken = send ? s.sq_taken : s.rq_taken;
    const std::uint32_t pos = index + (epoch ? size : 0);
    if (index >= size || positions_between(taken, pos, size) > size) {
        return ignore();   // no producer of this ring
    }
    (send ? s.sq_produced : s.rq_produced) = pos;
    want_fetch(s);
}

// The driver's consumer of a CQ, as its doorbells give it: it only moves forward, up to the
// model's producer. false: no consumer this CQ can have now.
bool datapath::consumer(cq_slot& c, std::uint32_t index, bool epoch) noexcept {
    const std::uint32_t size = c.cq->entries;
    const std::uint32_t pos = index + (epoch ? size : 0);
    if (index >= size) {
        return false;
    }
    const std::uint32_t used = positions_between(c.consumer, c.producer, size);
    const std::uint32_t advance = positions_between(c.consumer, pos, size);
    if (advance > used) {
        return false;
    }
    c.consumer = pos;
    return true;
}

// CQ_ARMALL / CQ_ARMSE: the CQ's next CQE notifies. A CQ armed with CQEs past the consumer its
// arm carries notifies now (the model's judgement, docs/hardware.md: else a CQE written between
// the driver's last poll and its arm would wait for the next one).
void datapath::arm_cq(cq_slot& c) {
    c.armed = true;
    if (c.producer != c.consumer) {
        notify(c);
    }
}

// ---- work entries -----------------------------------------------------------------------------

bool datapath::read_queue(const queue_memory& m, std::uint64_t offset, std::span<std::byte> out) const noexcept {
    std::size_t done = 0;
    while (done < out.size()) {
        const std::uint64_t at = offset + done;
        const std::uint64_t iova = m.address(at);
        if (iova == 0) {
            return false;
        }
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(out.size() - done, m.page_bytes - m.in_page(at)));
        if (!_dma->read(iova, out.subspan(done, n))) {
            return false;
        }
        done += n;
    }
    return true;
}

// The send WQEs from the model's position to the driver's last producer, while the rc_qp has
// room: static mode, WQE k at (k mod sq_size) x 128 of the SQ's memory.
bool datapath::fetch_sends(qp_slot& s, const roce_qp& q) {
    const bool every = !_fn._options.aggregate_requester_cqes;
    std::uint32_t room = s.rc->send_room();
    std::uint64_t fetched = 0;
    while (s.sq_taken != s.sq_produced && room > 0) {
        const std::uint32_t slot = slot_of(s.sq_taken, q.sq_entries);
        if (read_queue(q.sq, std::uint64_t{slot} * sq_wqe_bytes, _wqe)) {
            parse_send_wqe(_wqe, slot, every, _send);
        } else {
            log().warn("bnxt data path: QP {} send WQE {} is outside the DMA mappings", s.id, slot);
            malformed_send(slot, _send);   // an error completion, as a card's DMA fault
        }
        if (!s.rc->post_send(_send.request)) {
            break;
        }
        --room;
        s.sq_taken = position_after(s.sq_taken, q.sq_entries);
        ++fetched;
    }
    // this thread is the counter's only writer: a plain add
    _wqes.store(_wqes.load(std::memory_order_relaxed) + fetched, std::memory_order_relaxed);
    return fetched != 0;
}

// ---- retransmissions --------------------------------------------------------------------------

roce::completion_status datapath::psn_search::locate(const roce::retransmission& r) noexcept {
    return dp->locate(*slot, r);
}

// A go-back-N from PSN r.from_psn in WQE k = r.index: the chip finds the WQE by the driver's
// PSN search entry k (P5 static mode: sq_psn_search_ext k at sq_size x 128 + k x 16 of the SQ's
// memory, qplib_fp.c bnxt_qplib_init_psn_ptr / bnxt_qplib_fill_psn_search). Model's judgement
// (docs/bnxt-data-path.md "Queues"): the entry locates it when start_psn <= from_psn < next_psn
// (24-bit, wrap-aware), start_psn and next_psn are the first PSN and one past the last the WQE
// was sent with, and opcode is the WQE's wqe_type; else, or when the entry cannot be read, the
// WQE fails LOCAL_QP_OPERATION_ERR and the QP with it (QP_ERROR_NOTIFICATION RETX_SETUP_ERROR).
// start_slot_idx and flags are not looked at: in static mode entry k belongs to WQE k.
roce::completion_status datapath::locate(qp_slot& s, const roce::retransmission& r) noexcept {
    using rig::roce::psn_add;
    using rig::roce::psn_diff;
    const roce_qp& q = *s.q;
    constexpr std::size_t entry_bytes = abi::sq_psn_search_ext::layout_size;
    std::array<std::byte, entry_bytes> raw{};
    const std::uint64_t at = std::uint64_t{q.sq_entries} * sq_wqe_bytes + std::uint64_t{r.index % q.sq_entries} * entry_bytes;
    bool found = read_queue(q.sq, at, raw);
    if (found) {
        const auto e = *abi::decode<abi::sq_psn_search_ext>(std::span<const std::byte>(raw));
        const std::uint8_t type = r.op == roce::work_op::write  ? (r.with_immediate ? abi::SQ_BASE_WQE_TYPE_WRITE_W_IMMEAD
                                                                                     : abi::SQ_BASE_WQE_TYPE_WRITE_WQE)
                                  : r.op == roce::work_op::read ? abi::SQ_BASE_WQE_TYPE_READ_WQE
                                  : r.with_immediate            ? abi::SQ_BASE_WQE_TYPE_SEND_W_IMMEAD
                                                                : abi::SQ_BASE_WQE_TYPE_SEND;
        found = e.start_psn == r.first_psn && e.next_psn == psn_add(r.first_psn, r.packets) && e.opcode == type &&
                psn_diff(r.from_psn, e.start_psn) >= 0 && psn_diff(r.from_psn, e.next_psn) < 0;
    }
    // this thread is the counters' only writer: plain adds
    if (found) {
        _located.store(_located.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        return roce::completion_status::success;
    }
    _refused.store(_refused.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    s.retransmit_lost = true;
    return roce::completion_status::local_qp_operation;
}

// The receive WQEs likewise: WQE k at (k mod rq_size) x (32 + 16 x rq_sge) of the RQ's memory.
// One the card cannot take (malformed, or outside the mappings) is posted with an SGE whose key
// names nothing: the message landing there fails, as on a card.
bool datapath::fetch_receives(qp_slot& s, const roce_qp& q) {
    const std::size_t stride = rq_header_bytes + sge_bytes * q.rq_sge;
    const auto wqe = std::span(_wqe).first(std::min(stride, _wqe.size()));
    bool did = false;
    while (s.rq_taken != s.rq_produced && s.rc->receive_room() > 0) {
        const std::uint32_t slot = slot_of(s.rq_taken, q.rq_entries);
        roce::receive_request r;
        std::uint32_t wr_id = 0;
        if (!read_queue(q.rq, std::uint64_t{slot} * stride, wqe) ||
            !parse_receive_wqe(wqe, q.rq_sge, slot, r, wr_id)) {
            r.index = slot;
            r.sge_count = 1;
            r.sg[0] = roce::sge{0, 0, 0};
        }
        if (!s.rc->post_receive(r)) {
            break;
        }
        s.wr_ids[slot] = wr_id;
        s.rq_taken = position_after(s.rq_taken, q.rq_entries);
        did = true;
    }
    return did;
}

}  // namespace rig::sim::bnxt
