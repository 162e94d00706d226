#pragma once
// Registered memory regions of one function, family-neutral: the check every access by the RC
// engine passes through (the key names a region, the region's protection domain must be the
// queue pair's, the bytes must lie inside it, and the region must grant the right the access
// needs), then the translation from the region's virtual addresses to IOVAs of the client's
// DMA windows (a linear base, or a page list as an MTT gives), then the DMA itself through the
// model's IOMMU view (sim/vfio_user/dma_space.hpp), which refuses what the client did not map.
//
// IB spec vol. 1 ch. 10 (memory regions, L_Key/R_Key, access rights) and 9.7 (a remote access
// outside what the R_Key grants is a remote access error). mlx5 calls a region an
// MKEY (mkc: lr is implied, lw/rr/rw, start_addr, len, pd, translations); bnxt an MR.
//
// Registration is the control path (it may allocate, misuse throws std::invalid_argument);
// read/write are the data path: no allocation, no exception, no logging. Thread-safe: the
// table is read-locked by accesses and write-locked by (de)registration, so a key deregistered
// is refused by every access that starts after deregister returns. A thread that makes many
// accesses in a row (a data-path pass) may read-lock the table once for all of them with a
// memory::pin; (de)registration waits until it goes.
// Lock order: a memory's lock, then its dma_space's. An access holds the table read-locked while
// its bytes move through the DMA space; a data-path pass's memory::pin takes the table, then the
// DMA view, by construction. The other order (the view pinned, then the table: what the passes
// did, reported by ThreadSanitizer as an inversion, issue 20) deadlocks as soon as a
// registration waits for the table's write lock under a writer-preferring lock: the pass then
// waits for the table behind it while a reader of the table waits for the view the pass holds.
#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/vfio_user/dma_space.hpp"

namespace rig::sim::roce {

// Rights a region grants beyond local read, which every region grants (IB 10.6.3.1).
enum access : std::uint8_t {
    access_local_read = 0,  // needed by a local gather: no bit
    access_local_write = 1 << 0,
    access_remote_read = 1 << 1,
    access_remote_write = 1 << 2,
};

enum class mem_status : std::uint8_t {
    ok,
    bad_key,        // no region under this key, deregistered, or another protection domain's
    out_of_bounds,  // the bytes do not lie wholly inside the region
    no_right,       // the region does not grant the access
    dma_fault,      // the translation leads outside the client's DMA windows (dma_space refused)
};
std::string_view to_string(mem_status s) noexcept;

struct region {
    std::uint32_t key = 0;
    std::uint32_t pd = 0;
    std::uint64_t start = 0;   // virtual address of the region's first byte
    std::uint64_t length = 0;
    std::uint8_t rights = 0;   // access bits
    // Translation. Empty `pages`: linear, iova = base_iova + (va - start). Otherwise the page
    // list: the region's first byte lies `page_offset` bytes into pages[0], each page
    // 2^page_shift bytes, so va lies in pages[(va - start + page_offset) >> page_shift].
    std::uint64_t base_iova = 0;
    std::vector<std::uint64_t> pages;
    std::uint8_t page_shift = 12;
    std::uint64_t page_offset = 0;
};

class memory {
    // Bytes of a region that lie consecutive in one DMA window with fd, found by the last
    // reference() (reads) or place() (writes) under a pin: the next access inside them (a
    // message's next packet, the next WRITE from one buffer) skips the look-up, the translation
    // and the window search (bench-model, issue 17). The region's key, protection domain and
    // rights are copied in, so that a hit reads this line alone.
    struct host_run {
        std::uint64_t va = 0;    // [va, end): bytes of the region; empty: no run
        std::uint64_t end = 0;
        std::byte* host = nullptr;   // the host address of va
        const vfio_user::unmap_guard* by = nullptr;   // reads: the guard it was found for
        std::uint32_t key = 0;
        std::uint32_t pd = 0;
        std::uint8_t rights = 0;
    };

public:
    explicit memory(vfio_user::dma_space& dma) noexcept;
    memory(const memory&) = delete;
    memory& operator=(const memory&) = delete;

    // The host runs a data path keeps from pass to pass, for one thread's pins of one memory.
    // A run stays good while no region is (de)registered and no DMA window goes; a pin made
    // with them drops them when either happened since (memory::renew).
    class runs {
    private:
        friend class memory;
        host_run read;
        host_run write;
        std::uint64_t version = 0;    // memory::_version they were found at (versions start at 1)
        std::uint64_t removals = 0;   // dma_space::removals() then
    };

    // Read-locks the table for this thread's accesses while it lives (one lock, not one per
    // access), then pins the DMA view (vfio_user::dma_space::pin): the lock order by
    // construction. A thread holds one pin at a time (a second, on any memory, or a DMA pin
    // already held, is misuse: std::invalid_argument), and does not (de)register meanwhile
    // (misuse too). Given `kept`, host runs found under this pin serve the next pins too.
    class pin {
    public:
        explicit pin(const memory& m);
        pin(const memory& m, runs& kept);
        pin(const pin&) = delete;
        pin& operator=(const pin&) = delete;

    private:
        friend class memory;
        // The table's read lock and this thread's pin slot, taken before the view's pin.
        struct table_lock {
            explicit table_lock(const pin& p);
            ~table_lock();
            table_lock(const table_lock&) = delete;
            table_lock& operator=(const table_lock&) = delete;
            const memory& m;
        };
        const memory& _m;
        table_lock _table;
        vfio_user::dma_space::pin _view;
        runs _own;      // without `kept`: this pin's alone
        runs& _runs;
        // The region the last access under this pin found: the table cannot change while the
        // pin holds it read-locked, so the pointer stays good, and a pass's accesses, which come
        // in runs under one key (a message's packets, a batch of WRITEs from one buffer), skip
        // the table lookup.
        mutable const region* _last = nullptr;
    };

    // Misuse (key already registered, zero length, range wrapping, page list too short for
    // the length, page_shift under 12 or over 40, page_offset outside the first page) throws
    // std::invalid_argument and registers nothing.
    void register_region(region r);
    // false when the key is not registered.
    bool deregister(std::uint32_t key);
    bool registered(std::uint32_t key) const;

    // Checks then moves `out.size()` / `in.size()` bytes at `va` of the region `key`, which
    // must belong to protection domain `pd` and grant `needed` (access bits). Nothing moves
    // unless the whole access passes the checks; a DMA fault part-way may leave some bytes
    // moved (as on a card).
    mem_status read(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::span<std::byte> out,
                    std::uint8_t needed) const noexcept;
    mem_status write(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::span<const std::byte> in,
                     std::uint8_t needed) const noexcept;
    // read() for a reader that reads later: the same checks, then in `out` the host address of
    // the bytes, where they lie consecutive in one window of the DMA space that `by` guards
    // (vfio_user::dma_space::reference); `out` nullptr with ok when they cannot be read by
    // reference (a window without fd, pages of the list apart): read() them. The pointer is good
    // until `by` is told the window goes (the wire's frames, wire.hpp).
    mem_status reference(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::size_t n, std::uint8_t needed,
                         const vfio_user::unmap_guard& by, const std::byte*& out) const noexcept;
    // write() for a writer that writes soon, while this thread holds its dma_space::pin: the
    // same checks, then in `out` the host address to write at (dma_space::writable), or nullptr
    // with ok when there is none (a window without fd, pages apart, no pin): write() then.
    mem_status place(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::size_t n, std::uint8_t needed,
                     std::byte*& out) const noexcept;
    // The checks alone, for `bytes` at `va`: a responder checks a whole RDMA WRITE or READ
    // before it moves its first byte.
    mem_status check(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::uint64_t bytes,
                     std::uint8_t needed) const noexcept;

private:
    // with _lock held
    const region* lookup(const pin* pinned, std::uint32_t key) const noexcept;
    const region* find_checked(const pin* pinned, std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::uint64_t bytes,
                               std::uint8_t needed, mem_status& why) const noexcept;
    mem_status move(const region& r, std::uint64_t va, std::byte* p, std::size_t n, bool is_write) const noexcept;
    // reference() (by: its guard) and place() (by nullptr): the checks, then the host address
    std::byte* host_address(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::size_t n, std::uint8_t needed,
                            const vfio_user::unmap_guard* by, mem_status& why) const noexcept;
    // the run of r's host bytes around va (memory.cpp), kept in `run`
    void find_run(const region& r, std::uint64_t va, std::uint64_t iova, std::byte* host, bool for_write,
                  host_run& run) const noexcept;
    // a pin's: drops `kept` when a region was (de)registered or a window went since they were found
    void renew(runs& kept) const noexcept;
    // the IOVA of `n` (> 0) bytes at `va` of `r` when they are consecutive in IOVA space
    static bool consecutive(const region& r, std::uint64_t va, std::size_t n, std::uint64_t& iova) noexcept;
    // this thread's pin of this memory, or nullptr
    const pin* pinned_here() const noexcept;
    // the read lock, unless this thread holds it by a pin
    std::shared_lock<std::shared_mutex> read_lock(const pin* pinned) const noexcept;
    void refuse_if_pinned(const char* call) const;

    vfio_user::dma_space& _dma;
    mutable std::shared_mutex _lock;
    std::unordered_map<std::uint32_t, region> _regions;
    // Changes with every (de)registration; unique across memories (runs kept for one memory
    // never match another made at the same address).
    std::uint64_t _version;
};

}  // namespace rig::sim::roce
