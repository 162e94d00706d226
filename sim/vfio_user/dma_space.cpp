#include "sim/vfio_user/dma_space.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>
#include <sys/mman.h>

#include "abi/barriers.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::vfio_user {

namespace {
constexpr std::uint64_t page = 4096;
// The dma_space this thread holds pinned (dma_space::pin), if any.
thread_local dma_space* pinned_by_this_thread = nullptr;

const char* not_permitted(bool is_write) {
    return is_write ? "DMA window not writable by the device" : "DMA window not readable by the device";
}
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

// with _lock held, or this thread's pin: the window that holds `iova`, or nullptr
const dma_space::window* dma_space::containing(std::uint64_t iova) const noexcept {
    auto it = _windows.upper_bound(iova);
    if (it == _windows.begin()) {
        return nullptr;
    }
    const window& w = std::prev(it)->second;
    return iova - w.iova < w.size ? &w : nullptr;
}

int dma_space::map(std::uint64_t iova, std::uint64_t size, bool device_reads, bool device_writes, int fd,
                   std::uint64_t offset) {
    if (size == 0 || iova + size < iova) {
        return EINVAL;
    }
    const auto g = hold();
    // the first window at or after iova, and the one before it, are the only candidates to overlap
    auto next = _windows.lower_bound(iova);
    if ((next != _windows.end() && next->first < iova + size) || containing(iova) != nullptr) {
        return EEXIST;
    }
    std::byte* base = nullptr;
    mapped_files::file* file = nullptr;
    if (fd >= 0) {
        const int prot = (device_reads ? PROT_READ : 0) | (device_writes ? PROT_WRITE : 0);
        const auto f = _files.take(fd, offset, size, prot);
        if (!f) {
            return f.error();
        }
        file = *f;
        base = file->base + offset;
    }
    _windows.emplace_hint(next, iova, window{iova, size, device_reads, device_writes, base, file});
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
    // with the dma_space's lock held, before the memory goes
    void forget(const std::byte* lo, const std::byte* hi) const noexcept {
        if (_guard && lo != hi) {
            _guard->forget({lo, static_cast<std::size_t>(hi - lo)});
        }
    }

private:
    std::shared_ptr<unmap_guard> _guard;
};

int dma_space::unmap(std::uint64_t iova, std::uint64_t size) {
    if (size == 0 || iova + (size - 1) < iova) {
        return EINVAL;
    }
    return remove(iova, iova + (size - 1), true);
}

void dma_space::unmap_every_window() { remove(0, ~std::uint64_t{0}, true); }

void dma_space::unmap_all() { remove(0, ~std::uint64_t{0}, false); }

// The windows inside [first, last]. As vfio_iommu_type1's vfio_dma_do_unmap for a v2 container:
// a span that cuts a window (one that starts before `first` or ends after `last`) is refused
// with EINVAL and nothing goes; a span that holds no window is no error. Each run of windows
// that follow each other in host memory is told to the guard at once, before its file mapping
// can go; the observer hears of each window after the lock is given up (it may take its own,
// which is also held around DMA accesses).
int dma_space::remove(std::uint64_t first, std::uint64_t last, bool tell) {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> gone;
    std::shared_ptr<unmap_observer> observer;
    {
        const guarded guard(*this);   // before the lock: the guard may wait for a data path holding it
        const auto g = hold();
        const window* a = containing(first);
        const window* b = containing(last);
        if ((a != nullptr && a->iova != first) || (b != nullptr && last - b->iova != b->size - 1)) {
            return EINVAL;
        }
        const auto begin = _windows.lower_bound(first);
        auto end = begin;
        std::size_t count = 0;
        const std::byte* lo = nullptr;
        const std::byte* hi = nullptr;
        for (; end != _windows.end() && end->first <= last; ++end, ++count) {
            const window& w = end->second;
            if (w.base != nullptr) {
                if (w.base != hi) {
                    guard.forget(lo, hi);
                    lo = w.base;
                }
                hi = w.base + w.size;
            }
        }
        guard.forget(lo, hi);
        if (tell) {
            gone.reserve(count);   // the one allocation, before anything goes (may throw)
        }
        // after the guard forgot every pointer into them, the windows give their files back
        for (auto it = begin; it != end; ++it) {
            if (it->second.file != nullptr) {
                _files.give_back(it->second.file);
            }
            if (tell) {
                gone.emplace_back(it->second.iova, it->second.size);
            }
        }
        _windows.erase(begin, end);
        _last = nullptr;
        _removals.fetch_add(1, std::memory_order_relaxed);
        if (tell) {
            observer = _unmap_observer.lock();
        }
    }
    if (observer) {
        for (const auto& [iova, size] : gone) {
            observer->unmapped(iova, size);
        }
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
    const window* w = containing(iova);
    return w != nullptr && w->base == nullptr;
}

std::size_t dma_space::file_mappings() const {
    const auto g = hold();
    return _files.count();
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
    const window* w = containing(iova);
    if (w != nullptr) {
        _last = w;
    }
    return w;
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
        if (w.base != nullptr) {
            return across(iova, p, n, is_write, last_byte_last);
        }
        refuse(iova, n, is_write, "runs past the end of its DMA window");
        return false;
    }
    if (is_write ? !w.device_writes : !w.device_reads) {
        refuse(iova, n, is_write, not_permitted(is_write));
        return false;
    }
    if (w.base != nullptr) {
        return copy(w, at, p, n, is_write, last_byte_last);
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

// with _lock held, or this thread's pin: n bytes at `at` of a window with fd
bool dma_space::copy(const window& w, std::uint64_t at, std::byte* p, std::size_t n, bool is_write,
                     bool last_byte_last) {
    if (is_write && last_byte_last) {
        std::memcpy(w.base + at, p, n - 1);
        // the reader polls the last byte: the rest is visible before it (the barrier also
        // keeps the compiler from merging the two copies)
        ::rig::abi::barrier::model_publish();
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

// with _lock held, or this thread's pin: an access that runs from one window with fd into the
// next ones, as a DMA over IOVA pages a vIOMMU mapped one by one (QEMU sends a DMA_MAP per 4 KiB
// page; the guest's pages behind them lie anywhere in its RAM file). Every piece is checked
// before any is copied: a refused access performs nothing. The last byte goes last.
bool dma_space::across(std::uint64_t iova, std::byte* p, std::size_t n, bool is_write, bool last_byte_last) {
    std::uint64_t next = iova;
    for (std::size_t left = n; left > 0;) {
        const window* w = containing(next);
        if (w == nullptr || w->base == nullptr) {
            refuse(iova, n, is_write, "runs past the end of its DMA window");
            return false;
        }
        if (is_write ? !w->device_writes : !w->device_reads) {
            refuse(iova, n, is_write, not_permitted(is_write));
            return false;
        }
        const std::uint64_t k = std::min<std::uint64_t>(left, w->size - (next - w->iova));
        left -= k;
        next += k;
    }
    next = iova;
    for (std::size_t done = 0; done < n;) {
        const window* w = containing(next);
        const std::uint64_t at = next - w->iova;
        const std::size_t k = std::min<std::uint64_t>(n - done, w->size - at);
        copy(*w, at, p + done, k, is_write, last_byte_last && done + k == n);
        done += k;
        next += k;
    }
    return true;
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

void dma_space::touch(std::uint64_t iova, std::uint64_t n, bool for_write) noexcept {
    constexpr std::uint64_t page = 4096;
    const auto g = hold();
    for (std::uint64_t at = iova & ~(page - 1); at < iova + n; at += page) {
        const std::uint64_t first = std::max(at, iova);
        const window* w = window_at(first);
        if (w == nullptr || w->base == nullptr || !(for_write ? w->device_writes : w->device_reads)) {
            continue;
        }
        auto* p = reinterpret_cast<std::uint8_t*>(w->base + (first - w->iova));
        if (for_write) {
            std::atomic_ref<std::uint8_t>(*p).fetch_add(0, std::memory_order_relaxed);
        } else {
            static_cast<void>(std::atomic_ref<std::uint8_t>(*p).load(std::memory_order_relaxed));
        }
    }
}

namespace {
// The host address of [iova, +n) when it lies wholly in `w` (which holds `iova`), or nullptr:
// no window, or no bytes.
std::byte* inside(const dma_space::host_window& w, std::uint64_t iova, std::size_t n) noexcept {
    if (w.size == 0 || n == 0 || n > w.size - (iova - w.iova)) {
        return nullptr;
    }
    return w.base + (iova - w.iova);
}
}  // namespace

const std::byte* dma_space::reference(std::uint64_t iova, std::size_t n, const unmap_guard& by) const noexcept {
    const auto g = hold();
    return _guard.get() == &by ? inside(allowed_window(iova, false), iova, n) : nullptr;
}

// with this thread's pin: the host address of [iova, +n) in one window with fd that allows the
// device's access, or nullptr
std::byte* dma_space::host_address(std::uint64_t iova, std::size_t n, bool for_write) const noexcept {
    return inside(window_for(iova, for_write), iova, n);
}

std::byte* dma_space::writable(std::uint64_t iova, std::size_t n) const noexcept { return host_address(iova, n, true); }

dma_space::host_window dma_space::window_for(std::uint64_t iova, bool for_write) const noexcept {
    return pinned_here() ? allowed_window(iova, for_write) : host_window{};
}

dma_space::host_window dma_space::allowed_window(std::uint64_t iova, bool for_write) const noexcept {
    const window* w = window_at(iova);
    if (w == nullptr || !(for_write ? w->device_writes : w->device_reads) || w->base == nullptr) {
        return {};
    }
    return {w->iova, w->base, w->size};
}

const std::byte* dma_space::readable(std::uint64_t iova, std::size_t n) const noexcept {
    return host_address(iova, n, false);
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
