// The data path's doorbells and work entries: the UAR pages polled (BlueFlame registers, CQ arm
// doorbells), the QP doorbell records read, and new send and receive WQEs fetched from the QP
// buffer into the rc_qp (rdma-core providers/mlx5/qp.c post_send_db, mlx5_post_recv; cq.c
// mlx5_arm_cq; datapath.hpp).
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

// The ifc headers before doorbell.hpp, whose rig::mlx5::abi would hide rig::abi from them.
#include "abi/mlx5/ifc/qp.hpp"
#include "sim/mlx5/function_model.hpp"
#include "abi/bits.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "sim/mlx5/datapath.hpp"
#include "sim/vfio_user/dma_space.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::mlx5 {

namespace {

namespace db = rig::mlx5::abi;
using rig::abi::load_be;

constexpr std::size_t bf_half = db::bfreg_half(log_bf_reg_size);   // function_model.hpp

// A doorbell register's value, taken: 0 when nothing was written since the last take. A plain
// load first: most registers were not written since the last look, and a locked exchange on
// each of them, every pass, costs more than the rest of an idle pass.
std::uint64_t take64(std::byte* bar, std::uint64_t at) noexcept {
    auto* cell = reinterpret_cast<std::uint64_t*>(bar + at);
    std::atomic_ref<std::uint64_t> doorbell(*cell);
    if (doorbell.load(std::memory_order_relaxed) == 0) {
        return 0;
    }
    return doorbell.exchange(0);
}

}  // namespace

// ---- doorbells and work entries ---------------------------------------------------------------

bool datapath::uar_in_bar(std::uint32_t page) const noexcept {
    const std::uint64_t at = std::uint64_t{page} * uar_page_bytes;
    return at >= _fn._layout.uar_begin && at < _fn._layout.uar_end;
}

// The send counters' host addresses, found again when a DMA window went since (or the QPs changed:
// index_objects). A QP whose record is not readable by address is looked at on every ring.
void datapath::find_send_counters() {
    for (auto& page : _qp_pages) {
        for (auto& w : page.watches) {
            const std::byte* record = _dma->readable(w.slot->q->dbr_addr, 8);
            w.counter = record != nullptr ? record + db::qp_dbr::send_counter : nullptr;
            w.seen = ~0u;
        }
    }
    _watch_removals = _dma->removals();
    _watches_unresolved = false;
}

// The counters of the watches added since (follow.cpp list): those alone are looked up, where
// find_send_counters looks up every QP's.
void datapath::resolve_new_watches() {
    for (auto& page : _qp_pages) {
        for (auto& w : page.watches) {
            if (w.counter == nullptr) {
                const std::byte* record = _dma->readable(w.slot->q->dbr_addr, 8);
                w.counter = record != nullptr ? record + db::qp_dbr::send_counter : nullptr;
                w.seen = ~0u;
            }
        }
    }
    _watches_unresolved = false;
}

// BlueFlame registers: a write on a page has every QP of that page whose send counter moved
// since the last look read it (polling sees only the last write to a register, which may be
// another QP's). A counter that did not move posted nothing: its QP is not touched.
// A BlueFlame copy (the whole WQE written to the half, rdma-core qp.c mlx5_bf_copy) starts with
// the same 8 ctrl bytes as an 8-byte doorbell, so it is seen the same way; the WQE is still
// fetched from the SQ in host memory, where the driver wrote it before copying it (rdma-core
// builds it in the SQ buffer and mlx5_bf_copy copies from there): the same bytes either way.
// The copy's other bytes are left in the page.
bool datapath::poll_uar_pages() {
    bool seen = false;
    std::byte* bar = _fn._bar0.data();
    if (_watch_removals != _dma->removals()) {
        find_send_counters();
    } else if (_watches_unresolved) {
        resolve_new_watches();
    }
    for (auto& page : _qp_pages) {
        const std::uint64_t base = std::uint64_t{page.page} * uar_page_bytes;
        std::array<std::uint32_t, db::uar::bfregs_per_uar * 2> named{};   // the rung registers' QPNs
        std::size_t rung = 0;
        for (std::size_t k = 0; k < db::uar::bfregs_per_uar; ++k) {
            for (std::size_t h = 0; h < 2; ++h) {
                const std::uint64_t raw = take64(bar, base + db::bfreg_offset(k, log_bf_reg_size) + h * bf_half);
                if (raw != 0) {
                    named[rung++] = load_be<std::uint32_t>(reinterpret_cast<const std::byte*>(&raw) + 4) >> 8;
                }
            }
        }
        if (rung == 0) {
            continue;
        }
        seen = true;
        prefetch_named(page, std::span(named).first(rung));
        constexpr std::size_t ahead = 8;   // records asked for ahead of their read: their misses overlap
        const std::size_t n = page.watches.size();
        for (std::size_t i = 0; i < n; ++i) {
            if (i + ahead < n && page.watches[i + ahead].counter != nullptr) {
                __builtin_prefetch(page.watches[i + ahead].counter);
            }
            send_watch& w = page.watches[i];
            std::uint32_t counter = ~0u;
            if (w.counter != nullptr) {
                std::memcpy(&counter, w.counter, sizeof counter);
                if (counter == w.seen) {
                    continue;
                }
                w.seen = counter;
            }
            look_at_sends(*w.slot);
        }
    }
    return seen;
}

// The QPs a page's doorbells named (the ctrl segment's qpn_ds): their record and the entry
// at their send queue's head asked for together, so that the entry's miss overlaps the
// record's instead of following it (a cross-core line is ~300 ns on a VM: bench-model's
// latency). A hint only: the record is still read before the entry, and the entry fetched as
// before; a QP named by a stale or foreign doorbell costs a prefetch. Matched by the watch's
// own QPN: following every watch to its slot cost a miss per QP of the page (bench-scale: at
// 1024 QPs this function was 2.3 % of the samples).
void datapath::prefetch_named(const qp_page& page, std::span<const std::uint32_t> named) noexcept {
    for (const send_watch& w : page.watches) {
        if (std::ranges::find(named, w.qpn) == named.end()) {
            continue;
        }
        const qp_slot& s = *w.slot;
        if (s.q == nullptr) {
            continue;
        }
        if (w.counter != nullptr) {
            __builtin_prefetch(w.counter);
        }
        const qp_object& q = *s.q;
        const std::uint64_t head = q.rq_bytes() + std::uint64_t{s.sq_taken & ((1u << q.log_sq_size) - 1)} * 64;
        if (const auto place = place_in_buffer(q.pas, q.log_page_size, q.page_offset, head)) {
            if (const std::byte* entry = _dma->readable(place->iova, 64)) {
                __builtin_prefetch(entry);
            }
        }
    }
}

// CQ arm doorbells (UAR + 0x20): be32(arm word) then be32(cqn), one 64-bit store. A card
// traps each store; polling sees only the last one of a pass, so two CQs of one UAR armed
// between two passes would keep one arm. The driver writes the same arm word into the CQ's
// doorbell record (DW1, MLX5_CQ_ARM_DB: sn << 28 | cmd | ci) before the store (rdma-core
// mlx5_arm_cq), so a store on a page makes every CQ of that page compare its record's arm
// word with the last one taken: a new word is a new arm. The register's own CQ is armed
// even with an unchanged word (armed again after an event with the same sequence number).
bool datapath::poll_cq_doorbells() {
    bool seen = false;
    std::byte* bar = _fn._bar0.data();
    for (const auto& users : _cq_pages) {
        const std::uint64_t raw = take64(bar, std::uint64_t{users.page} * uar_page_bytes + db::uar::cq_doorbell);
        if (raw == 0) {
            continue;
        }
        seen = true;
        const std::uint64_t v = load_be<std::uint64_t>(reinterpret_cast<const std::byte*>(&raw));
        const auto named = static_cast<std::uint32_t>(v & 0xffffff);
        auto it = _cqs.find(named);
        if (it == _cqs.end() || it->second.cq->uar_page != users.page) {
            log().warn("mlx5 data path: CQ arm doorbell {:#x} in UAR {} names no CQ of that UAR", v, users.page);
        } else {
            arm(it->second, static_cast<std::uint32_t>(v >> 32), true);
        }
        for (cq_slot* slot : users.slots) {
            std::array<std::byte, 4> word{};
            if (_dma->read(slot->cq->dbr_addr + db::cq_dbr::arm, word)) {
                arm(*slot, load_be<std::uint32_t>(word.data()), false);
            }
        }
    }
    return seen;
}

// An arm word (sn << 28 | cmd | ci) for CQ `cqn`, from its UAR register (`stored`) or its
// doorbell record. A record's word that is the one last taken is no new arm.
void datapath::arm(cq_slot& slot, std::uint32_t word, bool stored) {
    if (!stored && word == slot.arm_word) {
        return;
    }
    slot.arm_word = word;
    slot.armed = true;
    if ((slot.cq->producer_index & 0xffffff) != (word & 0xffffff)) {
        signal(slot);  // armed with CQEs past the consumer index: the event now
    }
}

bool datapath::read_queue(const qp_object& q, std::uint64_t offset, std::span<std::byte> out) const noexcept {
    std::size_t done = 0;
    while (done < out.size()) {
        const auto place = place_in_buffer(q.pas, q.log_page_size, q.page_offset, offset + done);
        if (!place) {
            return false;
        }
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(out.size() - done, place->left_in_page));
        if (!_dma->read(place->iova, out.subspan(done, n))) {
            return false;
        }
        done += n;
    }
    return true;
}

// Reads the send blocks from free-running index `first` on into _staged with one DMA access:
// up to `pending` blocks, staged_blocks at most, stopping at the ring's end and at the end of
// the page `first` lies in (the next block may lie in another page of the list). An access per
// entry cost as much as the entry's parsing; the driver wrote the run just before its doorbell,
// so one long copy also lets the core fetch the run's lines from the driver's cache together.
// 0: nothing staged (outside the pages or the DMA mappings): the entry is then gathered block by
// block, which fails only on the blocks the entry itself takes, as before there was a run.
std::uint32_t datapath::stage_sends(const qp_object& q, std::uint32_t first, std::uint32_t pending) noexcept {
    const std::uint32_t blocks = 1u << q.log_sq_size;
    const std::uint32_t slot = first & (blocks - 1);
    const auto place = place_in_buffer(q.pas, q.log_page_size, q.page_offset, q.rq_bytes() + std::uint64_t{slot} * 64);
    if (!place) {
        return 0;
    }
    const auto n = static_cast<std::uint32_t>(std::min<std::uint64_t>(
        {pending, blocks - slot, staged_blocks, place->left_in_page / 64}));
    if (n == 0 || !_dma->read(place->iova, std::span(_staged).first(std::size_t{n} * 64))) {
        return 0;
    }
    return n;
}

// The entry at s.sq_taken into _wqe, block by block in ring order (an entry may wrap past the
// ring's end, or cross a page): only the blocks its ds names, `most` at most. false: a block
// lies outside the QP's pages or the DMA mappings (the QP then goes to error).
bool datapath::gather_send(qp_slot& s, const qp_object& q, std::uint32_t most) {
    const std::uint32_t blocks = 1u << q.log_sq_size;
    const std::uint64_t sq_base = q.rq_bytes();
    for (std::uint32_t b = 0; b < most; ++b) {
        const std::uint64_t at = sq_base + std::uint64_t{(s.sq_taken + b) & (blocks - 1)} * 64;
        if (!read_queue(q, at, std::span(_wqe).subspan(b * 64, 64))) {
            log().warn("mlx5 data path: QP {:#x} send queue is outside the DMA mappings: QP to error", q.qpn);
            s.rc->to_error();
            return false;
        }
        const std::uint32_t ds = load_be<std::uint32_t>(_wqe.data() + 4) & 0x3f;
        if ((b + 1) * 64 >= ds * 16) {
            break;
        }
    }
    return true;
}

// Found once and kept (dma_space::removals): with many QPs on one UAR page, each of its rings has
// every QP read its record, and a window lookup per record cost more than the read.
bool datapath::read_counter(qp_slot& s, const qp_object& q, std::uint64_t offset, std::uint32_t& counter) {
    if (s.record_iova != q.dbr_addr || s.record_removals != _dma->removals()) {
        s.record = _dma->readable(q.dbr_addr, 8);
        s.record_iova = q.dbr_addr;
        s.record_removals = _dma->removals();
    }
    std::array<std::byte, 4> word{};
    if (s.record != nullptr) {
        std::memcpy(word.data(), s.record + offset, word.size());
    } else if (!_dma->read(q.dbr_addr + offset, word)) {
        return false;
    }
    counter = load_be<std::uint32_t>(word.data()) & 0xffff;
    return true;
}

bool datapath::fetch_sends(qp_slot& s, const qp_object& q) {
    s.sq_behind = false;
    std::uint32_t counter = 0;
    if (!read_counter(s, q, db::qp_dbr::send_counter, counter)) {
        return false;
    }
    const std::uint32_t blocks = 1u << q.log_sq_size;
    std::uint32_t pending = (counter - s.sq_taken) & 0xffff;
    if (pending == 0) {
        return false;   // one of many QPs of a rung UAR page: its rc_qp is not touched
    }
    // the rc_qp's room only shrinks by what this loop posts (the engine frees entries in its own
    // poll, later in the pass): asked once, not once per entry
    std::uint32_t room = s.rc->send_room();
    parsed_send p;   // one for the batch: parse_send_wqe writes what each entry uses
    std::uint32_t run_first = s.sq_taken, run_length = 0;  // the blocks in _staged
    std::uint64_t fetched = 0;
    while (pending > 0 && room > 0) {
        const std::uint32_t most = std::min<std::uint32_t>({pending, 16, blocks});
        if (s.sq_taken - run_first >= run_length) {
            run_first = s.sq_taken;
            run_length = stage_sends(q, run_first, pending);
        }
        const std::byte* entry = nullptr;
        if (run_length != 0) {
            // the blocks the entry's ds names (within `most`: beyond it, the parse refuses it
            // unread) must all be staged; else stage again from the entry, which a ring's or a
            // page's end may still cut short: then gather it block by block
            const std::uint32_t ds = load_be<std::uint32_t>(_staged.data() + (s.sq_taken - run_first) * 64 + 4) & 0x3f;
            const std::uint32_t needed = std::clamp<std::uint32_t>((ds * 16 + 63) / 64, 1, most);
            if (needed > run_length - (s.sq_taken - run_first) && run_first != s.sq_taken) {
                run_first = s.sq_taken;
                run_length = stage_sends(q, run_first, pending);
            }
            if (run_length != 0 && needed <= run_length - (s.sq_taken - run_first)) {
                entry = _staged.data() + std::size_t{s.sq_taken - run_first} * 64;
            }
        }
        if (entry == nullptr) {
            run_length = 0;  // _staged holds nothing of the next entry
            if (!gather_send(s, q, most)) {
                // the QP went to error: what this loop fetched before still counts
                _wqes.store(_wqes.load(std::memory_order_relaxed) + fetched, std::memory_order_relaxed);
                return true;
            }
            entry = _wqe.data();
        }
        // _staged has 16 blocks of room past its run: the span never leaves the buffer, and the
        // parse reads no byte past the entry's ds, all staged
        parse_send_wqe(std::span(entry, std::size_t{most} * 64), s.sq_taken, q.qpn, pending, p);
        if (!s.rc->post_send(p.request)) {
            break;
        }
        --room;
        s.opcodes[s.sq_taken & (blocks - 1)] = p.opcode;
        s.sq_taken += p.blocks;
        pending -= p.blocks;
        ++fetched;
    }
    s.sq_behind = pending != 0;   // the rc_qp was full: looked at again next pass
    // this thread is the counter's only writer: a plain add, not a locked one
    _wqes.store(_wqes.load(std::memory_order_relaxed) + fetched, std::memory_order_relaxed);
    return fetched != 0;
}

bool datapath::fetch_receives(qp_slot& s, const qp_object& q) {
    std::uint32_t counter = 0;
    if (!read_counter(s, q, db::qp_dbr::receive_counter, counter)) {
        return false;
    }
    const std::uint32_t slots = 1u << q.log_rq_size;
    const std::size_t stride = std::size_t{16} << q.log_rq_stride;
    bool did = false;
    while (((counter - s.rq_taken) & 0xffff) != 0 && s.rc->receive_room() > 0) {
        const auto wqe = std::span(_wqe).first(std::min(stride, _wqe.size()));
        if (!read_queue(q, std::uint64_t{s.rq_taken & (slots - 1)} * stride, wqe)) {
            log().warn("mlx5 data path: QP {:#x} receive queue is outside the DMA mappings: QP to error", q.qpn);
            s.rc->to_error();
            return true;
        }
        roce::receive_request r;
        if (!parse_receive_wqe(wqe, s.rq_taken, r)) {
            r.sge_count = 1;  // a key that names nothing: the message landing here fails
            r.sg[0] = roce::sge{0, 0, 0};
        }
        if (!s.rc->post_receive(r)) {
            break;
        }
        ++s.rq_taken;
        did = true;
    }
    return did;
}

}  // namespace rig::sim::mlx5
