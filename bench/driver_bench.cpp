// bench-driver: the cost of mapping and unmapping 2 MiB of DMA memory through the vfio-user
// back end (driver's client -> the model's server, which mmaps the memfd), with 4 KiB and with
// 2 MiB pages. The kernel VFIO figures come from the VM suite (test/vm/), which prints
// VFIO_EDU_DMA_COST lines for the group and iommufd paths.
//
//   meson compile -C build bench-driver   (or: build/bench/driver-bench [iterations])
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "driver/function.hpp"
#include "sim/vfio_user/server.hpp"

namespace {

namespace sim = rig::sim::vfio_user;

// The least a device can be: a configuration space and nothing else.
class bare_device final : public sim::device {
public:
    sim::region_desc region(unsigned index) override {
        sim::region_desc d;
        if (index == sim::config_region) {
            d.size = 256;
            d.readable = d.writable = true;
        }
        return d;
    }
    std::uint32_t irq_count(sim::irq) override { return 0; }
    bool read(unsigned, std::uint64_t offset, std::span<std::byte> out) override {
        for (std::size_t i = 0; i < out.size(); ++i) {
            out[i] = _config[offset + i];
        }
        return true;
    }
    bool write(unsigned, std::uint64_t offset, std::span<const std::byte> in) override {
        for (std::size_t i = 0; i < in.size(); ++i) {
            _config[offset + i] = in[i];
        }
        return true;
    }
    void reset() override {}

private:
    std::byte _config[256] = {};
};

void measure(rig::driver::function& f, rig::driver::page_choice pages, const char* name, int iterations) {
    auto mem = rig::driver::dma_memory::allocate(2 << 20, pages);
    if (!mem) {
        std::printf("  %-9s unavailable (%s)\n", name, mem.error().message.c_str());
        return;
    }
    using clock = std::chrono::steady_clock;
    clock::duration map{}, unmap{};
    for (int i = 0; i < iterations; ++i) {
        const auto t0 = clock::now();
        auto iova = f.dma_map(*mem, 0, mem->size(), rig::driver::dma_access::read_write);
        const auto t1 = clock::now();
        if (!iova) {
            std::printf("  %-9s dma_map failed: %s\n", name, iova.error().message.c_str());
            return;
        }
        if (auto r = f.dma_unmap(*iova, mem->size()); !r) {
            std::printf("  %-9s dma_unmap failed: %s\n", name, r.error().message.c_str());
            return;
        }
        const auto t2 = clock::now();
        map += t1 - t0;
        unmap += t2 - t1;
    }
    const auto us = [&](clock::duration d) {
        return std::chrono::duration<double, std::micro>(d).count() / iterations;
    };
    std::printf("  %-9s map %7.1f us  unmap %7.1f us  map+unmap %7.1f us per 2 MiB\n", name,
                us(map), us(unmap), us(map + unmap));
}

}  // namespace

int main(int argc, char** argv) {
    const int iterations = argc > 1 ? std::atoi(argv[1]) : 2000;
    const std::string path = "/tmp/rig-bench-driver-" + std::to_string(getpid()) + ".sock";
    bare_device dev;
    auto srv = sim::server::create(path, dev);
    if (!srv) {
        std::fprintf(stderr, "bench-driver: %s\n", srv.error().c_str());
        return 1;
    }
    (*srv)->start();
    auto f = rig::driver::open("vfio-user:" + path);
    if (!f) {
        std::fprintf(stderr, "bench-driver: %s\n", f.error().message.c_str());
        return 1;
    }
    std::printf("bench-driver: vfio-user DMA_MAP/DMA_UNMAP of 2 MiB, %d iterations\n", iterations);
    measure(**f, rig::driver::page_choice::small_only, "4k pages", iterations);
    measure(**f, rig::driver::page_choice::huge_only, "2m pages", iterations);
    (*f)->release();
    return 0;
}
