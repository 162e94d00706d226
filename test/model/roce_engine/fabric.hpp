#pragma once
// Test fixture for sim/roce: "functions" (a memfd-backed DMA space as a client would map it,
// the registered-memory table, a wire port and an engine), RC queue pairs connected across the
// switch, and a loop that polls every engine with real time until a condition holds.
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/roce/engine.hpp"
#include "sim/roce/memory.hpp"
#include "sim/roce/rc_qp.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace rig::test::roce {

using namespace std::chrono_literals;
using rig::sim::roce::clock;
namespace sr = rig::sim::roce;

inline constexpr std::uint64_t iova_base = 0x4000'0000;
inline constexpr std::uint64_t va_base = 0x7f00'0000'0000;   // where "the application" sees it
inline constexpr std::uint32_t pd = 7;

// One function: `bytes` of client memory mapped at iova_base, visible to the test at `host`.
struct function {
    int fd = -1;
    std::size_t bytes;
    std::byte* host = nullptr;
    sim::vfio_user::dma_space dma;
    sr::memory mem{dma};
    std::unique_ptr<sr::port> port;
    rig::roce::gid gid{};
    std::unique_ptr<sr::engine> eng;
    std::vector<std::unique_ptr<sr::rc_qp>> qps;

    function(sr::wire& w, std::uint8_t id, std::size_t size) : bytes(size) {
        fd = ::memfd_create("rig-roce-test", MFD_CLOEXEC);
        REQUIRE(fd >= 0);
        REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        REQUIRE(p != MAP_FAILED);
        host = static_cast<std::byte*>(p);
        REQUIRE(dma.map(iova_base, bytes, true, true, fd, 0) == 0);
        sr::mac_address mac{std::byte{0x02}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0}, std::byte{id}};
        port = w.attach(mac);
        // frames carry payload by reference into this memory (one copy: sim/roce/wire.hpp); a
        // test's polling loop never runs while a window goes, as the guard asks
        port->guard_unmaps(dma);
        gid[10] = gid[11] = std::byte{0xff};   // ::ffff:10.0.0.id
        gid[12] = std::byte{10};
        gid[15] = std::byte{id};
        eng = std::make_unique<sr::engine>(*port, gid);
    }
    ~function() {
        for (auto& q : qps) {
            eng->remove(*q);
        }
        qps.clear();
        eng.reset();
        port.reset();
        dma.unmap_all();
        ::munmap(host, bytes);
        ::close(fd);
    }
    function(const function&) = delete;
    function& operator=(const function&) = delete;

    // A region over [offset, offset + length) of this function's memory, linear translation.
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
    static std::uint64_t va(std::uint64_t offset) { return va_base + offset; }
    std::span<std::byte> at(std::uint64_t offset, std::size_t n) { return {host + offset, n}; }

    sr::rc_qp& make_qp(std::uint32_t qpn, std::uint32_t ring = 256, std::uint8_t rq_max_sge = sr::max_sge,
                       std::uint32_t sq_payload_bytes = 0) {
        sr::qp_config c;
        c.rq_max_sge = rq_max_sge;
        c.sq_payload_bytes = sq_payload_bytes;
        c.qpn = qpn;
        c.pd = pd;
        c.mac = port->mac();
        c.gid = gid;
        c.sq_size = c.rq_size = ring;
        qps.push_back(std::make_unique<sr::rc_qp>(mem, *port, c));
        eng->add(*qps.back());
        return *qps.back();
    }
};

struct link_options {
    std::uint32_t mtu = 1024;
    std::uint32_t a_psn = 100;   // a's first send PSN (b expects it)
    std::uint32_t b_psn = 5000;
    std::uint8_t timeout = 10;   // 4.2 ms: tight, so that tests of loss stay fast
    std::uint8_t retry_count = 7;
    std::uint8_t rnr_retry = 7;
    std::uint8_t min_rnr_timer = 1;  // 10 us
};

// RESET -> INIT -> RTR -> RTS for a towards b.
inline void connect_one(sr::rc_qp& a, const function& fa, sr::rc_qp& b, const function& fb, std::uint32_t send_psn,
                        std::uint32_t receive_psn, const link_options& o) {
    (void)fa;
    a.to_init();
    sr::path p;
    p.dest_qpn = b.qpn();
    p.dest_mac = fb.port->mac();
    p.dest_gid = fb.gid;
    p.mtu = o.mtu;
    p.rq_psn = receive_psn;
    p.min_rnr_timer = o.min_rnr_timer;
    a.to_rtr(p);
    sr::send_params s;
    s.sq_psn = send_psn;
    s.timeout = o.timeout;
    s.retry_count = o.retry_count;
    s.rnr_retry = o.rnr_retry;
    a.to_rts(s);
}

inline void connect(sr::rc_qp& a, function& fa, sr::rc_qp& b, function& fb, const link_options& o = {}) {
    connect_one(a, fa, b, fb, o.a_psn, o.b_psn, o);
    if (&a != &b) {
        connect_one(b, fb, a, fa, o.b_psn, o.a_psn, o);
    }
}

// Polls every function's engine with real time until `done` or `limit` passes.
inline bool run_until(std::initializer_list<function*> fns, const std::function<bool()>& done,
                      std::chrono::nanoseconds limit = 10s) {
    const auto end = clock::now() + limit;
    for (;;) {
        const auto now = clock::now();
        bool did = false;
        for (function* f : fns) {
            did = f->eng->poll(now) || did;
        }
        if (done()) {
            return true;
        }
        if (now > end) {
            return false;
        }
        if (!did) {
            std::this_thread::yield();
        }
    }
}

inline sr::send_request request(sr::work_op op, std::uint32_t index, std::uint32_t lkey, std::uint64_t va,
                                std::uint32_t length, std::uint32_t rkey = 0, std::uint64_t remote_va = 0) {
    sr::send_request r;
    r.index = index;
    r.op = op;
    r.sge_count = 1;
    r.sg[0] = {.va = va, .key = lkey, .length = length};
    r.rkey = rkey;
    r.remote_va = remote_va;
    return r;
}

inline sr::receive_request receive(std::uint32_t index, std::uint32_t lkey, std::uint64_t va, std::uint32_t length) {
    sr::receive_request r;
    r.index = index;
    r.sge_count = 1;
    r.sg[0] = {.va = va, .key = lkey, .length = length};
    return r;
}

inline std::vector<sr::completion> take_all(sr::rc_qp& q, sr::completion_side side) {
    std::vector<sr::completion> out;
    sr::completion c;
    while (q.take(side, c)) {
        out.push_back(c);
    }
    return out;
}

inline void fill_random(std::span<std::byte> s, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        const std::uint64_t v = g();
        std::memcpy(s.data() + i, &v, 8);
    }
    for (; i < s.size(); ++i) {
        s[i] = static_cast<std::byte>(g());
    }
}

// FNV-1a over the bytes: a checksum to compare what arrived with what was sent.
inline std::uint64_t checksum(std::span<const std::byte> s) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::byte b : s) {
        h = (h ^ static_cast<std::uint8_t>(b)) * 0x100000001b3ull;
    }
    return h;
}

// The memory plan of most engine tests (offsets in each function's 3 MiB): source 0..1 MiB
// (lkey), destination 1..2 MiB (rkey: remote read and write), receive 2..3 MiB (rcvkey).
inline constexpr std::uint64_t mib = 1 << 20;
inline constexpr std::uint64_t src = 0, dst = mib, rcv = 2 * mib;
inline constexpr std::uint32_t lkey = 0x11, rkey = 0x22, rcvkey = 0x33;

inline function& planned(function& f) {
    f.reg(lkey, src, mib, sr::access_local_write);
    f.reg(rkey, dst, mib, sr::access_local_write | sr::access_remote_read | sr::access_remote_write);
    f.reg(rcvkey, rcv, mib, sr::access_local_write);
    return f;
}

// Two functions on one wire, memory planned, one queue pair each (not yet connected).
struct two_functions {
    sr::wire w;
    function fa{w, 1, 3 * mib};
    function fb{w, 2, 3 * mib};
    sr::rc_qp& a = planned(fa).make_qp(0x101);
    sr::rc_qp& b = planned(fb).make_qp(0x202);
};

}  // namespace rig::test::roce
