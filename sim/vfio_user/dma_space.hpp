#pragma once
// The model's IOMMU: how a device model reaches the client's memory by IOVA, and only the memory
// the client mapped. QEMU docs/interop/vfio-user.rst, "VFIO_USER_DMA_MAP/UNMAP",
// "VFIO_USER_DMA_READ/WRITE".
//
// A window announced with an fd is served from its file's one mapping (dma_files.hpp: each file
// mmapped once, MAP_SHARED, whatever number of windows lie in it) and accessed directly; one
// announced without an fd is reached through VFIO_USER_DMA_READ/WRITE messages to the client,
// which only works on the server's thread (from a device callback) while the client waits for a
// reply.
// An access that does not lie wholly inside windows with fd that follow each other in IOVA
// (or inside one window without fd), each with the needed permission, is refused, never
// performed, and reported: counted, logged, and kept in faults(). Across windows it is copied
// piece by piece, as an IOMMU translates each page of a DMA on its own.
//
// Thread-safe. An access holds the lock while it copies, so DMA_UNMAP, which takes the lock to
// drop the window, waits for accesses in flight (the spec wants them finished before the reply).
// A thread that makes many accesses in a row (a device model's data-path pass) may hold the
// lock once for all of them with a dma_space::pin: its accesses then take no lock, and a map or
// unmap waits until the pin goes, as it waits for one access in flight.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "sim/vfio_user/dma_files.hpp"

namespace rig::sim::vfio_user {

struct dma_fault {
    std::uint64_t iova = 0;
    std::uint64_t bytes = 0;
    bool write = false;   // the device tried to write client memory
    std::string reason;
};

// The server's side of windows without fd (its session with the client).
class in_band_dma {
public:
    virtual bool dma_read(std::uint64_t iova, std::span<std::byte> out) = 0;
    virtual bool dma_write(std::uint64_t iova, std::span<const std::byte> in) = 0;

protected:
    ~in_band_dma() = default;
};

// Told when the client unmaps a window (VFIO_USER_DMA_UNMAP), after the window is gone: a
// device model that owns memory there (mlx5 firmware pages) reports the loss. Not told by
// unmap_all (the client is gone and the device is reset with it, as vfio-pci resets a
// function its user released).
class unmap_observer {
public:
    virtual void unmapped(std::uint64_t iova, std::uint64_t size) = 0;

protected:
    ~unmap_observer() = default;
};

// Told around the removal of every window with fd (DMA_UNMAP, unmap_all, the destructor), by
// whoever keeps host pointers into windows past an access: the model's wire, whose frames may
// carry their payload by reference into the sender's window until the receiver copies it
// (sim/roce/wire.hpp). hold() comes first, without dma_space's lock (it may wait for the
// threads that read through such pointers: the model core); forget() then gets the host bytes
// of the windows about to go (a run of windows that follow each other in host memory at once),
// still mapped, with the lock held (it must make no access to this dma_space); release() comes
// after their file's mapping went, when theirs was its last window. So no pointer into a window
// outlives it, and nothing reads through one while it goes.
class unmap_guard {
public:
    virtual void hold() = 0;
    virtual void forget(std::span<const std::byte> going) noexcept = 0;
    virtual void release() noexcept = 0;

protected:
    ~unmap_guard() = default;
};

class dma_space {
public:
    static constexpr std::size_t faults_kept = 64;

    dma_space() = default;
    dma_space(const dma_space&) = delete;
    dma_space& operator=(const dma_space&) = delete;
    ~dma_space() { unmap_all(); }

    // Holds the DMA view steady for this thread's accesses while it lives (one lock, not one
    // per access). Windows without fd are refused to it: their accesses give the lock up for a
    // round trip to the client. A thread holds one pin at a time (a second, on any dma_space,
    // is misuse: std::invalid_argument) and makes no map or unmap meanwhile.
    class pin {
    public:
        explicit pin(dma_space& d);
        ~pin();
        pin(const pin&) = delete;
        pin& operator=(const pin&) = delete;

    private:
        dma_space& _d;
    };

    // ---- the device's accesses ----
    bool read(std::uint64_t iova, std::span<std::byte> out);
    bool write(std::uint64_t iova, std::span<const std::byte> in);
    // One access that stores the last byte of `in` after all the others, ordered by a release
    // fence: a completion whose last byte holds its owner bit, which a polling driver reads
    // first (mlx5 CQE op_own). A window without fd gets two messages, last byte second.
    bool write_last_byte_last(std::uint64_t iova, std::span<const std::byte> in);
    // A hint that the device will soon write (for_write) or read the cache line at `iova`: the
    // line is asked for now, so that several such lines travel at once instead of each access
    // waiting for its own. A driver polls its CQ and writes its WQEs, so those lines sit in
    // another core's cache, and an access to one waits a cross-core transfer. Moves nothing,
    // refuses nothing: outside a window with fd it does nothing.
    void prefetch(std::uint64_t iova, bool for_write) noexcept;
    // Touches each page of [iova, +n) once, as the device would read (or write) it, changing no
    // byte: a write touch is an atomic add of 0. For a queue or CQ just made, so that a host's
    // cost of a process's first access to a page (several µs under shadow paging: docs/
    // architecture.md "First touches") is paid when the object is made, not by its first
    // entries. Refuses nothing and reports nothing: pages outside a window with fd are skipped.
    void touch(std::uint64_t iova, std::uint64_t n, bool for_write) noexcept;
    // The host address of [iova, +n), for a device that reads those bytes later instead of
    // copying them now (one copy instead of two: sim/roce/wire.hpp), when they lie wholly in
    // one window with fd that the device may read and `by` guards this dma_space (guard_unmaps):
    // the pointer stays good until `by` is told the window goes. nullptr otherwise, refusing
    // and reporting nothing: the caller then reads by read(), which refuses and reports as ever.
    const std::byte* reference(std::uint64_t iova, std::size_t n, const unmap_guard& by) const noexcept;
    // The host address of [iova, +n) for a device write made soon, by this thread, while it
    // holds its pin (no window goes until the pin does): when it lies wholly in one window with
    // fd that the device may write. nullptr otherwise (refusing and reporting nothing: write()).
    std::byte* writable(std::uint64_t iova, std::size_t n) const noexcept;
    // The same for a read: the host address of [iova, +n) when it lies wholly in one window
    // with fd that the device may read, for this thread while it holds its pin; nullptr
    // otherwise (refusing and reporting nothing: read()).
    const std::byte* readable(std::uint64_t iova, std::size_t n) const noexcept;
    // For this thread while it holds its pin: the window with fd that holds `iova` and allows the
    // device's access (a write, or a read), as the IOVA and host address of its first byte and
    // its size; size 0 when there is none. For a caller that serves many accesses from one
    // look-up while the pin lasts (roce::memory's host runs).
    struct host_window {
        std::uint64_t iova = 0;
        std::byte* base = nullptr;
        std::uint64_t size = 0;
    };
    host_window window_for(std::uint64_t iova, bool for_write) const noexcept;
    // How many times windows went (unmap, unmap_all). A pointer readable() or writable() gave
    // stays good, in later pins too, while this count is the same: a data path may keep one
    // (a doorbell record it reads every pass) instead of translating it each time.
    std::uint64_t removals() const noexcept { return _removals.load(std::memory_order_relaxed); }

    std::size_t window_count() const;
    // true when iova lies in a window announced without fd: the device reaches it only by
    // message, from the server's thread, while the client waits for a reply.
    bool by_message(std::uint64_t iova) const;
    std::uint64_t fault_count() const;
    std::vector<dma_fault> faults() const;   // the latest faults_kept, oldest first

    // ---- the server's side ----
    // 0 or an errno: EEXIST when it overlaps a window, EINVAL when the fd cannot back it,
    // EACCES when its mode refuses the access, ENOMEM/EFAULT when its pages cannot be faulted in.
    // The fd stays the caller's (the mapping keeps the file); -1: a window without fd.
    int map(std::uint64_t iova, std::uint64_t size, bool device_reads, bool device_writes, int fd,
            std::uint64_t offset);
    // The windows inside [iova, +size), any number (none: 0 as well), as vfio_iommu_type1's
    // vfio_dma_do_unmap (v2). EINVAL when the span is empty, wraps, or cuts a window, which then
    // all stay. The observer is told of each window.
    int unmap(std::uint64_t iova, std::uint64_t size);
    // Every window, for the client (VFIO_DMA_UNMAP_FLAG_ALL): the observer is told of each.
    void unmap_every_window();
    // Every window, as the client is gone: the observer is not told (unmap_observer).
    void unmap_all();
    // mmaps held for windows with fd: one per file (and protection), not one per window
    std::size_t file_mappings() const;
    // Where windows without fd are served, and from which thread; nullptr: nowhere.
    void set_in_band(in_band_dma* to, std::thread::id thread);
    // The one observer of unmaps, held weakly: either side may go first. Replaces any other.
    void watch_unmaps(std::weak_ptr<unmap_observer> observer);
    // The one guard told before windows go (unmap_guard), held strongly (the guard outlives its
    // owner's end and then does nothing). Replaces any other: a dma_space serves one wire.
    void guard_unmaps(std::shared_ptr<unmap_guard> guard);

private:
    class guarded;   // a removal's hold() and release() of the guard (dma_space.cpp)
    struct window {
        std::uint64_t iova;
        std::uint64_t size;
        bool device_reads;
        bool device_writes;
        std::byte* base;              // nullptr: no fd, reached in band
        mapped_files::file* file;     // the mapping base lies in; nullptr: no fd
    };
    using window_map = std::map<std::uint64_t, window>;
    const window* window_at(std::uint64_t iova) const noexcept;
    const window* containing(std::uint64_t iova) const noexcept;   // no cache: map, unmap, across
    int remove(std::uint64_t first, std::uint64_t last, bool tell);   // [first, last], inclusive
    bool copy(const window& w, std::uint64_t at, std::byte* p, std::size_t n, bool is_write, bool last_byte_last);
    bool across(std::uint64_t iova, std::byte* p, std::size_t n, bool is_write, bool last_byte_last);
    bool access(std::uint64_t iova, std::byte* p, std::size_t n, bool is_write, bool last_byte_last = false);
    // _lock, unless this thread holds it by a pin
    std::unique_lock<std::mutex> hold() const;
    bool pinned_here() const noexcept;
    // with _lock held or this thread's pin: window_for's answer (reference, window_for)
    host_window allowed_window(std::uint64_t iova, bool for_write) const noexcept;
    std::byte* host_address(std::uint64_t iova, std::size_t n, bool for_write) const noexcept;
    void refuse(std::uint64_t iova, std::uint64_t n, bool is_write, std::string reason);

    mutable std::mutex _lock;
    mapped_files _files;                        // before _windows: outlives the windows in it
    window_map _windows;                        // by IOVA, never overlapping
    // The window the last access found (a node of _windows, forgotten when one goes): a data
    // path's accesses come in runs into one window, which then costs no tree walk. Read and
    // written with _lock held, as every access holds it.
    mutable const window* _last = nullptr;
    in_band_dma* _in_band = nullptr;
    std::thread::id _in_band_thread;
    std::weak_ptr<unmap_observer> _unmap_observer;
    std::shared_ptr<unmap_guard> _guard;
    std::uint64_t _fault_count = 0;
    std::deque<dma_fault> _faults;
    std::atomic<std::uint64_t> _removals{0};
};

}  // namespace rig::sim::vfio_user
