#pragma once
// Doorbell records, many to a page (rdma-core providers/mlx5/dbrec.c mlx5_alloc_dbrec; the
// kernel's mlx5_db_alloc in drivers/net/ethernet/mellanox/mlx5/core/alloc.c): a CQ's or QP's
// 8-byte record (abi/mlx5/doorbell.hpp cq_dbr, qp_dbr) is one 64-byte slot of a 4 KiB page the
// device reads, not a page of its own behind the object's ring.
//
// Why: the NIC reads a QP's record when its doorbell rings, and with many QPs behind one UAR
// page it reads many. 64 records on one page are 64 cache lines the device (and the model's
// walk of a rung page's send counters, sim/mlx5/doorbells.cpp) read in order, instead of 64
// pages, 64 IOTLB entries and 64 cold misses; and 1024 QPs and their CQs map 32 pages, not
// 2048. A slot is a cache line, as rdma-core's, so that two QPs driven by two threads share no
// line.
//
// A slot's fate follows its object's memory (firmware/mapped_memory.hpp): given back when the
// firmware let go of the object (a destroy succeeded, a create was refused), stranded when the
// firmware may still name it (never handed out again; its page is never unmapped). A page with
// no slot in use or stranded is unmapped and freed.
#include <cstddef>
#include <cstdint>
#include <expected>
#include <list>
#include <mutex>
#include <string>

#include "driver/function.hpp"
#include "firmware/mapped_memory.hpp"
#include "firmware/stranded.hpp"

namespace rig::firmware::mlx5 {

class doorbell_records {
public:
    // One record: where the driver writes it and the IOVA the firmware is given (cqc/qpc
    // dbr_addr). Plain data: dropping it keeps its slot taken (as its object's memory stays
    // mapped when the object is dropped alive).
    struct record {
        std::byte* data = nullptr;  // 8 bytes the driver writes, zero when handed out
        std::uint64_t iova = 0;
        void* page = nullptr;       // the pool's page, for give_back and strand
        std::uint32_t slot = 0;
        bool taken() const noexcept { return data != nullptr; }
    };

    static constexpr std::size_t slot_bytes = 64;    // a cache line (rdma-core: cache_line_size)
    static constexpr std::size_t page_bytes = 4096;
    static constexpr std::size_t slots_per_page = page_bytes / slot_bytes;

    // Pages are mapped through `fn`; a page that cannot be unmapped goes to `stranded`. Both
    // outlive the pool.
    doorbell_records(driver::function& fn, stranded_memory& stranded) : _fn(fn), _stranded(stranded) {}
    doorbell_records(const doorbell_records&) = delete;
    doorbell_records& operator=(const doorbell_records&) = delete;
    ~doorbell_records();  // pages still in use stay mapped (their objects were dropped alive)

    // A zeroed slot; a new page is mapped when every page is full. The error names the PCI
    // layer's reason.
    std::expected<record, std::string> take();
    // The firmware let go of the record's object: the slot can be handed out again.
    void give_back(record& r);
    // The firmware may still write the record: the slot is never handed out again.
    void strand(record& r);
    // give_back or strand, as mapped_memory::let_go.
    void let_go(record& r, bool firmware_may_hold) { firmware_may_hold ? strand(r) : give_back(r); }

    std::size_t pages() const;       // mapped now
    std::size_t in_use() const;      // slots handed out and not given back (stranded included)

private:
    struct page {
        mapped_memory memory;
        std::uint64_t free = ~std::uint64_t{0};  // bit s: slot s can be handed out
        std::uint32_t stranded = 0;
    };
    static_assert(slots_per_page == 64, "one bit of page::free per slot");
    page& owner(const record& r, const char* what);

    driver::function& _fn;
    stranded_memory& _stranded;
    mutable std::mutex _lock;   // objects are created and destroyed from any thread
    std::list<page> _pages;     // std::list: a record points at its page
};

}  // namespace rig::firmware::mlx5
