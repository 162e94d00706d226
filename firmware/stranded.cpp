#include "firmware/stranded.hpp"

#include <utility>

namespace rig::firmware {

namespace {
std::mutex keeper_lock;
}  // namespace

void keep_for_process(std::shared_ptr<void> owner) {
    // Outlives every NIC, and the static destructors too: never freed, on purpose.
    static auto* keeper = new std::vector<std::shared_ptr<void>>();
    std::scoped_lock hold(keeper_lock);
    keeper->push_back(std::move(owner));
}

stranded_memory::~stranded_memory() {
    for (auto& m : _memory) {
        keep_for_process(std::make_shared<driver::dma_memory>(std::move(m)));
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
