// Mapped memory of firmware objects (mapped_memory.hpp).
#include "firmware/mapped_memory.hpp"

#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "abi/bits.hpp"
#include "firmware/log.hpp"

namespace rig::firmware {

namespace {

// Memory that a live object still lends the device when the object is dropped without
// destroy(): never returned (the device may still write it).
void keep_forever(driver::dma_memory memory) {
    static auto* keeper = new std::vector<driver::dma_memory>();  // intentionally never freed
    static std::mutex lock;
    std::scoped_lock hold(lock);
    keeper->push_back(std::move(memory));
}

}  // namespace

std::expected<mapped_memory, std::string> mapped_memory::create(driver::function& fn, std::size_t bytes, std::string what) {
    const std::size_t rounded = (bytes + driver::dma_memory::small_page - 1) & ~(driver::dma_memory::small_page - 1);
    auto mem = driver::dma_memory::allocate(rounded, driver::page_choice::small_only);
    if (!mem) {
        return std::unexpected(what + ": " + mem.error().message);
    }
    // Every page written once now, by this process: a ring or CQ's first entries then meet no
    // first touch, which a host under shadow paging charges 4.5-6 us a page even when the page
    // is mapped (docs/architecture.md "First touches"). bnxt zeroes its rings the same way
    // (firmware/bnxt/device.cpp); the memfd's pages are zero already, so no byte changes.
    std::memset(mem->data(), 0, mem->size());
    auto iova = fn.dma_map(*mem, 0, mem->size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(what + ": " + iova.error().message);
    }
    mapped_memory m;
    m._memory = std::move(*mem);
    m._iova = *iova;
    m._size = m._memory.size();
    m._mapped = true;
    m._what = std::move(what);
    return m;
}

mapped_memory::mapped_memory(mapped_memory&& o) noexcept { *this = std::move(o); }

mapped_memory& mapped_memory::operator=(mapped_memory&& o) noexcept {
    if (this != &o) {
        if (_mapped) {
            keep_forever(std::move(_memory));
        }
        _memory = std::move(o._memory);
        _iova = std::exchange(o._iova, 0);
        _size = std::exchange(o._size, 0);
        _mapped = std::exchange(o._mapped, false);
        _what = std::move(o._what);
    }
    return *this;
}

mapped_memory::~mapped_memory() {
    if (_mapped) {
        log().warn("{} at {} dropped while the device may use it: kept mapped for the process's life", _what,
                   abi::hex(_iova));
        keep_forever(std::move(_memory));
    }
}

void mapped_memory::release(driver::function& fn) {
    if (_mapped) {
        if (auto r = fn.dma_unmap(_iova, _size); !r) {
            log().warn("{}: unmap at {} failed ({}); memory kept", _what, abi::hex(_iova), r.error().message);
            keep_forever(std::move(_memory));
        }
        _mapped = false;
    }
    _memory = {};
}

void mapped_memory::strand(stranded_memory& stranded) {
    if (_mapped) {
        stranded.keep(_what, _iova, _size, std::move(_memory));
        _mapped = false;
    }
    _memory = {};
}

}  // namespace rig::firmware
