#include "sim/roce/memory.hpp"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>

#include "sim/vfio_user/dma_space.hpp"

namespace rig::sim::roce {

std::string_view to_string(mem_status s) noexcept {
    switch (s) {
    case mem_status::ok: return "ok";
    case mem_status::bad_key: return "bad key";
    case mem_status::out_of_bounds: return "out of bounds";
    case mem_status::no_right: return "access right not granted";
    case mem_status::dma_fault: return "DMA fault";
    }
    return "?";
}

namespace {
// The pin by which this thread holds a memory read-locked (memory::pin), if any.
thread_local const memory::pin* pinned_by_this_thread = nullptr;
// Versions of region tables, from one count: unique across every memory of the process.
std::atomic<std::uint64_t> last_version{0};
std::uint64_t next_version() noexcept { return last_version.fetch_add(1, std::memory_order_relaxed) + 1; }
}  // namespace

memory::pin::table_lock::table_lock(const pin& p) : m(p._m) {
    if (pinned_by_this_thread != nullptr) {
        // one slot per thread: a second pin would hide the first, whose accesses would lock again
        throw std::invalid_argument("roce::memory::pin: this thread already holds a pin");
    }
    m._lock.lock_shared();
    pinned_by_this_thread = &p;
}

memory::pin::table_lock::~table_lock() {
    pinned_by_this_thread = nullptr;
    m._lock.unlock_shared();
}

// _table before _view (the declaration order): the lock order of memory.hpp
memory::pin::pin(const memory& m, runs& kept) : _m(m), _table(*this), _view(m._dma), _runs(kept) {
    m.renew(kept);
}

memory::pin::pin(const memory& m) : pin(m, _own) {}

// with the table read-locked and the view pinned: neither count can move meanwhile
void memory::renew(runs& kept) const noexcept {
    const std::uint64_t removals = _dma.removals();
    if (kept.version != _version || kept.removals != removals) {
        kept = runs{};
        kept.version = _version;
        kept.removals = removals;
    }
}

memory::memory(vfio_user::dma_space& dma) noexcept : _dma(dma), _version(next_version()) {}

const memory::pin* memory::pinned_here() const noexcept {
    const pin* p = pinned_by_this_thread;
    return p != nullptr && &p->_m == this ? p : nullptr;
}

std::shared_lock<std::shared_mutex> memory::read_lock(const pin* pinned) const noexcept {
    return pinned != nullptr ? std::shared_lock<std::shared_mutex>(_lock, std::defer_lock)
                             : std::shared_lock<std::shared_mutex>(_lock);
}

void memory::refuse_if_pinned(const char* call) const {
    if (pinned_here() != nullptr) {
        throw std::invalid_argument(std::string("roce::memory::") + call + ": this thread holds the table pinned");
    }
}

void memory::register_region(region r) {
    refuse_if_pinned("register_region");
    auto refuse = [&](const std::string& why) {
        throw std::invalid_argument("roce::memory::register_region(key " + std::to_string(r.key) + "): " + why);
    };
    if (r.length == 0) {
        refuse("zero length");
    }
    if (r.start + r.length < r.start) {
        refuse("the range wraps past 2^64");
    }
    if (!r.pages.empty()) {
        if (r.page_shift < 12 || r.page_shift > 40) {
            refuse("page_shift " + std::to_string(r.page_shift) + " outside 12..40");
        }
        const std::uint64_t page = std::uint64_t{1} << r.page_shift;
        if (r.page_offset >= page) {
            refuse("page_offset outside the first page");
        }
        const std::uint64_t needed = (r.page_offset + r.length + page - 1) >> r.page_shift;
        if (r.pages.size() < needed) {
            refuse(std::to_string(r.pages.size()) + " pages for " + std::to_string(needed) + " needed");
        }
    } else if (r.base_iova + r.length < r.base_iova) {
        refuse("the IOVA range wraps past 2^64");
    }
    std::unique_lock g(_lock);
    if (_regions.contains(r.key)) {
        refuse("key already registered");
    }
    _regions.emplace(r.key, std::move(r));
    _version = next_version();
}

bool memory::deregister(std::uint32_t key) {
    refuse_if_pinned("deregister");
    std::unique_lock g(_lock);
    if (_regions.erase(key) == 0) {
        return false;
    }
    _version = next_version();   // the runs found in it go
    return true;
}

bool memory::registered(std::uint32_t key) const {
    const auto g = read_lock(pinned_here());
    return _regions.contains(key);
}

const region* memory::lookup(const pin* p, std::uint32_t key) const noexcept {
    if (p == nullptr) {
        const auto it = _regions.find(key);
        return it == _regions.end() ? nullptr : &it->second;
    }
    if (p->_last == nullptr || p->_last->key != key) {
        const auto it = _regions.find(key);
        if (it == _regions.end()) {
            return nullptr;
        }
        p->_last = &it->second;
    }
    return p->_last;
}

const region* memory::find_checked(const pin* pinned, std::uint32_t key, std::uint32_t pd, std::uint64_t va,
                                   std::uint64_t bytes, std::uint8_t needed, mem_status& why) const noexcept {
    const region* found = lookup(pinned, key);
    if (found == nullptr || found->pd != pd) {
        why = mem_status::bad_key;
        return nullptr;
    }
    const region& r = *found;
    // inside [start, start + length): written so that no sum can wrap
    if (va < r.start || va - r.start > r.length || bytes > r.length - (va - r.start)) {
        why = mem_status::out_of_bounds;
        return nullptr;
    }
    if ((r.rights & needed) != needed) {
        why = mem_status::no_right;
        return nullptr;
    }
    why = mem_status::ok;
    return &r;
}

// Inside a host run of this thread's pin: the answer the look-up (find_checked, consecutive,
// the window) gives, as the run lies inside its region, consecutive in IOVA, in one window
// that allows the access; nullptr when the bytes are not all inside it.
namespace {
[[gnu::always_inline]] inline std::byte* in_run(const auto& run, std::uint32_t key, std::uint32_t pd,
                                                std::uint64_t va, std::size_t n, std::uint8_t needed,
                                                const vfio_user::unmap_guard* by) noexcept {
    if (run.key != key || run.pd != pd || (run.rights & needed) != needed || run.by != by || va < run.va ||
        va > run.end || n > run.end - va || n == 0) {
        return nullptr;
    }
    return run.host + (va - run.va);
}
}  // namespace

mem_status memory::check(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::uint64_t bytes,
                         std::uint8_t needed) const noexcept {
    const pin* pinned = pinned_here();
    // bytes inside a kept run pass every check (a responder checks a WRITE, then places it)
    if (pinned != nullptr) {
        const runs& kept = pinned->_runs;
        if (in_run(kept.write, key, pd, va, bytes, needed, kept.write.by) != nullptr ||
            in_run(kept.read, key, pd, va, bytes, needed, kept.read.by) != nullptr) {
            return mem_status::ok;
        }
    }
    const auto g = read_lock(pinned);
    mem_status why;
    find_checked(pinned, key, pd, va, bytes, needed, why);
    return why;
}

// with _lock held (shared): the region stays registered while its bytes move
mem_status memory::move(const region& r, std::uint64_t va, std::byte* p, std::size_t n, bool is_write) const noexcept {
    std::uint64_t at = va - r.start;
    while (n > 0) {
        std::uint64_t iova;
        std::size_t chunk;
        if (r.pages.empty()) {
            iova = r.base_iova + at;
            chunk = n;
        } else {
            // one page at a time: consecutive pages of the list need not be consecutive IOVAs
            const std::uint64_t off = at + r.page_offset;
            const std::uint64_t in_page = off & ((std::uint64_t{1} << r.page_shift) - 1);
            iova = r.pages[off >> r.page_shift] + in_page;
            const std::uint64_t left = (std::uint64_t{1} << r.page_shift) - in_page;
            chunk = left < n ? static_cast<std::size_t>(left) : n;
        }
        const bool ok = is_write ? _dma.write(iova, std::span<const std::byte>(p, chunk))
                                 : _dma.read(iova, std::span<std::byte>(p, chunk));
        if (!ok) {
            return mem_status::dma_fault;
        }
        p += chunk;
        n -= chunk;
        at += chunk;
    }
    return mem_status::ok;
}

// with the checks of read() and write(): the host address of the bytes where they lie
// consecutive in IOVA space in one window with fd, else nullptr (ok all the same: the caller
// then moves them itself). Under a pin, the run around them is kept for the next access.
std::byte* memory::host_address(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::size_t n,
                                std::uint8_t needed, const vfio_user::unmap_guard* by, mem_status& why) const noexcept {
    const pin* pinned = pinned_here();
    host_run* run = pinned == nullptr ? nullptr : by != nullptr ? &pinned->_runs.read : &pinned->_runs.write;
    if (run != nullptr) {
        if (std::byte* hit = in_run(*run, key, pd, va, n, needed, by)) {
            why = mem_status::ok;
            return hit;
        }
    }
    const auto g = read_lock(pinned);
    const region* found = find_checked(pinned, key, pd, va, n, needed, why);
    std::uint64_t iova;
    if (found == nullptr || n == 0 || !consecutive(*found, va, n, iova)) {
        return nullptr;
    }
    std::byte* host = by != nullptr ? const_cast<std::byte*>(_dma.reference(iova, n, *by)) : _dma.writable(iova, n);
    if (host != nullptr && run != nullptr) {
        find_run(*found, va, iova, host, by == nullptr, *run);
        run->by = by;
    }
    return host;
}

mem_status memory::reference(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::size_t n, std::uint8_t needed,
                             const vfio_user::unmap_guard& by, const std::byte*& out) const noexcept {
    mem_status why;
    out = host_address(key, pd, va, n, needed, &by, why);
    return why;
}

mem_status memory::place(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::size_t n, std::uint8_t needed,
                         std::byte*& out) const noexcept {
    mem_status why;
    out = host_address(key, pd, va, n, needed, nullptr, why);
    return why;
}

// The bytes of r around va (whose IOVA is `iova`, at `host`) that lie consecutive in IOVA space
// and in the window that holds iova: the whole region when it is linear, else the pages around
// va's that follow each other in IOVA, at most run_pages before it and 2 x run_pages in all (a
// page list's look is bounded: a run is a cache, not a walk of a large region's list).
void memory::find_run(const region& r, std::uint64_t va, std::uint64_t iova, std::byte* host, bool for_write,
                      host_run& run) const noexcept {
    constexpr std::uint64_t run_pages = 64;
    std::uint64_t lo = r.start, hi = r.start + r.length;   // [lo, hi) of va, consecutive in IOVA
    if (!r.pages.empty()) {
        // offsets from the first page's start: the region is [page_offset, page_offset + length)
        const std::uint64_t page = std::uint64_t{1} << r.page_shift;
        const std::uint64_t at = va - r.start + r.page_offset;
        std::uint64_t first = at >> r.page_shift, last = first;
        while (first > 0 && last - first < run_pages && r.pages[first - 1] + page == r.pages[first]) {
            --first;
        }
        while (last + 1 < r.pages.size() && last - first < 2 * run_pages && r.pages[last + 1] == r.pages[last] + page) {
            ++last;
        }
        lo = r.start + (std::max(first << r.page_shift, r.page_offset) - r.page_offset);
        hi = r.start + (std::min((last + 1) << r.page_shift, r.page_offset + r.length) - r.page_offset);
    }
    const vfio_user::dma_space::host_window w = _dma.window_for(iova, for_write);
    if (w.size == 0) {
        run = {};
        return;
    }
    // no further than the window's bytes reach either side of iova
    lo = va - std::min(va - lo, iova - w.iova);
    hi = va + std::min(hi - va, w.size - (iova - w.iova));
    run = {lo, hi, host - (va - lo), nullptr, r.key, r.pd, r.rights};
}

bool memory::consecutive(const region& r, std::uint64_t va, std::size_t n, std::uint64_t& iova) noexcept {
    const std::uint64_t at = va - r.start;
    if (r.pages.empty()) {
        iova = r.base_iova + at;
        return true;
    }
    // the pages the bytes span must follow each other in IOVA (an MTT's pages need not)
    const std::uint64_t page = std::uint64_t{1} << r.page_shift;
    const std::uint64_t off = at + r.page_offset;
    const std::uint64_t first = off >> r.page_shift, last = (off + n - 1) >> r.page_shift;
    for (std::uint64_t i = first; i < last; ++i) {
        if (r.pages[i + 1] != r.pages[i] + page) {
            return false;
        }
    }
    iova = r.pages[first] + (off & (page - 1));
    return true;
}

mem_status memory::read(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::span<std::byte> out,
                        std::uint8_t needed) const noexcept {
    const pin* pinned = pinned_here();
    const auto g = read_lock(pinned);
    mem_status why;
    const region* r = find_checked(pinned, key, pd, va, out.size(), needed, why);
    return r == nullptr ? why : move(*r, va, out.data(), out.size(), false);
}

mem_status memory::write(std::uint32_t key, std::uint32_t pd, std::uint64_t va, std::span<const std::byte> in,
                         std::uint8_t needed) const noexcept {
    const pin* pinned = pinned_here();
    const auto g = read_lock(pinned);
    mem_status why;
    const region* r = find_checked(pinned, key, pd, va, in.size(), needed, why);
    return r == nullptr ? why : move(*r, va, const_cast<std::byte*>(in.data()), in.size(), true);
}

}  // namespace rig::sim::roce
