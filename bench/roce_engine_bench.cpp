// bench-roce-engine: the device model's RC engine (sim/roce) between two functions on the
// in-process switch, both engines polled by this one thread: the message rate of 64-byte RDMA
// WRITEs, and the bandwidth of 64 KiB RDMA WRITEs (MTU 4096) against single-core memcpy of the
// same blocks measured in the same run. Prints figures, asserts nothing.
//
//   meson compile -C build bench-roce-engine
//   (or: build/bench/roce-engine-bench [seconds per figure] [rate|bandwidth])
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sim/roce/engine.hpp"
#include "sim/roce/memory.hpp"
#include "sim/roce/rc_qp.hpp"
#include "sim/roce/wire.hpp"
#include "sim/vfio_user/dma_space.hpp"

namespace {

namespace sr = rig::sim::roce;
using clk = std::chrono::steady_clock;

constexpr std::uint64_t iova = 0x1000'0000, bytes = 64 << 20;
constexpr std::uint32_t key = 1, pd = 1;

[[noreturn]] void die(const std::string& why) {
    std::fprintf(stderr, "roce-engine-bench: %s\n", why.c_str());
    std::exit(1);
}

struct function {
    int fd;
    std::byte* host;
    rig::sim::vfio_user::dma_space dma;
    sr::memory mem{dma};
    std::unique_ptr<sr::port> port;
    rig::roce::gid gid{};
    std::unique_ptr<sr::engine> eng;
    std::unique_ptr<sr::rc_qp> qp;

    function(sr::wire& w, std::uint8_t id) {
        fd = ::memfd_create("roce-bench", MFD_CLOEXEC);
        if (fd < 0 || ::ftruncate(fd, bytes) != 0) {
            die("memfd");
        }
        host = static_cast<std::byte*>(::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
        if (host == MAP_FAILED || dma.map(iova, bytes, true, true, fd, 0) != 0) {
            die("mapping");
        }
        std::memset(host, id, bytes);
        port = w.attach({std::byte{2}, {}, {}, {}, {}, std::byte{id}});
        port->guard_unmaps(dma);   // payload by reference (one copy); this one thread never polls while a window goes
        gid[10] = gid[11] = std::byte{0xff};
        gid[12] = std::byte{10};
        gid[15] = std::byte{id};
        eng = std::make_unique<sr::engine>(*port, gid);
        sr::region r;
        r.key = key;
        r.pd = pd;
        r.start = iova;
        r.length = bytes;
        r.rights = sr::access_local_write | sr::access_remote_write | sr::access_remote_read;
        r.base_iova = iova;
        mem.register_region(r);
        sr::qp_config c;
        c.qpn = id;
        c.pd = pd;
        c.mac = port->mac();
        c.gid = gid;
        c.sq_size = c.rq_size = 1024;
        qp = std::make_unique<sr::rc_qp>(mem, *port, c);
        eng->add(*qp);
    }
    ~function() {
        eng->remove(*qp);
        qp.reset();
        eng.reset();
        port.reset();
        dma.unmap_all();
        ::munmap(host, bytes);
        ::close(fd);
    }
    // As a NIC model's pass does (sim/mlx5/datapath.cpp): the region table and the DMA view
    // locked once around the engine's poll, not once per access.
    void poll(clk::time_point now) {
        sr::memory::pin pinned(mem);
        eng->poll(now);
    }
    void connect(const function& peer, std::uint32_t mtu) {
        qp->to_init();
        sr::path p;
        p.dest_qpn = peer.qp->qpn();
        p.dest_mac = peer.port->mac();
        p.dest_gid = peer.gid;
        p.mtu = mtu;
        p.rq_psn = 1;
        qp->to_rtr(p);
        sr::send_params s;
        s.sq_psn = 1;
        qp->to_rts(s);
    }
};

// WRITEs of `size` bytes a -> b for `seconds`, one in 32 signaled, the ring kept full: messages/s.
// Small messages cycle through 1 MiB (cache-warm, every page touched in the warm-up: the figure
// is the engine's, not first-touch page faults); large ones through half the memory, as memcpy.
double write_rate(function& a, function& b, std::uint32_t size, double seconds) {
    const std::uint64_t span = size < 4096 ? std::uint64_t{1} << 20 : bytes / 2;
    sr::send_request r;
    r.op = sr::work_op::write;
    r.sge_count = 1;
    r.rkey = key;
    std::uint64_t posted = 0, done = 0;
    sr::completion c;
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    auto now = start;
    while (now < stop) {
        while (a.qp->send_room() > 0) {
            const std::uint64_t at = (posted * size) % span;
            r.index = static_cast<std::uint32_t>(posted);
            r.signaled = posted % 32 == 31;
            r.sg[0] = {.va = iova + at, .key = key, .length = size};
            r.remote_va = iova + bytes / 2 + at;
            if (!a.qp->post_send(r)) {
                break;
            }
            ++posted;
        }
        now = clk::now();
        a.poll(now);
        b.poll(now);
        while (a.qp->take(sr::completion_side::send, c)) {
            if (c.status != sr::completion_status::success) {
                die("a WRITE failed: " + std::string(sr::to_string(c.status)));
            }
            done = c.index + 1ull;
        }
    }
    return static_cast<double>(done) / std::chrono::duration<double>(clk::now() - start).count();
}

double memcpy_rate(function& a, std::uint32_t size, double seconds) {
    std::uint64_t n = 0;
    const auto start = clk::now();
    const auto stop = start + std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(seconds));
    while (clk::now() < stop) {
        for (int i = 0; i < 64; ++i, ++n) {
            const std::uint64_t at = (n * size) % (bytes / 2);
            std::memcpy(a.host + bytes / 2 + at, a.host + at, size);
        }
    }
    return static_cast<double>(n) / std::chrono::duration<double>(clk::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
    const std::string only = argc > 2 ? argv[2] : "";   // "rate" or "bandwidth": one figure
    {
        sr::wire w;
        function a(w, 1), b(w, 2);
        a.connect(b, 4096);
        b.connect(a, 4096);
        if (only != "bandwidth") {
        write_rate(a, b, 64, seconds / 4);   // warm-up
        const double rate = write_rate(a, b, 64, seconds);
        std::printf("64 B RDMA WRITE, one thread polling both engines: %.3f M messages/s (%.0f ns each)\n", rate / 1e6,
                    1e9 / rate);
        }
        if (only != "rate") {
        const double wr = write_rate(a, b, 64 << 10, seconds) * (64 << 10);
        const double mc = memcpy_rate(a, 64 << 10, seconds) * (64 << 10);
        std::printf("64 KiB RDMA WRITE, MTU 4096: %.2f GB/s; memcpy of the same blocks: %.2f GB/s (%.0f %%)\n", wr / 1e9,
                    mc / 1e9, 100 * wr / mc);
        }
    }
    return 0;
}
