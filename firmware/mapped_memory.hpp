#pragma once
// DMA memory a firmware object lends the device (a queue's ring, a page list, a side buffer),
// for both families' object layers (firmware/mlx5/objects.hpp, firmware/bnxt/objects.hpp). Its
// fate follows what the firmware can still do with it:
//  - release(): the firmware let go of it (a destroy succeeded, a create was refused): unmapped
//    and freed;
//  - strand(): the firmware may still name it (a timeout, a dead function): handed to the
//    stranded registry (firmware/stranded.hpp), never freed;
//  - dropped while mapped: kept mapped for the life of the process, with a warning (the device
//    may still write it).
#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>

#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware {

class mapped_memory {
public:
    // bytes rounded up to 4 KiB pages, zero-filled, mapped read-write at a 4 KiB aligned IOVA.
    // The error names `what` and the PCI layer's reason.
    static std::expected<mapped_memory, std::string> create(driver::function& fn, std::size_t bytes, std::string what);

    mapped_memory() = default;
    mapped_memory(mapped_memory&& o) noexcept;
    mapped_memory& operator=(mapped_memory&& o) noexcept;
    mapped_memory(const mapped_memory&) = delete;
    mapped_memory& operator=(const mapped_memory&) = delete;
    ~mapped_memory();  // still mapped: kept for the life of the process (see above)

    std::byte* data() const noexcept { return _memory.data(); }
    std::size_t size() const noexcept { return _size; }
    std::uint64_t iova() const noexcept { return _iova; }
    bool mapped() const noexcept { return _mapped; }
    const std::string& what() const noexcept { return _what; }
    void name(std::string what) { _what = std::move(what); }  // once the firmware numbered it

    void release(driver::function& fn);        // unmapped and freed
    void strand(stranded_memory& stranded);  // handed to `stranded`, never freed
    // After a command about it failed: stranded when the firmware may still name it, else released.
    void let_go(driver::function& fn, stranded_memory& stranded, bool firmware_may_hold) {
        firmware_may_hold ? strand(stranded) : release(fn);
    }

private:
    driver::dma_memory _memory;
    std::uint64_t _iova = 0;
    std::size_t _size = 0;
    bool _mapped = false;
    std::string _what;
};

}  // namespace rig::firmware
