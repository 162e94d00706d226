#pragma once
// Memory the device may still name: what a command that never completed (a create, a destroy,
// mlx5's MANAGE_PAGES or command queue, bnxt's HWRM response buffer or context memory) left
// with a firmware that stopped answering; every family's firmware layer strands into one. Such
// memory is never freed, unmapped or reused (docs/guide.md, "The queue pair contract"): it is
// kept here, listed by report(), and on destruction handed to a process-lifetime keeper rather
// than freed, because the device may still write it after this NIC object is gone.
//
// Thread-safe: any object's teardown may strand memory while another thread reads the report.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver/dma_memory.hpp"

namespace rig::firmware {

struct stranded_region {
    std::string what;        // "CQ 0x12 buffer", "firmware page", "command slot 3", ...
    std::uint64_t iova = 0;  // the device address the firmware knows it by
    std::size_t bytes = 0;
};

// Hands `owner` to the process-lifetime keeper: never destroyed, so memory a silent device may
// still write is never unmapped or returned to the allocator, and held from a global, so
// LeakSanitizer sees it owned rather than leaked (issue 20: a bare `new` whose pointer was
// dropped read as a leak in every test of a silent firmware).
void keep_for_process(std::shared_ptr<void> owner);

class stranded_memory {
public:
    stranded_memory() = default;
    stranded_memory(const stranded_memory&) = delete;
    stranded_memory& operator=(const stranded_memory&) = delete;
    ~stranded_memory();

    // Keeps `memory` (allocated and still mapped at `iova`) for the life of the process.
    // `memory` may be empty when the bytes belong to a larger allocation kept elsewhere.
    void keep(std::string what, std::uint64_t iova, std::size_t bytes, driver::dma_memory memory = {});

    std::vector<stranded_region> report() const;
    std::size_t bytes() const;

private:
    mutable std::mutex _lock;
    std::vector<stranded_region> _regions;
    std::vector<driver::dma_memory> _memory;
};

}  // namespace rig::firmware
