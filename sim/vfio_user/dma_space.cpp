#include "sim/vfio_user/dma_space.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>

#include "sim/vfio_user/log.hpp"

namespace rig::sim::vfio_user {

namespace {
constexpr std::uint64_t page = 4096;
// The dma_space this thread holds pinned (dma_space::pin), if any.
thread_local dma_space* pinned_by_this_thread = nullptr;
}  // namespace

dma_space::pin::pin(dma_space& d) : _d(d) {
    if (pinned_by_this_thread != nullptr) {
        // one slot per thread: an access to the first dma_space would take the lock it holds
        throw std::invalid_argument("vfio_user::dma_space::pin: this thread already holds a pin");
    }
    _d._lock.lock();
    pinned_by_this_thread = &_d;
}

dma_space::pin::~pin() {
    pinned_by_this_thread = nullptr;
    _d._lock.unlock();
}

bool dma_space::pinned_here() const noexcept { return pinned_by_this_thread == this; }

std::unique_lock<std::mutex> dma_space::hold() const {
    return pinned_here() ? std::unique_lock<std::mutex>(_lock, std::defer_lock) : std::unique_lock<std::mutex>(_lock);
}

int dma_space::map(std::uint64_t iova, std::uint64_t size, bool device_reads, bool device_writes, int fd,
                   std::uint64_t offset) {
    if (size == 0 || iova + size < iova) {
        return EINVAL;
    }
    const auto g = hold();
    // the first window at or after iova, and the one before it, are the only candidates to overlap
    auto next = _windows.lower_bound(iova);
    if (next != _windows.end() && next->first < iova + size) {
        return EEXIST;
    }
    if (next != _windows.begin()) {
        const window& prev = std::prev(next)->second;
        if (prev.iova + prev.size > iova) {
            return EEXIST;
        }
    }
    std::byte* base = nullptr;
    if (fd >= 0) {
        // Only a regular file (memfd, hugetlbfs, tmpfs) that holds the whole window: a mapping
        // past the end of the file would fault the model with SIGBUS on first touch.
        struct stat st{};
        if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || offset % page != 0 ||
            offset + size < offset || offset + size > static_cast<std::uint64_t>(st.st_size)) {
            return EINVAL;
        }
        const int prot = (device_reads ? PROT_READ : 0) | (device_writes ? PROT_WRITE : 0);
        // MAP_POPULATE: every page is faulted in now, as kernel VFIO pins every page of a window
        // at VFIO_IOMMU_MAP_DMA (vfio_iommu_type1: vfio_pin_pages_remote). Left to first touch,
        // the data path took a page fault per few pages of client memory (16 pages at best per
        // fault on shmem).
        const int flags = MAP_SHARED | (prot == 0 ? 0 : MAP_POPULATE);
        void* p = ::mmap(nullptr, size, prot == 0 ? PROT_NONE : prot, flags, fd, static_cast<off_t>(offset));
        if (p == MAP_FAILED) {
            return errno == EACCES ? EACCES : EINVAL;
        }
        base = static_cast<std::byte*>(p);
    }
    _windows.emplace(iova, window{iova, size, device_reads, device_writes, base});
    log().debug("DMA window [{:#x}, +{:#x}) {}{} {}", iova, size, device_reads ? "r" : "-",
                device_writes ? "w" : "-", base != nullptr ? "mapped" : "in band");
    return 0;
}

// The guard of a dma_space held around a removal: hold() before, release() after, whatever
// path the removal takes.
class dma_space::guarded {
public:
    explicit guarded(const dma_space& d) {
        {
            const auto g = d.hold();
            _guard = d._guard;
        }
        if (_guard) {
            _guard->hold();
        }
    }
    ~guarded() {
        if (_guard) {
            _guard->release();
        }
    }
    guarded(const guarded&) = delete;
    guarded& operator=(const guarded&) = delete;
    // with the dma_space's lock held, before the window's munmap
    void forget(const window& w) const noexcept {
        if (_guard && w.base != nullptr) {
            _guard->forget({w.base, w.size});
        }
    }

private:
    std::shared_ptr<unmap_guard> _guard;
};

int dma_space::unmap(std::uint64_t iova, std::uint64_t size) {
    std::shared_ptr<unmap_observer> observer;
    {
        const guarded guard(*this);   // before the lock: the guard may wait for a data path holding it
        const auto g = hold();
        const auto it = _windows.find(iova);
        if (it == _windows.end() || it->second.size != size) {
            return ENOENT;
        }
        if (it->second.base != nullptr) {
            guard.forget(it->second);
            ::munmap(it->second.base, it->second.size);
        }
        _windows.erase(it);
        _last = nullptr;
        observer = _unmap_observer.lock();
    }
    // Outside the lock: the observer may take its own, which is also held around DMA accesses.
    if (observer) {
        observer->unmapped(iova, size);
    }
    return 0;
}

void dma_space::watch_unmaps(std::weak_ptr<unmap_observer> observer) {
    const auto g = hold();
    _unmap_observer = std::move(observer);
}

void dma_space::guard_unmaps(std::shared_ptr<unmap_guard> guard) {
    const auto g = hold();
    _guard = std::move(guard);
}

void dma_space::unmap_all() {
    const guarded guard(*this);
    const auto g = hold();
    for (auto& [iova, w] : _windows) {
        if (w.base != nullptr) {
            guard.forget(w);
            ::munmap(w.base, w.size);
        }
    }
    _windows.clear();
    _last = nullptr;
}

void dma_space::set_in_band(in_band_dma* to, std::thread::id thread) {
    const auto g = hold();
    _in_band = to;
    _in_band_thread = thread;
}

std::size_t dma_space::window_count() const {
    const auto g = hold();
    return _windows.size();
}

bool dma_space::by_message(std::uint64_t iova) const {
    const auto g = hold();
    auto it = _windows.upper_bound(iova);
    if (it == _windows.begin()) {
        return false;
    }
    const window& w = std::prev(it)->second;
    return iova - w.iova < w.size && w.base == nullptr;
}

std::uint64_t dma_space::fault_count() const {
    const auto g = hold();
    return _fault_count;
}

std::vector<dma_fault> dma_space::faults() const {
    const auto g = hold();
    return {_faults.begin(), _faults.end()};
}

// with _lock held
void dma_space::refuse(std::uint64_t iova, std::uint64_t n, bool is_write, std::string reason) {
    log().warn("DMA {} of {} bytes at IOVA {:#x} refused: {}", is_write ? "write" : "read", n, iova, reason);
    ++_fault_count;
    if (_faults.size() == faults_kept) {
        _faults.pop_front();
    }
    _faults.push_back({iova, n, is_write, std::move(reason)});
}

// with _lock held, or this thread's pin: the window that holds `iova` (remembered), or nullptr
const dma_space::window* dma_space::window_at(std::uint64_t iova) const noexcept {
    if (_last != nullptr && iova - _last->iova < _last->size) {
        return _last;
    }
    auto it = _windows.upper_bound(iova);
    if (it == _windows.begin()) {
        return nullptr;
    }
    const window& w = std::prev(it)->second;
    if (iova - w.iova >= w.size) {
        return nullptr;
    }
    _last = &w;
    return _last;
}

bool dma_space::access(std::uint64_t iova, std::byte* p, std::size_t n, bool is_write, bool last_byte_last) {
    const bool pinned = pinned_here();
    std::unique_lock g = pinned ? std::unique_lock<std::mutex>(_lock, std::defer_lock) : std::unique_lock<std::mutex>(_lock);
    if (n == 0) {
        return true;
    }
    const window* found = window_at(iova);
    if (found == nullptr) {
        refuse(iova, n, is_write, "no DMA window there");
        return false;
    }
    const window w = *found;
    const std::uint64_t at = iova - w.iova;
    if (n > w.size - at) {
        refuse(iova, n, is_write, "runs past the end of its DMA window");
        return false;
    }
    if (is_write ? !w.device_writes : !w.device_reads) {
        refuse(iova, n, is_write, is_write ? "DMA window not writable by the device" : "DMA window not readable by the device");
        return false;
    }
    if (w.base != nullptr) {
        if (is_write && last_byte_last) {
            std::memcpy(w.base + at, p, n - 1);
            // the reader polls the last byte: the rest is visible before it (x86 keeps stores in
            // order; the fence also keeps the compiler from merging the two copies)
            std::atomic_thread_fence(std::memory_order_release);
            std::atomic_ref<std::byte>(w.base[at + n - 1]).store(p[n - 1], std::memory_order_relaxed);
        } else if (is_write) {
            // memmove: the source may be a frame's payload by reference into this very window
            // (a queue pair looped to itself writing onto an overlapping range)
            std::memmove(w.base + at, p, n);
        } else {
            std::memcpy(p, w.base + at, n);
        }
        return true;
    }
    // A window without fd: ask the client. Only the server's thread may talk to it, and not
    // under the lock (the answer takes a round trip).
    if (pinned || _in_band == nullptr || std::this_thread::get_id() != _in_band_thread) {
        refuse(iova, n, is_write, "window without fd accessed outside a client request");
        return false;
    }
    in_band_dma* to = _in_band;
    g.unlock();
    bool ok = false;
    if (is_write && last_byte_last) {
        ok = (n == 1 || to->dma_write(iova, std::span<const std::byte>(p, n - 1))) &&
             to->dma_write(iova + n - 1, std::span<const std::byte>(p + n - 1, 1));
    } else {
        ok = is_write ? to->dma_write(iova, std::span<const std::byte>(p, n)) : to->dma_read(iova, std::span<std::byte>(p, n));
    }
    if (!ok) {
        g.lock();
        refuse(iova, n, is_write, "the client refused or did not answer");
    }
    return ok;
}

void dma_space::prefetch(std::uint64_t iova, bool for_write) noexcept {
    if (!pinned_here()) {
        return;   // a hint: not worth a lock (the data path prefetches inside its pinned pass)
    }
    const window* w = window_at(iova);
    if (w == nullptr || w->base == nullptr) {
        return;
    }
    const std::byte* p = w->base + (iova - w->iova);
    if (for_write) {
        // PREFETCHW: the line comes exclusive, ready for the store (executed as a NOP by x86
        // cores without it); a read prefetch would leave the store an ownership request to wait.
#if defined(__x86_64__)
        asm volatile("prefetchw %0" : : "m"(*p));
#else
        __builtin_prefetch(p, 1, 3);
#endif
    } else {
        __builtin_prefetch(p, 0, 3);
    }
}

const std::byte* dma_space::reference(std::uint64_t iova, std::size_t n, const unmap_guard& by) const noexcept {
    const auto g = hold();
    if (_guard.get() != &by || n == 0) {
        return nullptr;
    }
    const window* w = window_at(iova);
    if (w == nullptr || n > w->size - (iova - w->iova) || !w->device_reads || w->base == nullptr) {
        return nullptr;
    }
    return w->base + (iova - w->iova);
}

std::byte* dma_space::writable(std::uint64_t iova, std::size_t n) const noexcept {
    if (!pinned_here() || n == 0) {
        return nullptr;
    }
    const window* w = window_at(iova);
    if (w == nullptr || n > w->size - (iova - w->iova) || !w->device_writes || w->base == nullptr) {
        return nullptr;
    }
    return w->base + (iova - w->iova);
}

bool dma_space::read(std::uint64_t iova, std::span<std::byte> out) {
    return access(iova, out.data(), out.size(), false);
}

bool dma_space::write(std::uint64_t iova, std::span<const std::byte> in) {
    return access(iova, const_cast<std::byte*>(in.data()), in.size(), true);
}

bool dma_space::write_last_byte_last(std::uint64_t iova, std::span<const std::byte> in) {
    return access(iova, const_cast<std::byte*>(in.data()), in.size(), true, true);
}

}  // namespace rig::sim::vfio_user
