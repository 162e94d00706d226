// Fuzzes the bnxt model's work entries (sim/bnxt/wqe.cpp) as a hostile driver writes them, and
// the RC engine behind them: send WQEs (wqe_type, flags, wqe_size in slots, length, SGEs with any
// lkey/address/size, inline bytes, the RDMA header's remote_va and remote_key) go through
// sim::bnxt::parse_send_wqe exactly as a data-path pass fetches them (datapath::fetch_sends: the
// 128-byte entry, its SQ slot, aggregate_requester_cqes), receive WQEs through parse_receive_wqe
// (fetch_receives: a malformed one is posted with an SGE whose key names nothing); the requests
// then run on two sim::roce::rc_qp connected over an in-process wire, A sending to B, polled with
// a synthetic clock (deterministic: no thread, no sleep, timers fired by moving the clock).
// Oracle: the parser takes exactly the entries docs/bnxt-data-path.md and datapath.hpp describe
// (an independent reading of the bytes: roce_hsi.h sq_send_hdr, sq_rdma_hdr, sq_sge, rq_wqe_hdr)
// and writes no scatter entry past the six a static WQE holds; a malformed send completes
// LOCAL_QP_OPERATION (the model's CQ_REQ_STATUS_LOCAL_QP_OPERATION_ERR) or, behind an earlier
// failure, flushed, never silence, and leaves A in the error state; any error completion finds
// its QP in the error state; completions come in entry order for posted entries only, and every
// signalled or failed entry gets one once the clock has passed every timer; a malformed receive
// never takes bytes; no byte of either function's memory outside the regions that grant a write
// changes. Each input gets new ports and queue pairs and the memory filled again.
// Not reached here (needs the function model's threads): the doorbell decoding and the CQE
// writing of sim/bnxt/doorbells.cpp and cqe.cpp (test/model/bnxt_model covers them).
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "test/fuzz/harness.hpp"
#include "test/fuzz/reader.hpp"
#include "abi/bits.hpp"
#include "sim/bnxt/datapath.hpp"
#include "sim/roce/engine.hpp"
#include "sim/roce/memory.hpp"
#include "sim/roce/rc_qp.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/dma_space.hpp"
// after the sim headers (rcfw.hpp's `op` parameters would shadow wqe.hpp's abi::op)
#include "abi/bnxt/wqe.hpp"

namespace {

namespace abi = ::rig::bnxt::abi;
namespace sr = ::rig::sim::roce;
using rig::abi::load_le;
using rig::abi::store_le;
using rig::fuzz::reader;

constexpr std::uint64_t iova_base = 0x4000'0000;
constexpr std::uint64_t va_base = 0x7f00'0000'0000;
constexpr std::size_t memory_bytes = 32 * 1024;
// Each function's memory: [0, 8K) key local_key (local write), [8K, 16K) key remote_key (local
// write, remote read and write), [16K, 20K) key read_key (no write right), the rest unregistered.
// [16K, 32K) may never change.
constexpr std::uint32_t local_key = 0x11, remote_key = 0x22, read_key = 0x33, pd = 5;
constexpr std::size_t guarded_from = 16 * 1024;
constexpr std::uint32_t ring_entries = 16;   // small: full rings are reached, and made fast
constexpr std::size_t wqe_bytes = abi::static_wqe_slots * abi::wqe_slot_size;

// What each function's memory holds when an input starts (made once: a byte loop per input
// would cost more than the input's own work under the coverage hooks).
const std::array<std::byte, memory_bytes>& fill() {
    static const auto pattern = [] {
        std::array<std::byte, memory_bytes> p{};
        for (std::size_t i = 0; i < p.size(); ++i) {
            p[i] = std::byte{static_cast<std::uint8_t>(i * 131 + 7)};
        }
        return p;
    }();
    return pattern;
}

// One function's client memory, mapped once for every input (a memfd as a vfio-user client's)
// with its regions; its bytes are filled again for each input.
struct function_memory {
    int fd = -1;
    std::byte* host = nullptr;
    rig::sim::vfio_user::dma_space dma;
    sr::memory mem{dma};

    function_memory() {
        fd = ::memfd_create("rig-fuzz-bnxt-wqe", MFD_CLOEXEC);
        rig::fuzz::require(fd >= 0 && ::ftruncate(fd, memory_bytes) == 0, "a memfd for the function's memory");
        void* p = ::mmap(nullptr, memory_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        rig::fuzz::require(p != MAP_FAILED, "the memfd mapped");
        host = static_cast<std::byte*>(p);
        rig::fuzz::require(dma.map(iova_base, memory_bytes, true, true, fd, 0) == 0, "the DMA window");
        reg(local_key, 0, 8192, sr::access_local_write);
        reg(remote_key, 8192, 8192, sr::access_local_write | sr::access_remote_read | sr::access_remote_write);
        reg(read_key, 16384, 4096, 0);
    }
    ~function_memory() {
        dma.unmap_all();
        ::munmap(host, memory_bytes);
        ::close(fd);
    }
    function_memory(const function_memory&) = delete;
    function_memory& operator=(const function_memory&) = delete;

    void reg(std::uint32_t key, std::uint64_t offset, std::uint64_t length, std::uint8_t rights) {
        sr::region r;
        r.key = key;
        r.pd = pd;
        r.start = va_base + offset;
        r.length = length;
        r.rights = rights;
        r.base_iova = iova_base + offset;
        mem.register_region(std::move(r));
    }
    void refill() { std::memcpy(host, fill().data(), memory_bytes); }
    bool guarded_unchanged() const {
        return std::memcmp(host + guarded_from, fill().data() + guarded_from, memory_bytes - guarded_from) == 0;
    }
};

function_memory& memory_a() {
    static function_memory m;
    return m;
}
function_memory& memory_b() {
    static function_memory m;
    return m;
}

// One function on the wire: its port, engine and RC queue pair (made fresh for each input).
struct side {
    function_memory& m;
    std::unique_ptr<sr::port> port;
    rig::roce::gid gid{};
    std::unique_ptr<sr::engine> eng;
    std::unique_ptr<sr::rc_qp> qp;

    side(sr::wire& w, function_memory& fm, std::uint8_t id, std::uint32_t qpn) : m(fm) {
        port = w.attach({std::byte{0x02}, std::byte{0x52}, std::byte{0x49}, std::byte{0x47}, std::byte{0x42}, std::byte{id}});
        gid[10] = gid[11] = std::byte{0xff};
        gid[12] = std::byte{10};
        gid[15] = std::byte{id};
        eng = std::make_unique<sr::engine>(*port, gid);
        sr::qp_config c;
        c.qpn = qpn;
        c.pd = pd;
        c.mac = port->mac();
        c.gid = gid;
        c.sq_size = c.rq_size = ring_entries;
        qp = std::make_unique<sr::rc_qp>(m.mem, *port, c);
        eng->add(*qp);
    }
    ~side() {
        eng->remove(*qp);
        qp.reset();
        eng.reset();
        port.reset();
    }
    side(const side&) = delete;
    side& operator=(const side&) = delete;

    void connect(const side& peer, std::uint32_t send_psn, std::uint32_t receive_psn, std::uint8_t timeout,
                 std::uint8_t rnr_retry) {
        qp->to_init();
        sr::path p;
        p.dest_qpn = peer.qp->qpn();
        p.dest_mac = peer.port->mac();
        p.dest_gid = peer.gid;
        p.mtu = 1024;
        p.rq_psn = receive_psn;
        qp->to_rtr(p);
        sr::send_params s;
        s.sq_psn = send_psn;
        s.timeout = timeout;
        s.retry_count = 3;
        s.rnr_retry = rnr_retry;
        qp->to_rts(s);
    }
};

// A send the harness posted, as the parser gave it.
struct posted_send {
    std::uint32_t index;
    bool malformed, signaled;
};

struct run_state {
    bool signal_all = false;
    std::uint32_t rq_sge = 6;
    sr::clock::time_point now = sr::clock::time_point{} + std::chrono::hours(1);
    std::uint32_t sq_count = 0, rq_count = 0;   // WQEs fetched, as the pass's sq_taken/rq_taken
    std::deque<posted_send> sends;              // posted, not yet completed
    std::vector<bool> receive_malformed = std::vector<bool>(ring_entries, false);
    bool any_malformed_send = false;
};

// ---- the parser's contract, read independently from the bytes --------------------------------

std::uint64_t u64_at(const std::byte* p) { return load_le<std::uint64_t>(p); }
std::uint32_t u32_at(const std::byte* p) { return load_le<std::uint32_t>(p); }

// Whether the model must refuse this send WQE (datapath.hpp parse_send_wqe's list).
bool send_is_malformed(std::span<const std::byte> w) {
    const auto type = std::to_integer<std::uint8_t>(w[0]);
    const auto flags = std::to_integer<std::uint8_t>(w[1]);
    const auto slots = std::to_integer<std::uint8_t>(w[2]);
    const std::uint32_t length = u32_at(&w[8]);
    if (type != abi::SQ_BASE_WQE_TYPE_SEND && type != abi::SQ_BASE_WQE_TYPE_WRITE_WQE &&
        type != abi::SQ_BASE_WQE_TYPE_READ_WQE) {
        return true;
    }
    if (slots < 2 || slots > 8) {
        return true;
    }
    if ((flags & abi::SQ_SEND_HDR_FLAGS_INLINE) != 0) {
        return type == abi::SQ_BASE_WQE_TYPE_READ_WQE || length > 96 || slots != 2 + (length + 15) / 16;
    }
    std::uint64_t total = 0;
    for (std::size_t i = 0; i + 2 < slots; ++i) {
        const std::byte* g = &w[32 + 16 * i];
        if (u32_at(g + 8) == 0) {
            return true;
        }
        total += u32_at(g + 12);
    }
    return total != length;
}

void check_send_parse(std::span<const std::byte> w, std::uint32_t index, bool signal_all,
                      const rig::sim::bnxt::parsed_send& p) {
    const sr::send_request& r = p.request;
    const bool malformed = send_is_malformed(w);
    rig::fuzz::require(p.malformed == malformed, "parse_send_wqe refuses exactly the malformed entries");
    rig::fuzz::require(r.index == index, "the request carries its SQ slot");
    if (malformed) {
        rig::fuzz::require(r.sge_count > sr::max_sge && r.signaled, "a malformed entry is one the engine fails, signalled");
        return;
    }
    const auto type = std::to_integer<std::uint8_t>(w[0]);
    const auto flags = std::to_integer<std::uint8_t>(w[1]);
    const std::uint32_t length = u32_at(&w[8]);
    const sr::work_op op = type == abi::SQ_BASE_WQE_TYPE_SEND        ? sr::work_op::send
                           : type == abi::SQ_BASE_WQE_TYPE_WRITE_WQE ? sr::work_op::write
                                                                     : sr::work_op::read;
    rig::fuzz::require(r.op == op, "the request's operation is the wqe_type's");
    rig::fuzz::require(r.signaled == (signal_all || (flags & abi::SQ_SEND_HDR_FLAGS_SIGNAL_COMP) != 0),
                       "signalled by SIGNAL_COMP, or every entry when aggregation is off");
    if (op == sr::work_op::send) {
        rig::fuzz::require(r.rkey == 0 && r.remote_va == 0, "a SEND names no remote memory");
    } else {
        rig::fuzz::require(r.remote_va == u64_at(&w[16]) && r.rkey == u32_at(&w[24]),
                           "WRITE and READ take sq_rdma_hdr's remote_va and remote_key");
    }
    rig::fuzz::require(r.length() == length, "the request moves the header's length");
    if ((flags & abi::SQ_SEND_HDR_FLAGS_INLINE) != 0) {
        rig::fuzz::require(r.is_inline && r.inline_bytes == length && r.sge_count == 0, "inline: the bytes, no SGE");
        rig::fuzz::require(std::memcmp(r.inline_data.data(), &w[32], length) == 0, "inline: the bytes after the header");
        return;
    }
    const std::size_t n = std::to_integer<std::uint8_t>(w[2]) - 2u;
    rig::fuzz::require(!r.is_inline && r.sge_count == n, "one scatter entry per slot after the header");
    for (std::size_t i = 0; i < sr::max_sge; ++i) {
        const std::byte* g = &w[32 + 16 * std::min<std::size_t>(i, 5)];
        if (i < n) {
            rig::fuzz::require(r.sg[i].va == u64_at(g) && r.sg[i].key == u32_at(g + 8) && r.sg[i].length == u32_at(g + 12),
                               "each sq_sge as written");
        } else if (i >= abi::static_max_sge) {
            rig::fuzz::require(r.sg[i].key == 0xdeadbeef, "no scatter entry written past the WQE's six");
        }
    }
}

// ---- what the fuzzer's bytes become ------------------------------------------------------------

// A valid key, address in its region and small size for SGE i when asked: the fuzzer still
// picks the key and offsets, so the regions' bounds and rights are tried.
void fix_sge(std::byte* g) {
    static constexpr std::uint32_t keys[] = {local_key, remote_key, read_key};
    static constexpr std::uint64_t starts[] = {0, 8192, 16384};
    const std::size_t k = u32_at(g + 8) % 3;
    store_le<std::uint64_t>(g, va_base + starts[k] + u64_at(g) % 8192);
    store_le<std::uint32_t>(g + 8, keys[k]);
    store_le<std::uint32_t>(g + 12, u32_at(g + 12) % 2048);   // up to two packets at MTU 1024
}

// The fix byte: bits 0-1 the wqe_type (raw, SEND, WRITE, READ); bit 2 SGEs in our regions;
// bit 3 wqe_size and length consistent with the SGEs or inline bytes; bit 4 the remote address
// in B's remote region; bit 5 INLINE cleared. 0: the bytes as they came.
void fix_send(std::span<std::byte> w, std::uint8_t fix) {
    static constexpr std::uint8_t types[] = {0, abi::SQ_BASE_WQE_TYPE_SEND, abi::SQ_BASE_WQE_TYPE_WRITE_WQE,
                                             abi::SQ_BASE_WQE_TYPE_READ_WQE};
    if ((fix & 3) != 0) {
        w[0] = std::byte{types[fix & 3]};
    }
    if ((fix & 0x20) != 0) {
        w[1] &= std::byte{static_cast<std::uint8_t>(~abi::SQ_SEND_HDR_FLAGS_INLINE)};
    }
    const bool is_inline = (std::to_integer<std::uint8_t>(w[1]) & abi::SQ_SEND_HDR_FLAGS_INLINE) != 0;
    if ((fix & 0x08) != 0) {
        if (is_inline) {
            const std::uint32_t length = u32_at(&w[8]) % 97;
            store_le<std::uint32_t>(&w[8], length);
            w[2] = std::byte{static_cast<std::uint8_t>(2 + (length + 15) / 16)};
        } else {
            const std::size_t n = std::to_integer<std::uint8_t>(w[2]) % 7;
            w[2] = std::byte{static_cast<std::uint8_t>(2 + n)};
        }
    }
    const std::size_t slots = std::to_integer<std::uint8_t>(w[2]);
    if (!is_inline && slots >= 2 && slots <= 8) {
        std::uint64_t total = 0;
        for (std::size_t i = 0; i + 2 < slots; ++i) {
            if ((fix & 0x04) != 0) {
                fix_sge(&w[32 + 16 * i]);
            }
            total += u32_at(&w[32 + 16 * i + 12]);
        }
        if ((fix & 0x08) != 0) {
            store_le<std::uint32_t>(&w[8], static_cast<std::uint32_t>(total));
        }
    }
    if ((fix & 0x10) != 0) {
        store_le<std::uint64_t>(&w[16], va_base + 8192 + u64_at(&w[16]) % 8192);
        store_le<std::uint32_t>(&w[24], remote_key);
    }
}

// Receive fix byte: bit 0 wqe_type RCV; bit 1 wqe_size within rq_sge; bit 2 SGEs in our regions.
void fix_receive(std::span<std::byte> w, std::uint8_t fix, std::uint32_t rq_sge) {
    if ((fix & 1) != 0) {
        w[0] = std::byte{abi::RQ_WQE_HDR_WQE_TYPE_RCV};
    }
    if ((fix & 2) != 0) {
        w[2] = std::byte{static_cast<std::uint8_t>(2 + std::to_integer<std::uint8_t>(w[2]) % (rq_sge + 1))};
    }
    if ((fix & 4) != 0) {
        for (std::size_t i = 0; i < rq_sge; ++i) {
            fix_sge(&w[32 + 16 * i]);
        }
    }
}

void send_entry(run_state& s, side& a, reader& in) {
    const std::uint8_t fix = in.u8();
    std::array<std::byte, wqe_bytes> w{};
    in.fill(w);
    fix_send(w, fix);
    static rig::sim::bnxt::parsed_send parsed;   // reused from entry to entry, as the pass's
    for (sr::sge& g : parsed.request.sg) {
        g.key = 0xdeadbeef;
    }
    const std::uint32_t slot = s.sq_count % ring_entries;
    rig::sim::bnxt::parse_send_wqe(w, slot, s.signal_all, parsed);
    check_send_parse(w, slot, s.signal_all, parsed);
    if (a.qp->send_room() == 0 || !a.qp->post_send(parsed.request)) {
        return;   // the pass waits for room: the entry stays in the ring
    }
    ++s.sq_count;
    s.sends.push_back({slot, parsed.malformed, parsed.request.signaled});
    // the rc_qp holds at most ring_entries entries (send_room): the older ones are done, and
    // their completions were taken after the last step, so they went silently
    while (s.sends.size() > ring_entries) {
        rig::fuzz::require(!s.sends.front().signaled && !s.sends.front().malformed,
                           "only unsignalled successes go without their own completion");
        s.sends.pop_front();
    }
    s.any_malformed_send = s.any_malformed_send || parsed.malformed;
}

void receive_entry(run_state& s, side& b, reader& in) {
    const std::uint8_t fix = in.u8();
    std::array<std::byte, wqe_bytes> w{};
    const std::size_t stride = 32 + 16 * s.rq_sge;
    in.fill(std::span(w).first(stride));
    fix_receive(w, fix, s.rq_sge);
    const auto wqe = std::span<const std::byte>(w).first(stride);
    sr::receive_request r;
    std::uint32_t wr_id = 0;
    const std::uint32_t slot = s.rq_count % ring_entries;
    const bool ok = rig::sim::bnxt::parse_receive_wqe(wqe, s.rq_sge, slot, r, wr_id);
    rig::fuzz::require(wr_id == (u32_at(&w[8]) & 0xfffff), "the receive's wr_id is the header's 20 bits");
    const auto size = std::to_integer<std::uint8_t>(w[2]);
    bool expect = w[0] == std::byte{abi::RQ_WQE_HDR_WQE_TYPE_RCV} && size >= 2 && size - 2u <= s.rq_sge;
    std::uint8_t used = 0;
    for (std::size_t i = 0; expect && i + 2 < size; ++i) {
        const std::byte* g = &w[32 + 16 * i];
        if (u32_at(g + 12) != 0 && u32_at(g + 8) == 0) {
            expect = false;
        } else if (u32_at(g + 12) != 0) {
            const sr::sge& got = r.sg[used++];
            rig::fuzz::require(got.va == u64_at(g) && got.key == u32_at(g + 8) && got.length == u32_at(g + 12),
                               "each non-empty receive SGE as written, in order");
        }
    }
    rig::fuzz::require(ok == expect, "parse_receive_wqe refuses exactly the malformed entries");
    rig::fuzz::require(!ok || r.sge_count == used, "a receive takes its non-empty SGEs");
    if (!ok) {
        r.index = slot;   // datapath::fetch_receives: an SGE whose key names nothing
        r.sge_count = 1;
        r.sg[0] = sr::sge{0, 0, 0};
    }
    if (b.qp->receive_room() == 0 || !b.qp->post_receive(r)) {
        return;
    }
    s.receive_malformed[slot] = !ok;
    ++s.rq_count;
}

// ---- running and judging -----------------------------------------------------------------------

bool poll_both(run_state& s, side& a, side& b) {
    const bool did_a = a.eng->poll(s.now);
    const bool did_b = b.eng->poll(s.now);
    return did_a || did_b;
}

// A's send completions: each names the oldest posted entries in order; the unsignalled
// successes before it are covered by it (aggregation); a malformed entry never succeeds.
void take_sends(run_state& s, side& a) {
    sr::completion c;
    while (a.qp->take(sr::completion_side::send, c)) {
        bool found = false;
        while (!s.sends.empty()) {
            const posted_send p = s.sends.front();
            s.sends.pop_front();
            if (p.index == c.index) {
                found = true;
                if (p.malformed) {
                    rig::fuzz::require(c.status == sr::completion_status::local_qp_operation ||
                                           c.status == sr::completion_status::flushed,
                                       "a malformed entry completes LOCAL_QP_OPERATION (or flushed behind a failure)");
                }
                rig::fuzz::require(c.status != sr::completion_status::success || p.signaled,
                                   "an unsignalled entry completes silently when it succeeds");
                break;
            }
            rig::fuzz::require(!p.signaled && !p.malformed, "only unsignalled successes go without their own completion");
        }
        rig::fuzz::require(found, "a completion names an entry that was posted, in entry order");
        // IB vol. 1 10.3.1 / 11.6.2: a work completion in error moves the queue pair to Error
        rig::fuzz::require(c.status == sr::completion_status::success || a.qp->state() == sr::qp_state::error,
                           "an error completion leaves the QP in the error state");
    }
}

void take_receives(run_state& s, side& b) {
    sr::completion c;
    while (b.qp->take(sr::completion_side::receive, c)) {
        rig::fuzz::require(c.index < ring_entries, "a receive completion names a slot of the ring");
        rig::fuzz::require(c.status == sr::completion_status::success || b.qp->state() == sr::qp_state::error,
                           "an error completion leaves the QP in the error state");
        if (s.receive_malformed[c.index]) {
            rig::fuzz::require(c.status != sr::completion_status::success || c.byte_len == 0,
                               "a malformed receive takes no bytes");
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    reader in{data, size};
    function_memory& ma = memory_a();
    function_memory& mb = memory_b();
    ma.refill();
    mb.refill();
    run_state s;
    const std::uint8_t config = in.u8();
    s.signal_all = (config & 1) != 0;
    s.rq_sge = 1 + ((config >> 1) & 7) % 6;
    const bool rnr_finite = (config & 0x80) == 0;
    {
        // one switch for every input (its frame pool grows once); ports and queue pairs are new
        static sr::wire w;
        side a(w, ma, 1, 0x101), b(w, mb, 2, 0x202);
        const std::uint8_t timeout = static_cast<std::uint8_t>(1 + ((config >> 4) & 7));   // 8 us .. 524 us
        a.connect(b, 0x100, 0x300, timeout, rnr_finite ? 2 : 7);
        b.connect(a, 0x300, 0x100, timeout, rnr_finite ? 2 : 7);
        for (int round = 0; round < 512 && !in.empty(); ++round) {
            const std::uint8_t op = in.u8();
            switch (op % 4) {
            case 0: send_entry(s, a, in); break;
            case 1: receive_entry(s, b, in); break;
            case 2:
                for (int k = 0; k <= op / 16; ++k) {
                    poll_both(s, a, b);
                    s.now += std::chrono::microseconds(1);
                }
                break;
            default: s.now += std::chrono::microseconds(std::uint64_t{in.u8()} * 97); break;
            }
            take_sends(s, a);
            take_receives(s, b);
        }
        // until nothing moves: idle rounds push the clock past every timer (ack timeouts, RNR waits)
        int idle = 0;
        for (int round = 0; round < 4096 && idle < 4; ++round) {
            if (poll_both(s, a, b)) {
                idle = 0;
                s.now += std::chrono::microseconds(1);
            } else {
                ++idle;
                s.now += std::chrono::seconds(1);
            }
            take_sends(s, a);
            take_receives(s, b);
        }
        if (idle >= 4 && rnr_finite) {
            // quiescent: every entry has its result, so none was left in silence
            for (const posted_send& p : s.sends) {
                rig::fuzz::require(!p.malformed && !p.signaled, "every signalled or malformed entry completed");
            }
            if (s.any_malformed_send) {
                rig::fuzz::require(a.qp->state() == sr::qp_state::error, "a malformed entry leaves the QP in error");
            }
        }
    }
    rig::fuzz::require(ma.guarded_unchanged() && mb.guarded_unchanged(),
                       "no byte outside the regions that grant a write changed");
    return 0;
}
