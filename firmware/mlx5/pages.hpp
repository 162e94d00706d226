#pragma once
// The firmware's memory: 4 KiB pages the driver gives the NIC with MANAGE_PAGES and takes back
// (kernel pagealloc.c: mlx5_satisfy_startup_pages, page requests, mlx5_reclaim_startup_pages;
// rdma-core mlx5_vfio.c).
//
//   page_supply pages(fn, q, stranded);
//   pages.satisfy(ifc::query_pages_op_mod::boot_pages, by);   // QUERY_PAGES + GIVE
//   pages.give(n, deadline, page_supply::slot::page_request);        // from a PAGE_REQUEST event
//   pages.reclaim(deadline);                                         // after TEARDOWN_HCA
//
// Pages are carved from chunks of DMA memory (2 MiB by default, hugetlb when the host has it),
// each mapped for the device once, as rdma-core carves its 2 MiB block. A GIVE names any number
// of pages in one command (the command queue builds mailbox chains of any length). A TAKE asks
// for up to `take_batch` pages at a time and checks that the firmware returns only pages it was
// given; a returned page goes back to the free list.
//
// When the firmware stops answering (timeout, fatal) during a GIVE or a TAKE, or strand() is
// called, every page it may hold is handed to the stranded-memory registry with the chunk that
// holds it: never unmapped, freed or given again. Chunks with no such page are unmapped and
// freed when the supply is destroyed.
//
// Thread-safe: the page-request worker and teardown may call at once; one command at a time.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "abi/mlx5/ifc/hca.hpp"
#include "driver/dma_memory.hpp"
#include "driver/function.hpp"
#include "firmware/mlx5/command_queue.hpp"
#include "firmware/mlx5/error.hpp"
#include "firmware/mlx5/stranded.hpp"

namespace rig::firmware::mlx5 {

struct page_supply_options {
    std::size_t chunk_pages = 512;   // 2 MiB of 4 KiB pages per DMA chunk
    std::size_t take_batch = 1024;   // pages asked back per TAKE (8 KiB of output: 17 blocks)
    std::size_t max_pages = 1u << 20;  // 4 GiB: a firmware asking for more is refused
};

class page_supply {
public:
    using clock = command_queue::clock;
    static constexpr std::size_t page_bytes = 4096;
    // Which command slot a MANAGE_PAGES uses: the page-request slot answers the firmware's
    // PAGE_REQUEST events (it must not queue behind the command that made the firmware ask).
    enum class slot { regular, page_request };

    page_supply(driver::function& fn, command_queue& q, stranded_memory& stranded,
                const page_supply_options& options = {});
    ~page_supply();
    page_supply(const page_supply&) = delete;
    page_supply& operator=(const page_supply&) = delete;

    // QUERY_PAGES(op_mod), then GIVE (num_pages > 0) or TAKE (< 0) that many.
    result<void> satisfy(ifc::query_pages_op_mod op_mod, clock::time_point by);

    // GIVE n pages (function_id 0, this function). Refused by the firmware: the pages go back to
    // the free list. Timed out or fatal: they are stranded (the firmware may hold them).
    result<void> give(std::size_t n, clock::time_point by, slot s = slot::regular);

    // TAKE up to n pages; returns how many came back.
    result<std::size_t> take(std::size_t n, clock::time_point by, slot s = slot::regular);

    // Takes back every page given, in batches, until none is left with the firmware. An error
    // when the firmware returns none while it still holds some, or stops answering (then the
    // pages it holds are stranded).
    result<void> reclaim(clock::time_point by);

    // The firmware stopped answering: every page it holds goes to the stranded registry.
    void strand(const std::string& why);

    std::size_t given() const;           // pages the firmware holds
    std::size_t stranded_pages() const;  // pages given up for lost
    std::size_t chunks_mapped() const;   // DMA mappings this supply holds
    struct window {
        std::uint64_t iova;
        std::size_t bytes;
    };
    std::vector<window> windows() const;  // the chunks' DMA mappings

private:
    struct chunk {
        driver::dma_memory memory;
        std::uint64_t iova = 0;
        std::size_t bytes = 0;
        std::size_t stranded = 0;  // pages of it in the registry: the chunk is never unmapped
    };

    result<std::vector<std::byte>> run(std::span<const std::byte> in, std::size_t out_bytes,
                                       clock::time_point by, slot s);
    result<void> grow();                     // one more chunk, its pages free
    chunk* chunk_of(std::uint64_t iova);     // the chunk holding a page, or nullptr
    void strand_locked(const std::vector<std::uint64_t>& pages, const std::string& why);
    static bool firmware_gone(const error& e);

    driver::function& _fn;
    command_queue& _q;
    stranded_memory& _stranded;
    page_supply_options _options;
    mutable std::mutex _lock;
    std::map<std::uint64_t, chunk> _chunks;  // by IOVA
    std::vector<std::uint64_t> _free;        // page IOVAs, taken from the back
    std::set<std::uint64_t> _given;          // held by the firmware
    std::size_t _stranded_pages = 0;
};

}  // namespace rig::firmware::mlx5
