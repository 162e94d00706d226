// region: DMA memory mapped for the NIC and registered under an MTT memory key (reference/
// mlx5.md §1.3), and its release.
#include "qp/region.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "abi/bits.hpp"
#include "qp/mlx5/qp_state.hpp"
#include "qp/nic.hpp"

namespace rig {

namespace fw = firmware::mlx5;

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
std::uint32_t region::key() const { return live("region::key").key.lkey(); }
std::uint64_t region::address() const { return live("region::address").iova; }
bool region::registered() const noexcept { return _state != nullptr && _state->registered; }

::rig::remote region::remote(std::size_t at) const {
    const detail::region_state& s = live("region::remote");
    if (at > s.bytes) {
        misuse("region::remote: offset " + std::to_string(at) + " is past the region's " +
               std::to_string(s.bytes) + " bytes");
    }
    return {s.iova + at, s.key.rkey()};
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
        return std::unexpected(os_error("allocate", memory.error()));
    }
    return add_region(std::move(*memory), a, "allocate");
}

result<region> nic::register_memory(driver::dma_memory memory, access a) {
    if (!memory) {
        misuse("register_memory: empty memory");
    }
    return add_region(std::move(memory), a, "register_memory");
}

result<region> nic::add_region(driver::dma_memory memory, access a, const char* call) {
    std::lock_guard g(_lock);
    if (_closed) {
        misuse(std::string(call) + ": the NIC is closed");
    }
    auto s = std::make_unique<detail::region_state>();
    s->bytes = memory.size();
    s->rights = a;
    auto iova = _fn->dma_map(memory, 0, memory.size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(os_error(call, iova.error()));
    }
    // Local write always: receives and reads land in the region (rdma-core's reg_mr with
    // IBV_ACCESS_LOCAL_WRITE); remote rights as asked.
    const fw::mkey_access rights{.local_write = true,
                                 .remote_read = allows(a, access::remote_read),
                                 .remote_write = allows(a, access::remote_write)};
    auto key = fw::mkey::create(commands(), *_pd, *iova, memory.size(), rights, by());
    if (!key) {
        note(key.error());
        if (_hca->failed()) {
            // The firmware may have made the key before it stopped answering: the memory stays.
            _hca->stranded_registry().keep("region (CREATE_MKEY unanswered)", *iova, memory.size(),
                                           std::move(memory));
        } else {
            static_cast<void>(_fn->dma_unmap(*iova, memory.size()));
        }
        return std::unexpected(firmware_error(call, key.error()));
    }
    s->memory = std::move(memory);
    s->iova = *iova;
    s->key = *key;
    s->registered = true;
    _regions.push_back(std::move(s));
    return region(this, _regions.back().get());
}

result<void> nic::deregister(detail::region_state& s) {
    std::lock_guard g(_lock);
    if (!s.registered) {
        misuse("deregister: the region is deregistered");
    }
    return release_region(s);
}

result<void> nic::release_region(detail::region_state& s) {
    if (auto r = s.key.destroy(commands(), by()); !r) {
        note(r.error());
        if (!_hca->failed()) {
            return std::unexpected(firmware_error("deregister", r.error()));  // still registered
        }
        // The firmware may still reach the memory through the key: kept, never reused.
        s.registered = false;
        _hca->stranded_registry().keep("region key " + abi::hex(s.key.lkey()), s.iova, s.bytes,
                                       std::move(s.memory));
        return std::unexpected(firmware_error("deregister", r.error()));
    }
    s.registered = false;
    result<void> out;
    if (auto r = _fn->dma_unmap(s.iova, s.bytes); !r) {
        out = std::unexpected(os_error("deregister", r.error()));
    }
    s.memory = driver::dma_memory();
    return out;
}

}  // namespace rig
