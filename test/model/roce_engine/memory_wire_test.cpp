// sim/roce memory (registered regions over the DMA space) and wire (the in-process switch).
#include <set>

#include <sys/resource.h>

#include "test/model/roce_engine/fabric.hpp"

using namespace rig::test::roce;
namespace sr = rig::sim::roce;

TEST_CASE("a region moves bytes only under its key, inside its bounds, with the right it grants") {
    sr::wire w;
    function f(w, 1, 1 << 20);
    f.reg(0x100, 0x1000, 0x2000, sr::access_local_write | sr::access_remote_read);
    fill_random(f.at(0x1000, 0x2000), 1);
    std::array<std::byte, 64> buf{};

    CHECK(f.mem.read(0x100, pd, function::va(0x1000) + 8, buf, sr::access_remote_read) == sr::mem_status::ok);
    CHECK(std::memcmp(buf.data(), f.host + 0x1008, buf.size()) == 0);
    CHECK(f.mem.read(0x101, pd, function::va(0x1000), buf, 0) == sr::mem_status::bad_key);
    CHECK(f.mem.read(0x100, pd + 1, function::va(0x1000), buf, 0) == sr::mem_status::bad_key);   // other PD
    CHECK(f.mem.read(0x100, pd, function::va(0x1000) - 1, buf, 0) == sr::mem_status::out_of_bounds);
    CHECK(f.mem.read(0x100, pd, function::va(0x3000) - 63, buf, 0) == sr::mem_status::out_of_bounds);
    CHECK(f.mem.read(0x100, pd, function::va(0x3000) - 64, buf, 0) == sr::mem_status::ok);
    CHECK(f.mem.read(0x100, pd, ~0ull - 10, buf, 0) == sr::mem_status::out_of_bounds);
    CHECK(f.mem.write(0x100, pd, function::va(0x1000), buf, sr::access_remote_write) == sr::mem_status::no_right);

    // a refused write moves nothing
    const auto before = checksum(f.at(0x1000, 0x2000));
    std::array<std::byte, 128> ones;
    ones.fill(std::byte{0xee});
    CHECK(f.mem.write(0x100, pd, function::va(0x3000) - 64, ones, sr::access_local_write) == sr::mem_status::out_of_bounds);
    CHECK(checksum(f.at(0x1000, 0x2000)) == before);

    REQUIRE(f.mem.deregister(0x100));
    CHECK_FALSE(f.mem.deregister(0x100));
    CHECK(f.mem.read(0x100, pd, function::va(0x1000), buf, 0) == sr::mem_status::bad_key);
}

TEST_CASE("a page-list region translates each page on its own and faults outside the DMA windows") {
    sr::wire w;
    function f(w, 1, 1 << 20);
    sr::region r;
    r.key = 7;
    r.pd = pd;
    r.start = 0x10000 + 0x800;   // starts half way into its first page
    r.length = 3 * 4096;
    r.rights = sr::access_local_write;
    r.page_shift = 12;
    r.page_offset = 0x800;
    // pages in reverse order in client memory; the fourth one lies outside every DMA window
    r.pages = {iova_base + 0x9000, iova_base + 0x5000, iova_base + 0x2000, 0x1'0000'0000};
    f.mem.register_region(r);
    std::vector<std::byte> data(3 * 4096 - 0x800);
    fill_random(data, 3);
    REQUIRE(f.mem.write(7, pd, r.start, data, sr::access_local_write) == sr::mem_status::ok);
    CHECK(std::memcmp(f.host + 0x9800, data.data(), 0x800) == 0);
    CHECK(std::memcmp(f.host + 0x5000, data.data() + 0x800, 4096) == 0);
    CHECK(std::memcmp(f.host + 0x2000, data.data() + 0x1800, 4096) == 0);
    std::array<std::byte, 16> tail{};
    CHECK(f.mem.write(7, pd, r.start + r.length - 16, tail, sr::access_local_write) == sr::mem_status::dma_fault);
    CHECK(f.dma.fault_count() == 1);

    r.key = 8;
    r.pages.resize(2);
    CHECK_THROWS_AS(f.mem.register_region(r), std::invalid_argument);   // pages do not cover it
    r.key = 7;
    r.pages.resize(4);
    CHECK_THROWS_AS(f.mem.register_region(r), std::invalid_argument);   // key taken
}

namespace {

// A guard that is told nothing in these tests: no window goes while a pointer is held.
struct quiet_guard final : rig::sim::vfio_user::unmap_guard {
    void hold() override {}
    void forget(std::span<const std::byte>) noexcept override {}
    void release() noexcept override {}
};

// What place() answers, as an offset into `host` (-1: no host address), with its status.
std::pair<sr::mem_status, std::ptrdiff_t> placed(const sr::memory& m, std::uint32_t key, std::uint32_t in_pd,
                                                 std::uint64_t va, std::size_t n, std::uint8_t needed,
                                                 const std::byte* host) {
    std::byte* out = nullptr;
    const sr::mem_status s = m.place(key, in_pd, va, n, needed, out);
    return {s, out == nullptr ? -1 : out - host};
}

}  // namespace

// memory::pin keeps the host run the last place()/reference() found (sim/roce/memory.hpp
// host_run): every later answer must be the one the full look-up gives, at every edge.
TEST_CASE("a kept host run answers as the look-up does: region bounds, rights, page runs, windows, and what went") {
    constexpr std::size_t bytes = 0x10000;
    const int fd = ::memfd_create("rig-host-run-test", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(mapped != MAP_FAILED);
    rig::sim::vfio_user::dma_space dma;
    // two windows of one file: the second one the device may read, not write
    REQUIRE(dma.map(iova_base, 0x8000, true, true, fd, 0) == 0);
    REQUIRE(dma.map(iova_base + 0x8000, 0x8000, true, false, fd, 0x8000) == 0);
    auto guard = std::make_shared<quiet_guard>();
    dma.guard_unmaps(guard);
    sr::memory mem(dma);
    sr::region linear;
    linear.key = 1;
    linear.pd = pd;
    linear.start = 0x100000;
    linear.length = bytes;
    linear.rights = sr::access_remote_write | sr::access_remote_read;
    linear.base_iova = iova_base;
    mem.register_region(linear);
    sr::region paged;   // pages 0-1 and 2-3 follow each other in IOVA, 1 and 2 do not
    paged.key = 2;
    paged.pd = pd;
    paged.start = 0x200100;
    paged.page_offset = 0x100;
    paged.length = 4 * 4096 - 0x100;
    paged.rights = sr::access_remote_write;
    paged.pages = {iova_base + 0x1000, iova_base + 0x2000, iova_base + 0x5000, iova_base + 0x6000};
    mem.register_region(paged);
    constexpr auto ok = sr::mem_status::ok;
    constexpr auto rw = sr::access_remote_write;
    {
        sr::memory::pin pinned(mem);
        CHECK_THROWS_AS(sr::memory::pin(mem), std::invalid_argument);   // one pin per thread
        // the model's own mappings of the file, one per protection (dma_files.hpp)
        const std::byte* host = dma.readable(iova_base, 1);
        const std::byte* read_only = dma.readable(iova_base + 0x8000, 1);
        REQUIRE((host != nullptr && read_only != nullptr));
        CHECK(placed(mem, 1, pd, 0x100040, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x40}});
        CHECK(placed(mem, 1, pd, 0x107fc0, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x7fc0}});
        CHECK(placed(mem, 1, pd, 0x107fe0, 64, rw, host).second == -1);   // across the two windows
        CHECK(placed(mem, 1, pd, 0x108000, 64, rw, host).second == -1);   // a window not writable
        CHECK(placed(mem, 1, pd + 1, 0x100080, 64, rw, host).first == sr::mem_status::bad_key);
        CHECK(placed(mem, 3, pd, 0x100080, 64, rw, host).first == sr::mem_status::bad_key);
        CHECK(placed(mem, 1, pd, 0x100080, 64, sr::access_local_write, host).first == sr::mem_status::no_right);
        CHECK(placed(mem, 1, pd, 0x0fffc0, 64, rw, host).first == sr::mem_status::out_of_bounds);
        CHECK(placed(mem, 1, pd, 0x100080, 0, rw, host) == std::pair{ok, std::ptrdiff_t{-1}});
        CHECK(placed(mem, 1, pd, 0x100080, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x80}});

        CHECK(placed(mem, 2, pd, 0x200110, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x1110}});
        CHECK(placed(mem, 2, pd, 0x201fc0, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x2fc0}});
        CHECK(placed(mem, 2, pd, 0x201fe0, 64, rw, host) == std::pair{ok, std::ptrdiff_t{-1}});   // page 1 to 2
        CHECK(placed(mem, 2, pd, 0x202000, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x5000}});
        CHECK(placed(mem, 2, pd, 0x203fc0, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x6fc0}});
        CHECK(placed(mem, 2, pd, 0x203fd0, 64, rw, host).first == sr::mem_status::out_of_bounds);
        CHECK(placed(mem, 2, pd, 0x2000c0, 64, rw, host).first == sr::mem_status::out_of_bounds);
        CHECK(placed(mem, 2, pd, 0x200100, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x1100}});
        // check() answers from the runs too, and as the look-up does outside them
        CHECK(mem.check(2, pd, 0x200140, 64, rw) == ok);
        CHECK(mem.check(2, pd, 0x200140, 64, sr::access_remote_read) == sr::mem_status::no_right);
        CHECK(mem.check(2, pd + 1, 0x200140, 64, rw) == sr::mem_status::bad_key);
        CHECK(mem.check(2, pd, 0x201fe0, 64, rw) == ok);   // across a gap: checks pass, no host run
        CHECK(mem.check(2, pd, 0x203fd0, 64, rw) == sr::mem_status::out_of_bounds);

        // reads: the second window serves them, under the guard they were asked for
        const std::byte* out = nullptr;
        CHECK(mem.reference(1, pd, 0x108040, 64, sr::access_remote_read, *guard, out) == ok);
        CHECK(out == read_only + 0x40);
        CHECK(mem.reference(1, pd, 0x10ffc0, 64, sr::access_remote_read, *guard, out) == ok);
        CHECK(out == read_only + 0x7fc0);
        quiet_guard other;
        CHECK(mem.reference(1, pd, 0x108080, 64, sr::access_remote_read, other, out) == ok);
        CHECK(out == nullptr);   // not the guard of this DMA space
        CHECK(mem.reference(2, pd, 0x200110, 64, sr::access_remote_read, *guard, out) == sr::mem_status::no_right);
    }
    // runs kept from pin to pin (a data path's) serve the next pin, until a region or a window goes
    sr::memory::runs kept;
    const std::byte* host = nullptr;
    {
        sr::memory::pin pinned(mem, kept);
        host = dma.readable(iova_base, 1);
        CHECK(placed(mem, 1, pd, 0x100040, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x40}});
    }
    {
        sr::memory::pin pinned(mem, kept);
        CHECK(placed(mem, 1, pd, 0x100100, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x100}});
    }
    REQUIRE(mem.deregister(1));
    linear.base_iova = iova_base + 0x1000;   // the same key, 4 KiB further on
    linear.length = 0x7000;
    mem.register_region(linear);
    {
        sr::memory::pin pinned(mem, kept);
        CHECK(placed(mem, 1, pd, 0x100100, 64, rw, host) == std::pair{ok, std::ptrdiff_t{0x1100}});
    }
    REQUIRE(dma.unmap(iova_base, 0x8000) == 0);   // the window goes: no pin finds it again
    {
        sr::memory::pin pinned(mem, kept);
        CHECK(placed(mem, 1, pd, 0x100100, 64, rw, nullptr) == std::pair{ok, std::ptrdiff_t{-1}});
    }
    {
        sr::memory::pin pinned(mem);
        CHECK(placed(mem, 1, pd, 0x100040, 64, rw, nullptr) == std::pair{ok, std::ptrdiff_t{-1}});
    }
    {
        rig::sim::vfio_user::dma_space::pin view(dma);   // the lock order is the memory pin's own
        CHECK_THROWS_AS(sr::memory::pin(mem), std::invalid_argument);
    }
    mem.deregister(1);
    mem.deregister(2);
    dma.unmap_all();
    ::munmap(mapped, bytes);
    ::close(fd);
}

namespace {

sr::frame* frame_to(sr::port& from, const sr::mac_address& to, std::uint32_t tag) {
    sr::frame* f = from.allocate();
    REQUIRE(f != nullptr);
    std::memcpy(f->bytes.data(), to.data(), 6);
    std::memcpy(f->bytes.data() + 6, from.mac().data(), 6);
    std::memcpy(f->bytes.data() + 12, &tag, 4);
    f->size = 60;
    return f;
}

std::uint32_t tag_of(const sr::frame* f) {
    std::uint32_t t;
    std::memcpy(&t, f->bytes.data() + 12, 4);
    return t;
}

std::vector<std::uint32_t> drain(sr::port& p, clock::time_point now) {
    std::vector<std::uint32_t> tags;
    while (sr::frame* f = p.receive(now)) {
        tags.push_back(tag_of(f));
        p.release(f);
    }
    return tags;
}

}  // namespace

TEST_CASE("the switch delivers a frame to the port owning its destination MAC, and drops unknown ones") {
    sr::wire w(64, 16);
    const sr::mac_address ma{std::byte{2}, {}, {}, {}, {}, std::byte{1}}, mb{std::byte{2}, {}, {}, {}, {}, std::byte{2}};
    auto a = w.attach(ma);
    auto b = w.attach(mb);
    CHECK_THROWS_AS(w.attach(ma), std::invalid_argument);
    const auto now = clock::now();
    a->transmit(frame_to(*a, mb, 1), now);
    a->transmit(frame_to(*a, ma, 2), now);   // to itself
    a->transmit(frame_to(*a, {std::byte{2}, {}, {}, {}, {}, std::byte{9}}, 3), now);
    CHECK(drain(*b, now) == std::vector<std::uint32_t>{1});
    CHECK(drain(*a, now) == std::vector<std::uint32_t>{2});
    CHECK(w.counters().no_route == 1);
    CHECK(w.free_frames() == 64);

    // a full receive queue tail-drops
    for (std::uint32_t i = 0; i < 20; ++i) {
        a->transmit(frame_to(*a, mb, i), now);
    }
    CHECK(b->queued() == 16);
    CHECK(w.counters().overflow == 4);
    CHECK(drain(*b, now).size() == 16);
    CHECK(w.free_frames() == 64);
}

TEST_CASE("the switch is lossless: a full receive queue holds the sender back (PFC), and a queue its owner stopped "
          "draining tail-drops after the pause watchdog") {
    using namespace std::chrono_literals;
    sr::wire w(64, 16);
    const sr::mac_address ma{std::byte{2}, {}, {}, {}, {}, std::byte{1}}, mb{std::byte{2}, {}, {}, {}, {}, std::byte{2}},
        mc{std::byte{2}, {}, {}, {}, {}, std::byte{3}};
    auto a = w.attach(ma);
    auto b = w.attach(mb);
    auto c = w.attach(mc);
    const auto now = clock::now();
    for (std::uint32_t i = 0; i < 20; ++i) {
        a->send(frame_to(*a, mb, i));
    }
    a->send(frame_to(*a, mc, 100));   // behind the held ones: a paused link carries nothing
    a->flush(now);
    CHECK(b->queued() == 16);
    CHECK(c->queued() == 0);
    CHECK(a->paused());
    CHECK(a->allocate() == nullptr);   // the sender builds nothing more while paused
    CHECK(w.counters().overflow == 0);
    CHECK(w.counters().pauses == 1);
    a->flush(now);   // still no room: still held, one pause
    CHECK(w.counters().pauses == 1);
    auto got = drain(*b, now);
    a->flush(now);   // room again: the held frames go, in order
    CHECK_FALSE(a->paused());
    for (std::uint32_t t : drain(*b, now)) {
        got.push_back(t);
    }
    std::vector<std::uint32_t> all(20);
    for (std::uint32_t i = 0; i < 20; ++i) {
        all[i] = i;
    }
    CHECK(got == all);
    CHECK(drain(*c, now) == std::vector<std::uint32_t>{100});
    const auto k = w.counters();
    CHECK(k.transmitted == 21);
    CHECK(k.delivered == 21);
    CHECK(k.overflow == 0);
    CHECK(w.free_frames() == 64);

    // b's owner stops draining: a waits for it pause_watchdog, then what does not fit is dropped
    const auto t1 = now + 1ms;
    for (std::uint32_t i = 0; i < 20; ++i) {
        a->send(frame_to(*a, mb, i));
    }
    a->flush(t1);
    CHECK(a->paused());
    a->flush(t1 + sr::wire::pause_watchdog / 2);
    CHECK(a->paused());
    CHECK(w.counters().overflow == 0);
    a->flush(t1 + sr::wire::pause_watchdog + 1ms);
    CHECK_FALSE(a->paused());
    CHECK(w.counters().overflow == 4);
    CHECK(drain(*b, t1).size() == 16);

    // a slow round is no stopped owner: b looked at its queue after a was held back
    for (std::uint32_t i = 0; i < 20; ++i) {
        a->send(frame_to(*a, mb, i));
    }
    const auto t2 = t1 + 1s;
    a->flush(t2);
    sr::frame* taken = b->receive(t2 + 1ms);   // taken (and its batch), not yet released
    REQUIRE(taken != nullptr);
    b->release(taken);
    CHECK(b->queued() == 15);
    a->flush(t2 + 10 * sr::wire::pause_watchdog);   // room for one more only
    CHECK(a->paused());
    CHECK(w.counters().overflow == 4);
    drain(*b, t2 + 1ms);
    a = nullptr;   // the held frames leave with the port
    CHECK(drain(*b, t2 + 1ms).empty());
    b = nullptr;
    CHECK(w.free_frames() == 64);
}

TEST_CASE("the switch holds a delayed frame until due, and jitter reorders") {
    sr::wire w;
    const sr::mac_address ma{std::byte{2}, {}, {}, {}, {}, std::byte{1}}, mb{std::byte{2}, {}, {}, {}, {}, std::byte{2}};
    auto a = w.attach(ma);
    auto b = w.attach(mb);
    w.set_faults({0, 0, 100us, 0ns});
    const auto t0 = clock::now();
    a->transmit(frame_to(*a, mb, 1), t0);
    CHECK(b->receive(t0 + 99us) == nullptr);
    CHECK(drain(*b, t0 + 100us) == std::vector<std::uint32_t>{1});

    w.set_faults({0, 0, 10us, 50us});
    for (std::uint32_t i = 0; i < 200; ++i) {
        a->transmit(frame_to(*a, mb, i), t0 + std::chrono::nanoseconds(i * 100));
    }
    const auto got = drain(*b, t0 + 1ms);
    REQUIRE(got.size() == 200);
    CHECK(std::set<std::uint32_t>(got.begin(), got.end()).size() == 200);
    CHECK_FALSE(std::is_sorted(got.begin(), got.end()));
}

TEST_CASE("the switch drops and duplicates frames at the configured rates, and a link down loses all") {
    sr::wire w;
    const sr::mac_address ma{std::byte{2}, {}, {}, {}, {}, std::byte{1}}, mb{std::byte{2}, {}, {}, {}, {}, std::byte{2}};
    auto a = w.attach(ma);
    auto b = w.attach(mb);
    b->set_faults({0.10, 0.05, 0ns, 0ns});
    const auto now = clock::now();
    std::size_t got = 0;
    for (std::uint32_t i = 0; i < 10000; ++i) {
        a->transmit(frame_to(*a, mb, i), now);
        got += drain(*b, now).size();
    }
    const auto c = w.counters();
    CHECK(c.dropped > 800);
    CHECK(c.dropped < 1200);
    CHECK(c.duplicated > 350);
    CHECK(c.duplicated < 650);
    CHECK(got == 10000 - c.dropped + c.duplicated);

    b->set_faults({});
    a->set_link(false);
    a->transmit(frame_to(*a, mb, 1), now);
    b->transmit(frame_to(*b, ma, 2), now);
    CHECK(drain(*a, now).empty());
    CHECK(drain(*b, now).empty());
    a->set_link(true);
    a->transmit(frame_to(*a, mb, 3), now);
    CHECK(drain(*b, now) == std::vector<std::uint32_t>{3});
    CHECK(w.free_frames() == sr::wire::default_pool_frames);
}

TEST_CASE("the engine drops silently a frame with a bad ICRC, for another GID, or for an unknown queue pair") {
    sr::wire w;
    function fa(w, 1, 1 << 20), fb(w, 2, 1 << 20);
    fb.reg(1, 0, 1 << 20, sr::access_local_write);
    auto& b = fb.make_qp(0x20);
    link_options o;
    connect_one(b, fb, b, fb, 1, o.a_psn, o);   // b takes PSN a_psn on; its peer does not matter here
    REQUIRE(b.post_receive(receive(1, 1, function::va(0), 64)));
    rig::roce::route route;
    route.src_mac = fa.port->mac();
    route.dst_mac = fb.port->mac();
    route.src_gid = fa.gid;
    route.dst_gid = fb.gid;
    rig::roce::transport t;
    t.op = rig::roce::opcode::send_only;
    t.dest_qp = 0x20;
    t.psn = o.a_psn;
    std::array<std::byte, 16> payload;
    payload.fill(std::byte{0x5a});
    auto send = [&](const rig::roce::route& r, const rig::roce::transport& x, bool corrupt) {
        sr::frame* f = fa.port->allocate();
        REQUIRE(f != nullptr);
        f->size = static_cast<std::uint32_t>(rig::roce::encode(r, x, payload, f->bytes));
        if (corrupt) {
            f->bytes[f->size - 10] ^= std::byte{1};   // a payload byte: only the ICRC notices
        }
        fa.port->transmit(f, clock::now());
        fb.eng->poll(clock::now());
    };
    send(route, t, true);
    auto other = route;
    other.dst_gid[15] = std::byte{9};
    send(other, t, false);
    auto nobody = t;
    nobody.dest_qp = 0x999;
    send(route, nobody, false);
    const auto c = fb.eng->counters();
    CHECK(c.frames_received == 3);
    CHECK(c.not_roce == 1);
    CHECK(c.not_for_us == 1);
    CHECK(c.no_qp == 1);
    CHECK(b.counters().packets_received == 0);
    CHECK(fb.host[0] == std::byte{0});
    // the same frame, whole, lands
    send(route, t, false);
    const auto r = take_all(b, sr::completion_side::receive);
    REQUIRE(r.size() == 1);
    CHECK(r[0].byte_len == 16);
    CHECK(fb.host[0] == std::byte{0x5a});
}

TEST_CASE("a DMA window's pages are all present once mapped, as VFIO pins them: the first access takes no page fault") {
    constexpr std::size_t bytes = 4 << 20;
    const int fd = ::memfd_create("rig-populate-test", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>(bytes)) == 0);
    void* client = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    REQUIRE(client != MAP_FAILED);
    std::memset(client, 0x5a, bytes);             // the client's pages exist
    std::vector<std::byte> out(bytes, std::byte{1});  // and the destination's
    const auto minor_faults = [] {
        rusage u{};
        REQUIRE(::getrusage(RUSAGE_THREAD, &u) == 0);
        return u.ru_minflt;
    };
    // The same copies from a mapping MAP_POPULATE made, into a buffer of their own: what 4 MiB
    // of copies cost in faults besides the model's. 0 in a plain build; under AddressSanitizer
    // the first reads of fresh shadow pages (a byte per 8 of the source and of the destination)
    // fault too, 128 here (issue 20: the test adapts rather than skips)
    const long control = [&] {
        void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
        REQUIRE(m != MAP_FAILED);
        std::vector<std::byte> into(bytes, std::byte{1});
        const long before = minor_faults();
        for (std::size_t at = 0; at < bytes; at += 4096) {
            std::memcpy(into.data() + at, static_cast<const std::byte*>(m) + at, 4096);
        }
        const long n = minor_faults() - before;
        ::munmap(m, bytes);
        return n;
    }();
    {
        rig::sim::vfio_user::dma_space dma;
        REQUIRE(dma.map(iova_base, bytes, true, true, fd, 0) == 0);
        const long before = minor_faults();
        for (std::size_t at = 0; at < bytes; at += 4096) {
            REQUIRE(dma.read(iova_base + at, std::span(out).subspan(at, 4096)));
        }
        // first touch of each page by the model would fault (shmem maps 16 pages per fault at
        // best: 64 or more faults for 4 MiB). Under ThreadSanitizer every read is also recorded
        // in shadow cells, 4 shadow bytes per byte read (compiler-rt tsan_defs.h: kShadowCnt 4 of
        // kShadowSize 8 per kShadowCell 8), each shadow page faulting once: 4096 here, which the
        // control's intercepted memcpy does not show. Those are the sanitizer's own.
#if defined(__SANITIZE_THREAD__)
        constexpr long shadow_faults = static_cast<long>(bytes * 4 / 4096);
#else
        constexpr long shadow_faults = 0;
#endif
        CHECK(minor_faults() - before <= control + shadow_faults + 2);
        CHECK(out[bytes - 1] == std::byte{0x5a});
    }
    ::munmap(client, bytes);
    ::close(fd);
}
