#pragma once
// The model's in-process Ethernet switch. Each function model attaches a port under its MAC
// address; a frame a port transmits goes to the port that owns the frame's destination MAC (a
// static table of the local functions). Each port has a receive queue that its owner's thread
// drains.
//
// Uplinks (attach_uplink: the UDP ports of udp_port.hpp, which carry the wire to other model
// processes or to a QEMU guest) take what no local function owns: a frame from a function to a
// MAC none of them has leaves by the one uplink, or, with several, by the uplink that MAC was
// last seen arriving on (learn(): a learning switch's table, IEEE 802.1D 7.8), or by every
// uplink when it was never seen (flooded, as a switch floods unknown unicast). A frame from an
// uplink goes to the local function owning its destination MAC or nowhere (never back out by
// an uplink: split horizon); it is then counted (no_route, and the uplink's unrouted()) and not
// captured. Without an uplink, unknown destinations are dropped and counted as before.
//
// Frame buffers come from a pool: transmitting takes a buffer from the pool, the receiver gives
// it back, so steady-state traffic allocates nothing. The pool grows in chunks of
// `chunk_frames` as traffic first needs them, up to its limit, and never shrinks. When the
// pool is empty `allocate` answers nullptr and the sender retries later.
//
// Lossless, as a RoCE data-centre fabric is (PFC, IEEE 802.1Qbb): a port's receive queue holds
// `port_queue_limit` frames, and a sender whose frames find it full is held back instead of
// dropping them. The frames that did not fit wait, in order, in the sender's port (send/flush
// below) and go first at its next flush; until then the sender's port is paused (its
// allocate() answers nullptr, so its queue pairs build nothing more, and their frames to other
// ports wait too, as a paused link carries nothing). Loss only comes from the faults below.
// The pause lasts only while the full queue's owner drains it: one that has not looked at its
// queue for `pause_watchdog` (stopped, dead) has what does not fit tail-dropped, as a switch's
// PFC watchdog drops in a pause storm. transmit(), a frame at a time from any thread, has no
// sender to hold back: a full queue tail-drops it.
//
// Faults, per switch and per port, uplinks included (a port's apply to frames from it and to
// it): drop and duplicate probabilities, delay (fixed + uniform jitter; a frame is delivered once
// due, so jitter reorders), and link down (frames from or to the port vanish). Optional pcap
// capture of every frame as transmitted (before faults), real bytes and ICRC, for tshark: those
// leaving by an uplink and those arriving by one for a local function included.
//
// Payload by reference (one copy per byte, not two): a sender may leave a frame's payload in
// its own DMA window (frame::payload_ref) instead of copying it into the frame; the receiver
// then copies it from there straight into its own memory (engine.cpp). Only for DMA spaces
// the wire guards (guard_unmaps), and only while nothing but the receiver sees the frame: the
// wire copies the payload into the frame (materializes it) before a capture seals it and
// before a fault duplicates or delays it, and, told by the DMA space before a window goes
// (vfio_user::unmap_guard), pauses the model core between two rounds and materializes every
// queued frame that points into the window, so that no frame outlives the memory it points
// to and no receiver reads it while it goes.
//
// Thread-safe: any thread may transmit on any port; one thread at a time receives on a port and
// releases the frames it received. A DMA space guarded by the wire must be reached only by the
// wire's model core, or by threads that never run while one of its windows goes (a test's
// single polling loop): the guard pauses the core, and no other thread.
//
// Per frame on the wire, without capture or faults: one pool lock to allocate (a queue pair's
// transmit takes spare_batch frames under one: allocate_to_send); a sender that
// sends in bursts (send, then flush: a queue pair's transmit) takes the shared config lock,
// the receiver's queue lock and the relaxed atomic counters once per run of frames to one
// port (spin locks: spin_lock.hpp; with one model core they are never contended), transmit()
// once per frame. The receiver takes
// every due frame of its queue under one queue lock into a list of its own, and gives released
// frames back to the pool in batches (at `release_batch` frames, and whenever a receive finds
// nothing due), so the sender and the receiver rarely meet on a lock.
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "abi/roce/packet.hpp"
#include "sim/roce/model_core.hpp"
#include "sim/roce/spin_lock.hpp"

namespace rig::sim::vfio_user {
class dma_space;
class unmap_guard;
}  // namespace rig::sim::vfio_user

namespace rig::sim::roce {

using clock = std::chrono::steady_clock;
using mac_address = rig::roce::mac_address;

// Ethernet + IPv6 + UDP + BTH + RETH + ImmDt + 4096 payload + ICRC fits (4194 bytes).
inline constexpr std::size_t frame_capacity = 4224;

struct frame {
    frame* next = nullptr;
    frame* prev = nullptr;
    clock::time_point due{};
    std::uint32_t size = 0;
    // false: the last four bytes are not yet the ICRC (rig::roce::encode_headers without seal).
    // The model's own senders leave frames unsealed, as nothing between two ports of this
    // switch can corrupt them; the wire seals a frame (rig::roce::seal) before anything outside
    // sees it: the pcap capture, a UDP port (udp_port.hpp). A receiver checks the ICRC of a
    // sealed frame only (so of every frame from outside). Frames from allocate() start sealed:
    // whoever fills them by hand gives the whole frame.
    bool sealed = true;
    // Not nullptr: the payload_bytes bytes at payload_at of `bytes` are not there but at
    // payload_ref, in the sender's DMA window (see above); data() then holds everything else.
    // Set by the sender after it validated the access as for a copy (key, bounds, rights, window).
    const std::byte* payload_ref = nullptr;
    std::uint32_t payload_at = 0;
    std::uint32_t payload_bytes = 0;
    alignas(64) std::array<std::byte, frame_capacity> bytes;
    std::span<const std::byte> data() const noexcept { return {bytes.data(), size}; }
    std::span<std::byte> writable() noexcept { return {bytes.data(), size}; }
};

struct faults {
    double drop = 0;       // probability a frame is lost
    double duplicate = 0;  // probability a frame is delivered twice
    std::chrono::nanoseconds delay{0};
    std::chrono::nanoseconds jitter{0};  // extra delay, uniform in [0, jitter]
};

struct wire_counters {
    std::uint64_t transmitted = 0;
    std::uint64_t delivered = 0;   // put in a receive queue (duplicates included)
    std::uint64_t dropped = 0;     // by fault injection or link down
    std::uint64_t duplicated = 0;
    std::uint64_t no_route = 0;    // destination MAC owned by no port
    // lost for want of room: the receive queue full of a port whose owner stopped draining it
    // (the pause watchdog), or of transmit() (no flow control); no buffer for a duplicate
    std::uint64_t overflow = 0;
    std::uint64_t pauses = 0;      // flushes that left frames held back (a full queue paused the sender)
    std::uint64_t by_reference = 0;  // transmitted with their payload by reference (frame::payload_ref)
    // frames whose payload by reference was copied into them (capture, a duplicating or
    // delaying fault, a window of the sender going while they waited): 0 on the plain path
    std::uint64_t materialized = 0;
    std::uint64_t flooded = 0;   // frames to an unknown MAC copied to every uplink (several uplinks)
    std::uint64_t learned = 0;   // MACs in the learning table (uplinks': learn())
};

// What learn() made of a source MAC.
enum class learn_result { known, learned, moved, local, full, multicast };

class wire;

class port {
public:
    port(const port&) = delete;
    port& operator=(const port&) = delete;
    ~port();  // detaches; frames queued for it go back to the pool

    const mac_address& mac() const noexcept { return _mac; }

    // A free buffer, or nullptr when the pool is empty (try again after receiving).
    frame* allocate() noexcept;
    // allocate() for the thread that sends on this port (send/flush below): the frames come from
    // the pool `spare_batch` at a time, under one pool lock, and wait in the port until used
    // (they count as in use, as released frames not yet given back do).
    frame* allocate_to_send() noexcept;
    // Sends `f` (f->size bytes) and gives it up, whatever happens to it.
    void transmit(frame* f, clock::time_point now) noexcept;
    // transmit() in two steps, for the thread that sends on this port (one at a time: its
    // queue pairs' poller): send() gives up `f` to go at the next flush(), which transmits every
    // frame given since, in order, at `now`. The switch's locks and counters are then taken
    // once per run of frames to one port instead of once per frame. Lossless (see above): the
    // frames a full destination queue does not take stay here, in order, and go first at the
    // next flush; until they have gone the port is paused and allocate() answers nullptr.
    void send(frame* f) noexcept;
    void flush(clock::time_point now) noexcept;
    // Frames sent here wait for room at their destination (PFC's pause): allocate() answers
    // nullptr until a flush has sent them. By the sending thread.
    bool paused() const noexcept { return _paused.load(std::memory_order_relaxed); }
    // The next frame due at `now`, or nullptr. The caller releases it. A receive that finds
    // nothing gives back to the pool the frames released since.
    frame* receive(clock::time_point now) noexcept;
    // By the receiving thread: `f` goes back to the pool (in batches: see above).
    void release(frame* f) noexcept;
    // Frames in the receive queue, due or not.
    std::size_t queued() const noexcept;
    // The guard of the DMA spaces this port's wire guards: what a sender passes to
    // memory::reference to get a payload by reference (frame::payload_ref).
    const vfio_user::unmap_guard& guard() const noexcept;
    // By the receiving thread, for a frame it holds: its payload by reference is copied in.
    void materialize(frame* f) noexcept;
    // wire::guard_unmaps, for the function that owns this port.
    void guard_unmaps(vfio_user::dma_space& dma);

    void set_faults(const faults& f);
    void set_link(bool up);
    bool link_up() const noexcept;

    // An uplink's: frames that arrived by it for no local function (dropped, not captured).
    std::uint64_t unrouted() const noexcept { return _unrouted.load(std::memory_order_relaxed); }
    bool uplink() const noexcept { return _uplink; }

private:
    friend class wire;
    port(wire& w, const mac_address& mac, bool uplink = false) : _wire(w), _mac(mac), _uplink(uplink) {
        mark_polled(clock::now());
    }
    void mark_polled(clock::time_point now) noexcept {
        _polled_at.store(now.time_since_epoch().count(), std::memory_order_relaxed);
    }
    // Whether a sender held back since `since` (its clock) may go on waiting for this port's
    // room at `now`: the owner looked at its queue since then, or pause_watchdog has not passed
    // yet. (A slow round of the model core is no stopped owner: it looks again in the next one.)
    bool draining(clock::time_point since, clock::time_point now) const noexcept;
    // The sender's: since when it is held back (paused), or `now` when it is not.
    clock::time_point held_since(clock::time_point now) const noexcept { return paused() ? _held_since : now; }
    void enqueue(frame* f) noexcept;  // sorted by due time
    void give_back_released() noexcept;

    wire& _wire;
    const mac_address _mac;   // an uplink's: zero (it owns no address; route() never matches it)
    const bool _uplink;
    std::atomic<std::uint64_t> _unrouted{0};
    mutable spin_lock _queue_lock;
    frame* _head = nullptr;  // earliest due
    frame* _tail = nullptr;
    std::size_t _queued = 0;  // in _head.._tail
    // the receiver's own: due frames taken from the queue at once (in due order), and frames
    // released but not yet given back to the pool
    frame* _ready = nullptr;
    std::atomic<std::size_t> _ready_count{0};  // read by queued() and the tail-drop check
    // the sender's own: sent, to go at the next flush; after a flush, the frames held back
    frame* _outbound = nullptr;
    frame* _outbound_last = nullptr;
    std::atomic<bool> _paused{false};   // _outbound holds frames held back by a full queue
    clock::time_point _held_since{};    // the last flush that paused the port or that moved held frames
    std::atomic<clock::rep> _polled_at{0};   // the owner's last receive(), by its clock
    frame* _spare = nullptr;     // the sender's own: taken from the pool, not yet used
    frame* _released = nullptr;  // linked by next, newest first
    frame* _released_last = nullptr;
    std::size_t _released_count = 0;
    // guarded by the wire's _config_lock
    faults _faults;
    bool _link_up = true;
};

class wire {
public:
    // Eight ports whose owners stopped draining them leave the others half the pool.
    static constexpr std::size_t default_pool_frames = 16384;
    // Frames are made a chunk at a time (warm-up only), each chunk aligned and sized to a 2 MiB
    // huge page with MADV_HUGEPAGE asked for: a run's first frames then cost one fault per chunk
    // instead of one per frame. Faults cost microseconds each in a VM, and a run's first 128
    // WRITEs waited ~4 ms on them (rig-perf's first-size transient, issue 17).
    static constexpr std::size_t chunk_bytes = std::size_t{2} << 20;
    static constexpr std::size_t chunk_frames = chunk_bytes / sizeof(frame);
    static constexpr std::size_t default_port_queue_limit = 1024;
    static constexpr std::size_t release_batch = 64;
    static constexpr std::size_t spare_batch = 16;
    // A sender waits for a full queue only while the queue's owner drains it: a port whose owner
    // has not looked at it for this long since the sender was held back (a function stopped, or
    // gone without detaching) tail-drops what does not fit, as a switch's PFC watchdog drops in
    // a pause storm.
    static constexpr std::chrono::milliseconds pause_watchdog{100};

    explicit wire(std::size_t pool_frames = default_pool_frames, std::size_t port_queue_limit = default_port_queue_limit,
                  std::uint64_t seed = 0x5eed);
    wire(const wire&) = delete;
    wire& operator=(const wire&) = delete;
    ~wire();  // every port must be gone first

    // A port under `mac`; misuse (a MAC already attached, multicast MAC) throws std::invalid_argument.
    std::unique_ptr<port> attach(const mac_address& mac);
    // An uplink (see above): it receives the frames for MACs no local function owns, and what it
    // transmits goes to the local functions only. Its faults and link act on frames from or to it.
    std::unique_ptr<port> attach_uplink();
    // `source` (a frame's source MAC) was seen arriving on `uplink`: frames to it leave by that
    // uplink. The table holds learned_limit MACs (then unknown MACs are flooded); a local
    // function's MAC or a multicast one is never learned (what learn() answers says which).
    learn_result learn(port& uplink, const mac_address& source);
    static constexpr std::size_t learned_limit = 4096;

    void set_faults(const faults& f);
    // What port::set_faults and port::set_link do, for the port attached under `mac` (a fault on
    // one function, set by whoever runs the wire: rig-nicsim). false: no port has that MAC.
    bool set_port_faults(const mac_address& mac, const faults& f);
    bool set_port_link(const mac_address& mac, bool up);
    // Starts capturing every transmitted frame into a pcap file (LINKTYPE_ETHERNET, µs stamps
    // from the system clock). false when the file cannot be created. Empty path: stop.
    bool capture(const std::string& path);

    wire_counters counters() const;
    // The model core (model_core.hpp) that runs the data path of every function on this wire,
    // made on first use: one thread for the whole switch.
    model_core& core();
    // Frames sent by this wire's ports may carry their payload by reference into `dma`'s
    // windows (frame::payload_ref): the wire is told before any of them goes, and materializes
    // the frames that point into it (see above). A dma_space serves one wire: another wire's
    // guard is replaced. The guard outlives the wire harmlessly (it then does nothing).
    void guard_unmaps(vfio_user::dma_space& dma);
    // Frames a transmit can still take: free ones, and those the pool may still grow by (frames a
    // receiver released since its last receive that found nothing, and a sender's spares, are
    // not counted).
    std::size_t free_frames() const;

private:
    friend class port;
    class guard;   // wire.cpp
    frame* take() noexcept;
    frame* take(std::size_t n) noexcept;   // up to n, linked by next (nullptr: none)
    void give(frame* f) noexcept;
    void give(frame* first, frame* last, std::size_t n) noexcept;  // a list linked by next
    void forward(port& from, frame* f, clock::time_point now) noexcept;
    // A list linked by next, in order; what a full destination held back (a tail of the list,
    // still linked), or nullptr.
    frame* forward_run(port& from, frame* list, clock::time_point now) noexcept;
    // false: held back (`hold`, the destination's queue is full and drained), `f` untouched;
    // else `f` is given up. Without `hold` a full queue tail-drops.
    bool forward_locked(port& from, frame* f, clock::time_point now, bool hold) noexcept;
    // The local port owning f's destination, else (from a local port) the uplink to take; with
    // several uplinks and an unknown destination, nullptr and `flood`.
    port* route(const frame& f, const port& from, bool& flood) const noexcept;
    // forward_locked() once the destination is known (`capture`: this copy goes into the capture)
    bool deliver(port& from, port* to, frame* f, clock::time_point now, bool hold, bool capture) noexcept;
    void flood(port& from, frame* f, clock::time_point now) noexcept;   // a copy to each uplink
    void write_capture(frame* f) noexcept;   // with _state_lock held
    void detach(port& p) noexcept;
    double uniform() noexcept;  // with _state_lock held
    void materialize(frame& f) noexcept;
    // the guard's: with the core paused (or on its thread), every queued frame whose payload
    // lies in `going` is materialized
    void forget(std::span<const std::byte> going) noexcept;
    model_core* pause_core();   // nullptr: no core, or this is its thread (nothing to wait for)

    const std::size_t _queue_limit;
    const std::size_t _pool_limit;
    mutable spin_lock _pool_lock;
    struct chunk_free {
        void operator()(frame* f) const noexcept;
    };
    static frame* make_chunk(std::size_t n) noexcept;   // nullptr: no memory
    void grow_locked() noexcept;                        // with _pool_lock held
    std::vector<std::unique_ptr<frame, chunk_free>> _chunks;
    std::size_t _frames_made = 0;
    frame* _free = nullptr;
    std::size_t _free_count = 0;

    mutable shared_spin_lock _config_lock;  // ports table, learning table and fault settings
    std::vector<port*> _ports;    // the local functions'
    std::vector<port*> _uplinks;
    std::vector<std::pair<mac_address, port*>> _learned;
    faults _faults;

    mutable std::mutex _state_lock;  // random state, capture file
    std::uint64_t _random;
    std::FILE* _capture = nullptr;
    std::atomic<bool> _capturing{false};  // _capture != nullptr, read without _state_lock
    struct alignas(64) atomic_counters {
        std::atomic<std::uint64_t> transmitted{0}, delivered{0}, dropped{0}, duplicated{0}, no_route{0}, overflow{0},
            materialized{0}, by_reference{0}, pauses{0}, flooded{0};
    };
    atomic_counters _counters;

    std::shared_ptr<guard> _guard;   // shared with the DMA spaces it guards
    std::mutex _core_lock;
    std::unique_ptr<model_core> _core;  // last: its thread stops before the rest goes
};

}  // namespace rig::sim::roce
