// region: DMA memory mapped for the NIC and registered by the family's control plane under one
// key, and its release.
#include "rig/region.hpp"

#include "qp/state.hpp"  // first of the internal headers: see qp/mlx5/data_path.hpp

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "abi/bits.hpp"
#include "qp/control.hpp"
#include "qp/nic_state.hpp"
#include "rig/nic.hpp"

namespace rig {

// ---- the handle -----------------------------------------------------------------------------

const detail::region_state& region::live(const char* call) const {
    if (_state == nullptr) {
        misuse(std::string(call) + ": an empty region");
    }
    if (!_state->registered) {
        misuse(std::string(call) + ": the region is deregistered");
    }
    return *_state;
}

std::byte* region::data() const { return live("region::data").memory.data(); }
std::size_t region::size() const { return live("region::size").bytes; }
rig::access region::access() const { return live("region::access").rights; }
std::uint32_t region::key() const { return live("region::key").key; }
std::uint64_t region::address() const { return live("region::address").iova; }
bool region::registered() const noexcept { return _state != nullptr && _state->registered; }

::rig::remote region::remote(std::size_t at) const {
    const detail::region_state& s = live("region::remote");
    if (at > s.bytes) {
        misuse("region::remote: offset " + std::to_string(at) + " is past the region's " +
               std::to_string(s.bytes) + " bytes");
    }
    return {s.iova + at, s.key};
}

result<void> region::deregister() {
    live("region::deregister");
    return _nic->deregister(*_state);
}

// ---- the NIC's side -------------------------------------------------------------------------

result<region> nic::allocate(std::size_t bytes, access a) {
    if (bytes == 0) {
        misuse("allocate: 0 bytes");
    }
    auto memory = driver::dma_memory::allocate(bytes);
    if (!memory) {
        return std::unexpected(detail::os_error("allocate", memory.error()));
    }
    // The region is what was asked for in whole 4 KiB pages, whatever pages back it: its key
    // reaches no further (a peer cannot touch the rest of a 2 MiB page), and its bounds are
    // the ones misuse is judged by.
    constexpr std::size_t page = driver::dma_memory::small_page;
    auto s = std::make_unique<detail::region_state>();
    s->bytes = std::min((bytes + page - 1) / page * page, memory->size());
    s->rights = a;
    s->memory = std::move(*memory);
    return add_region(std::move(s), "allocate");
}

result<region> detail::nic_access::register_memory(nic& n, driver::dma_memory memory, access a) {
    if (!memory) {
        misuse("register_memory: empty memory");
    }
    auto s = std::make_unique<detail::region_state>();
    s->bytes = memory.size();
    s->rights = a;
    s->memory = std::move(memory);
    return n.add_region(std::move(s), "register_memory");
}

result<region> nic::register_memory(const app_memory& memory, access a) {
    constexpr std::uintptr_t page = driver::dma_memory::small_page;
    if (memory.bytes.empty()) {
        misuse("register_memory: empty memory");
    }
    if (reinterpret_cast<std::uintptr_t>(memory.bytes.data()) % page != 0 || memory.bytes.size() % page != 0 ||
        memory.fd_offset % page != 0) {
        misuse("register_memory: " + std::to_string(memory.bytes.size()) + " bytes at " +
               abi::hex(reinterpret_cast<std::uintptr_t>(memory.bytes.data())) + " (file offset " +
               std::to_string(memory.fd_offset) + ") are not whole 4 KiB pages");
    }
    auto s = std::make_unique<detail::region_state>();
    s->bytes = memory.bytes.size();
    s->rights = a;
    s->memory = driver::dma_memory::borrow(memory.bytes.data(), memory.bytes.size(), memory.fd, memory.fd_offset);
    return add_region(std::move(s), "register_memory");
}

result<region> nic::add_region(std::unique_ptr<detail::region_state> s, const char* call) {
    std::lock_guard g(_s->lock);
    if (_s->closed) {
        misuse(std::string(call) + ": the NIC is closed");
    }
    auto iova = _s->fn->dma_map(s->memory, 0, s->memory.size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(detail::os_error(call, iova.error()));
    }
    s->iova = *iova;
    if (auto r = _s->control->register_memory(*s); !r) {
        if (s->memory) {
            // still ours (not stranded by the control plane): unmapped, and freed with `s`
            static_cast<void>(_s->fn->dma_unmap(s->iova, s->memory.size()));
        }
        return std::unexpected(detail::named(call, std::move(r.error())));
    }
    s->registered = true;
    _s->regions.push_back(std::move(s));
    return region(this, _s->regions.back().get());
}

result<void> nic::deregister(detail::region_state& s) {
    std::lock_guard g(_s->lock);
    if (!s.registered) {
        misuse("deregister: the region is deregistered");
    }
    return release_region(s);
}

result<void> nic::release_region(detail::region_state& s) {
    if (auto r = _s->control->deregister_memory(s); !r) {
        if (!s.memory) {
            s.registered = false;  // stranded: the firmware may still reach it, kept, never reused
        }
        return std::unexpected(detail::named("deregister", std::move(r.error())));
    }
    s.registered = false;
    result<void> out;
    if (auto r = _s->fn->dma_unmap(s.iova, s.memory.size()); !r) {   // mapped whole
        out = std::unexpected(detail::os_error("deregister", r.error()));
    }
    s.memory = driver::dma_memory();
    return out;
}

}  // namespace rig
