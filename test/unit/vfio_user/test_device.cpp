#include "test_device.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace rig::test {

namespace vu = rig::sim::vfio_user;

namespace {
void put32(std::byte* p, std::uint32_t v) { std::memcpy(p, &v, 4); }
std::uint32_t get32(const std::byte* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
}  // namespace

test_device::test_device(std::uint16_t pci_vendor, std::uint16_t pci_device) : _bar0(bar0_size) {
    put32(_config.data(), pci_vendor | (std::uint32_t{pci_device} << 16));
    put32(_config.data() + 8, 0x02000001);   // class 0x020000 (Ethernet), revision 1
    put32(_regs.data() + reg::id, reg::id_value);
}

vu::region_desc test_device::region(unsigned index) {
    vu::region_desc d;
    if (index == vu::config_region) {
        d.size = _config.size();
        d.readable = d.writable = true;
    } else if (index == 0) {
        d.size = bar0_size;
        d.readable = d.writable = true;
        d.fd = _bar0.fd();
        d.memory = _bar0.data();
        d.shared = {{0x1000, 0x1000}, {0x2000, 0x2000}};
    } else if (index == 2) {
        d.size = 4096;
        d.readable = d.writable = true;
    }
    return d;
}

std::uint32_t test_device::irq_count(vu::irq kind) {
    return kind == vu::irq::intx ? 1 : kind == vu::irq::msix ? 4 : 0;
}

std::uint32_t test_device::reg32(std::uint32_t off) const { return get32(_regs.data() + off); }

std::uint32_t test_device::scratch() const {
    std::lock_guard g(_lock);
    return reg32(reg::scratch);
}

bool test_device::read(unsigned region, std::uint64_t offset, std::span<std::byte> out) {
    std::lock_guard g(_lock);
    if (region == vu::config_region) {
        std::memcpy(out.data(), _config.data() + offset, out.size());
        return true;
    }
    if (region == 2) {
        std::fill(out.begin(), out.end(), std::byte{0xab});
        return true;
    }
    if (region != 0 || offset + out.size() > _regs.size()) {
        return false;   // BAR0 beyond page 0 is shared and never trapped
    }
    if (_server != nullptr) {
        put32(_regs.data() + reg::windows, static_cast<std::uint32_t>(_server->dma().window_count()));
        put32(_regs.data() + reg::faults, static_cast<std::uint32_t>(_server->dma().fault_count()));
        put32(_regs.data() + reg::served, static_cast<std::uint32_t>(_server->clients_served()));
    }
    put32(_regs.data() + reg::peek, get32(_bar0.data() + 0x1000));
    std::memcpy(out.data(), _regs.data() + offset, out.size());
    return true;
}

bool test_device::write(unsigned region, std::uint64_t offset, std::span<const std::byte> in) {
    std::unique_lock g(_lock);
    if (region == vu::config_region) {
        // only the command register and the scratch dword are writable
        for (std::size_t i = 0; i < in.size(); ++i) {
            const std::uint64_t at = offset + i;
            if (at == 4 || at == 5 || (at >= 0x40 && at < 0x44)) {
                _config[at] = in[i];
            }
        }
        return true;
    }
    if (region == 2) {
        return true;
    }
    if (region != 0 || offset + in.size() > _regs.size()) {
        return false;
    }
    if (offset == reg::id || offset == reg::dma_status) {
        return true;   // read-only
    }
    std::memcpy(_regs.data() + offset, in.data(), in.size());
    if (in.size() == 4) {
        const std::uint32_t v = get32(in.data());
        if (offset == reg::stall_ms) {
            g.unlock();
            std::this_thread::sleep_for(std::chrono::milliseconds(std::min<std::uint32_t>(v, 10000)));
            return true;
        }
        act(static_cast<std::uint32_t>(offset), v);
    }
    return true;
}

// with _lock held
void test_device::act(std::uint32_t off, std::uint32_t value) {
    if (_server == nullptr) {
        return;
    }
    if (off == reg::dma_go) {
        std::uint64_t src = 0;
        std::uint64_t dst = 0;
        std::memcpy(&src, _regs.data() + reg::dma_src, 8);
        std::memcpy(&dst, _regs.data() + reg::dma_dst, 8);
        std::vector<std::byte> bounce(reg32(reg::dma_len));
        const bool ok = _server->dma().read(src, bounce) && _server->dma().write(dst, bounce);
        put32(_regs.data() + reg::dma_status, ok ? 1 : 2);
        _server->trigger(vu::irq::msix, reg32(reg::dma_vector));
    } else if (off == reg::raise_msix) {
        _server->trigger(vu::irq::msix, value);
    } else if (off == reg::raise_intx) {
        _server->trigger(vu::irq::intx, 0);
    } else if (off == reg::poke) {
        put32(_bar0.data() + 0x1004, value);
    }
}

void test_device::reset() {
    std::lock_guard g(_lock);
    std::fill(_regs.begin(), _regs.end(), std::byte{0});
    put32(_regs.data() + reg::id, reg::id_value);
    _config[4] = _config[5] = std::byte{0};
    std::fill(_config.begin() + 0x40, _config.begin() + 0x44, std::byte{0});
}

}  // namespace rig::test
