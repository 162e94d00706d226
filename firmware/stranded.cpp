#include "firmware/stranded.hpp"

#include <utility>

namespace rig::firmware {

namespace {
// Outlives every NIC: memory a silent device may still write is never returned to the
// allocator, not even when the object that stranded it is destroyed.
std::vector<driver::dma_memory>& process_keeper() {
    static auto* keeper = new std::vector<driver::dma_memory>();  // intentionally never freed
    return *keeper;
}
std::mutex keeper_lock;
}  // namespace

stranded_memory::~stranded_memory() {
    std::scoped_lock hold(keeper_lock);
    for (auto& m : _memory) {
        process_keeper().push_back(std::move(m));
    }
}

void stranded_memory::keep(std::string what, std::uint64_t iova, std::size_t bytes, driver::dma_memory memory) {
    std::scoped_lock hold(_lock);
    _regions.push_back(stranded_region{std::move(what), iova, bytes});
    if (memory) {
        _memory.push_back(std::move(memory));
    }
}

std::vector<stranded_region> stranded_memory::report() const {
    std::scoped_lock hold(_lock);
    return _regions;
}

std::size_t stranded_memory::bytes() const {
    std::scoped_lock hold(_lock);
    std::size_t n = 0;
    for (const auto& r : _regions) {
        n += r.bytes;
    }
    return n;
}

}  // namespace rig::firmware
