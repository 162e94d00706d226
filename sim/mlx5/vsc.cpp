// The vendor-specific capability's gateway (vsc.hpp; kernel lib/pci_vsc.c).
#include "sim/mlx5/vsc.hpp"

namespace rig::sim::mlx5 {

namespace {
constexpr std::size_t ctrl = 0x04;       // VSC_CTRL_OFFSET
constexpr std::size_t counter = 0x08;    // VSC_COUNTER_OFFSET
constexpr std::size_t semaphore = 0x0c;  // VSC_SEMAPHORE_OFFSET
constexpr std::size_t address = 0x10;    // VSC_ADDR_OFFSET
constexpr std::size_t data = 0x14;       // VSC_DATA_OFFSET
constexpr std::uint32_t space_mask = 0xffff;     // VSC_SPACE_BIT_OFFS 0, LEN 16
constexpr std::uint32_t address_mask = 0x3fffffff;  // VSC_ADDR_BIT_LEN 30
constexpr std::uint32_t syndrome_bit = 1u << 30;    // VSC_SYND_BIT_OFFS
constexpr std::uint32_t flag_bit = 1u << 31;        // VSC_FLAG_BIT_OFFS
}  // namespace

std::uint32_t vsc_gateway::read(std::size_t reg) {
    switch (reg) {
    case ctrl: return _space;  // status 31:29 = 0 and size valid 0: no space is supported
    case counter:
        // never 0: the kernel frees the semaphore by writing 0 (MLX5_VSC_UNLOCK), so a lock
        // attempt with value 0 would "succeed" on a free semaphore
        if (++_counter == 0) {
            _counter = 1;
        }
        return _counter;
    case semaphore: return _semaphore;
    case address: return _address;
    case data: return _data;
    default: return 0;
    }
}

void vsc_gateway::write(std::size_t reg, std::uint32_t value) {
    switch (reg) {
    case ctrl: _space = value & space_mask; break;
    case semaphore:
        if (value == 0 || _semaphore == 0) {
            _semaphore = value;
        }
        break;
    case address: {
        // no space is supported: the access completes at once, failed (syndrome), data 0
        const std::uint32_t at = value & address_mask;
        if ((value & flag_bit) == 0) {
            _data = 0;
            _address = flag_bit | syndrome_bit | ((at + 4) & address_mask);
        } else {
            _address = syndrome_bit | at;
        }
        break;
    }
    case data: _data = value; break;
    default: break;
    }
}

}  // namespace rig::sim::mlx5
