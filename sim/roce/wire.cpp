#include "sim/roce/wire.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <shared_mutex>
#include <stdexcept>
#include <type_traits>

#include "sim/vfio_user/dma_space.hpp"
#include "sim/vfio_user/log.hpp"

namespace rig::sim::roce {

// What the DMA spaces a wire guards tell it before a window goes (vfio_user::unmap_guard):
// the core pauses between two rounds (no receiver is mid-copy from the window, no sender
// makes a new reference into it), the queued frames pointing into the window are
// materialized, the munmap happens, the core goes on. Held by those DMA spaces, so it
// outlives the wire, which orphans it as it goes.
class wire::guard final : public vfio_user::unmap_guard {
public:
    explicit guard(wire& w) noexcept : _wire(&w) {}
    void hold() override {
        _lock.lock();   // until release(): the wire stays while a removal is under way
        if (_wire != nullptr) {
            _paused = _wire->pause_core();
        }
    }
    void forget(std::span<const std::byte> going) noexcept override {
        if (_wire != nullptr) {
            _wire->forget(going);
        }
    }
    void release() noexcept override {
        if (_paused != nullptr) {
            _paused->resume();
            _paused = nullptr;
        }
        _lock.unlock();
    }
    void orphan() noexcept {
        std::lock_guard g(_lock);
        _wire = nullptr;
    }

private:
    std::mutex _lock;
    wire* _wire;
    model_core* _paused = nullptr;
};

namespace {

mac_address destination_of(const frame& f) noexcept {
    mac_address m;
    std::memcpy(m.data(), f.bytes.data(), m.size());
    return m;
}

std::string mac_text(const mac_address& m) {
    std::string s;
    for (std::size_t i = 0; i < m.size(); ++i) {
        static constexpr char digits[] = "0123456789abcdef";
        const auto b = static_cast<std::uint8_t>(m[i]);
        if (i != 0) {
            s += ':';
        }
        s += digits[b >> 4];
        s += digits[b & 15];
    }
    return s;
}

}  // namespace

// ---- port ---------------------------------------------------------------------------------------

port::~port() {
    _wire.detach(*this);
    give_back_released();
    while (_spare != nullptr) {
        frame* f = _spare;
        _spare = f->next;
        _wire.give(f);
    }
    while (_outbound != nullptr) {   // sent but never flushed, or held back: they leave with the port
        frame* f = _outbound;
        _outbound = f->next;
        _wire.give(f);
    }
    std::lock_guard g(_queue_lock);
    for (frame** list : {&_head, &_ready}) {
        while (*list != nullptr) {
            frame* f = *list;
            *list = f->next;
            _wire.give(f);
        }
    }
    _tail = nullptr;
    _queued = 0;
    _ready_count.store(0, std::memory_order_relaxed);
}

frame* port::allocate() noexcept { return paused() ? nullptr : _wire.take(); }

frame* port::allocate_to_send() noexcept {
    if (paused()) {
        return nullptr;
    }
    if (_spare == nullptr && (_spare = _wire.take(wire::spare_batch)) == nullptr) {
        return nullptr;
    }
    frame* f = _spare;
    _spare = f->next;
    f->next = nullptr;
    return f;
}

void port::transmit(frame* f, clock::time_point now) noexcept { _wire.forward(*this, f, now); }

void port::send(frame* f) noexcept {
    f->next = nullptr;
    (_outbound_last != nullptr ? _outbound_last->next : _outbound) = f;
    _outbound_last = f;
}

void port::flush(clock::time_point now) noexcept {
    if (_outbound != nullptr) {
        // what is held back is a tail of the list: _outbound_last stays its last frame
        frame* const first = _outbound;
        _outbound = _wire.forward_run(*this, first, now);
        const bool held = _outbound != nullptr;
        if (!held) {
            _outbound_last = nullptr;
        } else if (!paused() || _outbound != first) {
            _held_since = now;   // newly held back, or some went: the watchdog counts from now
        }
        if (held && !paused()) {
            _wire._counters.pauses.fetch_add(1, std::memory_order_relaxed);
        }
        _paused.store(held, std::memory_order_relaxed);
    }
}

bool port::draining(clock::time_point since, clock::time_point now) const noexcept {
    const clock::time_point polled{clock::duration(_polled_at.load(std::memory_order_relaxed))};
    return polled >= since || now - since < wire::pause_watchdog;
}

void port::release(frame* f) noexcept {
    f->prev = nullptr;
    f->next = _released;
    if (_released == nullptr) {
        _released_last = f;
    }
    _released = f;
    if (++_released_count >= wire::release_batch) {
        give_back_released();
    }
}

void port::give_back_released() noexcept {
    if (_released != nullptr) {
        _wire.give(_released, _released_last, _released_count);
        _released = _released_last = nullptr;
        _released_count = 0;
    }
}

frame* port::receive(clock::time_point now) noexcept {
    if (_ready == nullptr) {
        mark_polled(now);   // the owner drains this port: senders wait for its room (pause_watchdog)
        // every frame due now leaves the shared queue at once (it is sorted by due time). When
        // the tail is due, all are: the common case (no delay asked for) takes the queue whole,
        // without a walk that misses the cache once a frame (bench-scale, 1024 queue pairs).
        std::size_t n = 0;
        {
            std::lock_guard g(_queue_lock);
            frame* last = nullptr;
            if (_tail != nullptr && _tail->due <= now) {
                last = _tail;
                n = _queued;
            } else {
                for (frame* x = _head; x != nullptr && x->due <= now; x = x->next) {
                    last = x;
                    ++n;
                }
            }
            if (last != nullptr) {
                _ready = _head;
                _head = last->next;
                last->next = nullptr;
                if (_head != nullptr) {
                    _head->prev = nullptr;
                } else {
                    _tail = nullptr;
                }
                _queued -= n;
                _ready_count.store(n, std::memory_order_relaxed);
            }
        }
        if (n == 0) {
            give_back_released();  // nothing more to receive now: the pool gets its frames back
            return nullptr;
        }
    }
    if (_ready->due > now) {
        return nullptr;  // taken at a later `now` than this one (a caller whose clock is not ours)
    }
    frame* f = _ready;
    _ready = f->next;
    if (_ready != nullptr) {
        __builtin_prefetch(_ready);   // the next call's first touch of it: its line comes meanwhile
    }
    _ready_count.store(_ready_count.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
    f->next = f->prev = nullptr;
    return f;
}

const vfio_user::unmap_guard& port::guard() const noexcept { return *_wire._guard; }

void port::guard_unmaps(vfio_user::dma_space& dma) { _wire.guard_unmaps(dma); }

void port::materialize(frame* f) noexcept {
    if (f->payload_ref != nullptr) {
        _wire.materialize(*f);
    }
}

std::size_t port::queued() const noexcept {
    std::lock_guard g(_queue_lock);
    return _queued + _ready_count.load(std::memory_order_relaxed);
}

// with _queue_lock held: insert keeping due order; equal due times keep their sending order
void port::enqueue(frame* f) noexcept {
    frame* after = _tail;
    while (after != nullptr && after->due > f->due) {
        after = after->prev;
    }
    f->prev = after;
    f->next = after != nullptr ? after->next : _head;
    if (f->next != nullptr) {
        f->next->prev = f;
    } else {
        _tail = f;
    }
    if (after != nullptr) {
        after->next = f;
    } else {
        _head = f;
    }
    ++_queued;
}

void port::set_faults(const faults& f) {
    std::unique_lock g(_wire._config_lock);
    _faults = f;
}

void port::set_link(bool up) {
    std::unique_lock g(_wire._config_lock);
    _link_up = up;
}

bool port::link_up() const noexcept {
    std::shared_lock g(_wire._config_lock);
    return _link_up;
}

// ---- wire ---------------------------------------------------------------------------------------

wire::wire(std::size_t pool_frames, std::size_t port_queue_limit, std::uint64_t seed)
    : _queue_limit(port_queue_limit), _pool_limit(pool_frames), _random(seed | 1), _guard(std::make_shared<guard>(*this)) {
    if (pool_frames == 0 || port_queue_limit == 0) {
        throw std::invalid_argument("roce::wire: pool and port queues need room for one frame");
    }
    _chunks.reserve((pool_frames + chunk_frames - 1) / chunk_frames);   // growth never reallocates
}

wire::~wire() {
    _guard->orphan();
    capture("");
}

void wire::guard_unmaps(vfio_user::dma_space& dma) { dma.guard_unmaps(_guard); }

model_core* wire::pause_core() {
    model_core* c = nullptr;
    {
        // not held while pausing: a round may wait for a function lock whose holder waits for
        // this one (core(), from a data path being made)
        std::lock_guard g(_core_lock);
        c = _core.get();
    }
    if (c == nullptr || c->on_core_thread()) {
        return nullptr;
    }
    c->pause();
    return c;
}

void wire::materialize(frame& f) noexcept {
    std::memcpy(f.bytes.data() + f.payload_at, f.payload_ref, f.payload_bytes);
    f.payload_ref = nullptr;
    _counters.materialized.fetch_add(1, std::memory_order_relaxed);
}

void wire::forget(std::span<const std::byte> going) noexcept {
    const auto lo = reinterpret_cast<std::uintptr_t>(going.data());
    const auto in_going = [&](const frame* f) {
        return f->payload_ref != nullptr && reinterpret_cast<std::uintptr_t>(f->payload_ref) - lo < going.size();
    };
    std::shared_lock config(_config_lock);
    for (const std::vector<port*>* ports : {&_ports, &_uplinks}) {
        for (port* p : *ports) {
            // the receiver's own list too: it is not running (the core is paused, or this is it)
            std::lock_guard q(p->_queue_lock);
            // and what a sender holds back (its thread is not running either)
            for (frame* list : {p->_head, p->_ready, p->_outbound}) {
                for (frame* x = list; x != nullptr; x = x->next) {
                    if (in_going(x)) {
                        materialize(*x);
                    }
                }
            }
        }
    }
}

model_core& wire::core() {
    std::lock_guard g(_core_lock);
    if (!_core) {
        _core = std::make_unique<model_core>();
    }
    return *_core;
}

std::unique_ptr<port> wire::attach(const mac_address& mac) {
    if ((static_cast<std::uint8_t>(mac[0]) & 1) != 0) {
        throw std::invalid_argument("roce::wire::attach: " + mac_text(mac) + " is a multicast address");
    }
    std::unique_lock g(_config_lock);
    for (port* p : _ports) {
        if (p->_mac == mac) {
            throw std::invalid_argument("roce::wire::attach: " + mac_text(mac) + " is already attached");
        }
    }
    std::unique_ptr<port> p(new port(*this, mac));
    _ports.push_back(p.get());
    g.unlock();
    // the first chunk now, on the control path, not under a data path's first burst
    std::lock_guard pool(_pool_lock);
    if (_frames_made == 0) {
        grow_locked();
    }
    return p;
}

std::unique_ptr<port> wire::attach_uplink() {
    std::unique_lock g(_config_lock);
    std::unique_ptr<port> p(new port(*this, mac_address{}, true));
    _uplinks.push_back(p.get());
    return p;
}

learn_result wire::learn(port& uplink, const mac_address& source) {
    if ((static_cast<std::uint8_t>(source[0]) & 1) != 0) {
        return learn_result::multicast;
    }
    const auto entry = [&] {
        return std::ranges::find_if(_learned, [&](const auto& e) { return e.first == source; });
    };
    {
        // the common case, a MAC seen before on this uplink, under the shared lock only
        std::shared_lock g(_config_lock);
        for (const port* p : _ports) {
            if (p->_mac == source) {
                return learn_result::local;   // a loop, or another process with our MACs
            }
        }
        const auto at = entry();
        if (at != _learned.end() && at->second == &uplink) {
            return learn_result::known;
        }
    }
    std::unique_lock g(_config_lock);
    const auto at = entry();
    if (at != _learned.end()) {
        const bool moved = at->second != &uplink;
        at->second = &uplink;
        return moved ? learn_result::moved : learn_result::known;
    }
    if (_learned.size() >= learned_limit) {
        return learn_result::full;
    }
    _learned.emplace_back(source, &uplink);
    return learn_result::learned;
}

void wire::detach(port& p) noexcept {
    std::unique_lock g(_config_lock);
    std::erase(_ports, &p);
    std::erase(_uplinks, &p);
    std::erase_if(_learned, [&](const auto& e) { return e.second == &p; });
}

void wire::set_faults(const faults& f) {
    std::unique_lock g(_config_lock);
    _faults = f;
}

bool wire::set_port_faults(const mac_address& mac, const faults& f) {
    std::unique_lock g(_config_lock);
    for (port* p : _ports) {
        if (p->_mac == mac) {
            p->_faults = f;
            return true;
        }
    }
    return false;
}

bool wire::set_port_link(const mac_address& mac, bool up) {
    std::unique_lock g(_config_lock);
    for (port* p : _ports) {
        if (p->_mac == mac) {
            p->_link_up = up;
            return true;
        }
    }
    return false;
}

bool wire::capture(const std::string& path) {
    std::lock_guard g(_state_lock);
    if (_capture != nullptr) {
        std::fclose(_capture);
        _capture = nullptr;
        _capturing.store(false, std::memory_order_release);
    }
    if (path.empty()) {
        return true;
    }
    _capture = std::fopen(path.c_str(), "wb");
    if (_capture == nullptr) {
        log().warn("wire: cannot create capture file {}", path);
        return false;
    }
    _capturing.store(true, std::memory_order_release);
    // pcap global header, host byte order as libpcap writes it: v2.4, snaplen 65535, Ethernet
    const std::uint32_t header[6] = {0xa1b2c3d4u, 2u | 4u << 16, 0, 0, 65535, 1};
    std::fwrite(header, sizeof header, 1, _capture);
    return true;
}

wire_counters wire::counters() const {
    constexpr auto r = std::memory_order_relaxed;
    wire_counters c;
    c.transmitted = _counters.transmitted.load(r);
    c.delivered = _counters.delivered.load(r);
    c.dropped = _counters.dropped.load(r);
    c.duplicated = _counters.duplicated.load(r);
    c.no_route = _counters.no_route.load(r);
    c.overflow = _counters.overflow.load(r);
    c.materialized = _counters.materialized.load(r);
    c.by_reference = _counters.by_reference.load(r);
    c.pauses = _counters.pauses.load(r);
    c.flooded = _counters.flooded.load(r);
    std::shared_lock g(_config_lock);
    c.learned = _learned.size();
    return c;
}

std::size_t wire::free_frames() const {
    std::lock_guard g(_pool_lock);
    return _free_count + (_pool_limit - _frames_made);
}

frame* wire::make_chunk(std::size_t n) noexcept {
    static_assert(chunk_bytes % alignof(frame) == 0 && chunk_frames > 0);
    void* memory = std::aligned_alloc(chunk_bytes, chunk_bytes);
    if (memory == nullptr) {
        return nullptr;
    }
    // a hint: with transparent huge pages in madvise mode (Debian's default) the chunk is one
    // page; refused or unsupported, it is 4 KiB pages as before
    ::madvise(memory, chunk_bytes, MADV_HUGEPAGE);
    frame* first = static_cast<frame*>(memory);
    std::uninitialized_default_construct_n(first, n);
    return first;
}

void wire::chunk_free::operator()(frame* f) const noexcept {
    static_assert(std::is_trivially_destructible_v<frame>);
    std::free(f);
}

// Warm-up only: the pool grows by one chunk (the vector's room is reserved), if the limit allows.
void wire::grow_locked() noexcept {
    if (_frames_made >= _pool_limit) {
        return;
    }
    const std::size_t n = std::min(chunk_frames, _pool_limit - _frames_made);
    frame* chunk = make_chunk(n);
    if (chunk == nullptr) {
        return;
    }
    _chunks.emplace_back(chunk);   // the vector's room is reserved: no throw
    for (std::size_t i = 0; i < n; ++i) {
        frame* x = chunk + i;
        x->next = _free;
        _free = x;
    }
    _frames_made += n;
    _free_count += n;
}

frame* wire::take() noexcept { return take(1); }

frame* wire::take(std::size_t n) noexcept {
    std::lock_guard g(_pool_lock);
    if (_free == nullptr) {
        grow_locked();
    }
    frame* const first = _free;
    frame* last = nullptr;
    for (std::size_t i = 0; i < n && _free != nullptr; ++i) {
        last = _free;
        _free = last->next;
        --_free_count;
        last->prev = nullptr;
        last->size = 0;
        last->sealed = true;
        last->payload_ref = nullptr;
    }
    if (last == nullptr) {
        return nullptr;
    }
    last->next = nullptr;
    return first;
}

void wire::give(frame* f) noexcept {
    std::lock_guard g(_pool_lock);
    f->prev = nullptr;
    f->next = _free;
    _free = f;
    ++_free_count;
}

void wire::give(frame* first, frame* last, std::size_t n) noexcept {
    std::lock_guard g(_pool_lock);
    last->next = _free;
    _free = first;
    _free_count += n;
}

// xorshift64*: [0, 1)
double wire::uniform() noexcept {
    _random ^= _random >> 12;
    _random ^= _random << 25;
    _random ^= _random >> 27;
    return static_cast<double>((_random * 0x2545f4914f6cdd1dull) >> 11) * 0x1.0p-53;
}

// with _config_lock held
port* wire::route(const frame& f, const port& from, bool& flood) const noexcept {
    flood = false;
    if (f.size < 6) {
        return nullptr;
    }
    const mac_address dst = destination_of(f);
    for (port* p : _ports) {
        if (p->_mac == dst) {
            return p;
        }
    }
    if (from._uplink || _uplinks.empty()) {
        return nullptr;   // split horizon: what came in by an uplink never goes out by one
    }
    if (_uplinks.size() == 1) {
        return _uplinks.front();
    }
    for (const auto& [mac, p] : _learned) {
        if (mac == dst) {
            return p;
        }
    }
    flood = true;
    return nullptr;
}

void wire::forward(port& from, frame* f, clock::time_point now) noexcept {
    std::shared_lock config(_config_lock);
    forward_locked(from, f, now, false);
}

namespace {
bool quiet(const faults& x) noexcept {
    return x.drop <= 0 && x.duplicate <= 0 && x.delay.count() == 0 && x.jitter.count() == 0;
}
bool same_destination(const frame& a, const frame& b) noexcept {
    return a.size >= 6 && b.size >= 6 && std::memcmp(a.bytes.data(), b.bytes.data(), 6) == 0;
}
}  // namespace

// The plain path, a frame at a time as forward_locked() would take it, but a run of frames to
// one port together: due now, no fault, no capture, so no lock but the receiver's queue lock,
// once per run, and the counters once per call. A run that finds too little room in its
// destination's queue goes as far as the room, and the rest of the list is held back (the
// sender's link is paused: its frames to other ports wait too, in order).
frame* wire::forward_run(port& from, frame* list, clock::time_point now) noexcept {
    constexpr auto relaxed = std::memory_order_relaxed;
    std::shared_lock config(_config_lock);
    const bool plain = from._link_up && quiet(_faults) && quiet(from._faults) && !_capturing.load(std::memory_order_acquire);
    std::uint64_t sent = 0, by_reference = 0, delivered = 0, overflow = 0;
    frame* held = nullptr;
    while (list != nullptr) {
        frame* f = list;
        bool flooded = false;
        port* to = plain ? route(*f, from, flooded) : nullptr;
        if (to == nullptr || !to->_link_up || !quiet(to->_faults)) {
            list = f->next;
            f->next = nullptr;
            // faults, capture, no route: a frame at a time
            if (!forward_locked(from, f, now, true)) {
                f->next = list;
                held = f;
                break;
            }
            continue;
        }
        std::lock_guard q(to->_queue_lock);
        const std::size_t queued = to->_queued + to->_ready_count.load(relaxed);
        const std::size_t room = queued >= _queue_limit ? 0 : _queue_limit - queued;
        // Lossless (the destination drains its queue): the run is counted no further than the
        // room, and a full queue holds the list back at once. Every queue pair's transmit
        // flushes its port, so with a long list held back, counting it whole on each flush
        // made a pass cost the held frames times the queue pairs (bench-scale, issue 17).
        const bool lossless = to->draining(from.held_since(now), now);
        if (lossless && room == 0) {
            held = f;
            break;
        }
        const std::size_t most = lossless ? room : std::numeric_limits<std::size_t>::max();
        frame* last = f;
        std::size_t n = 1;
        while (n < most && last->next != nullptr && same_destination(*last->next, *f)) {
            last = last->next;
            ++n;
        }
        list = last->next;
        if (room < n) {
            // its owner no longer drains it (pause_watchdog): the frames past its room are
            // tail-dropped, as a switch port buffer overflows
            frame* keep_last = nullptr;
            frame* drop = f;
            for (std::size_t i = 0; i < room; ++i) {
                keep_last = drop;
                drop = drop->next;
            }
            last->next = nullptr;
            give(drop, last, n - room);
            sent += n - room;
            overflow += n - room;
            if (keep_last == nullptr) {
                continue;
            }
            last = keep_last;
            n = room;
        }
        last->next = nullptr;
        f->prev = nullptr;
        f->due = now;
        by_reference += f->payload_ref != nullptr ? 1 : 0;
        for (frame* x = f; x != last;) {
            x->next->prev = x;
            x = x->next;
            x->due = now;
            by_reference += x->payload_ref != nullptr ? 1 : 0;
        }
        sent += n;
        delivered += n;
        if (to->_tail == nullptr || to->_tail->due <= now) {
            f->prev = to->_tail;   // due now, after every frame queued: the run goes at the tail
            (to->_tail != nullptr ? to->_tail->next : to->_head) = f;
            to->_tail = last;
            to->_queued += n;
        } else {
            while (f != nullptr) {   // delayed frames due later wait there: in due order
                frame* next = f->next;
                to->enqueue(f);
                f = next;
            }
        }
        if (held != nullptr) {
            break;
        }
    }
    if (sent != 0) {
        _counters.transmitted.fetch_add(sent, relaxed);
        _counters.delivered.fetch_add(delivered, relaxed);
        if (by_reference != 0) {
            _counters.by_reference.fetch_add(by_reference, relaxed);
        }
        if (overflow != 0) {
            _counters.overflow.fetch_add(overflow, relaxed);
        }
    }
    return held;
}

// with _config_lock held (shared)
bool wire::forward_locked(port& from, frame* f, clock::time_point now, bool hold) noexcept {
    bool flooding = false;
    port* to = route(*f, from, flooding);
    if (to == nullptr && from._uplink) {
        // arrived from outside for no function here: dropped before capture and faults (the
        // capture holds what the model's functions exchange, which a peer's ND/ARP is not)
        constexpr auto relaxed = std::memory_order_relaxed;
        _counters.transmitted.fetch_add(1, relaxed);
        _counters.no_route.fetch_add(1, relaxed);
        from._unrouted.fetch_add(1, relaxed);
        give(f);
        return true;
    }
    if (flooding) {
        flood(from, f, now);
        return true;
    }
    return deliver(from, to, f, now, hold, true);
}

// with _config_lock held (shared): every uplink but the last gets a copy, the last `f`; each
// copy meets its uplink's faults. No holding back: a copy that finds no buffer or a full queue
// is lost, as a flooded frame may be.
void wire::flood(port& from, frame* f, clock::time_point now) noexcept {
    if (f->payload_ref != nullptr) {
        materialize(*f);
    }
    const std::size_t n = _uplinks.size();
    for (std::size_t i = 0; i + 1 < n; ++i) {
        frame* copy = take();
        if (copy == nullptr) {
            _counters.overflow.fetch_add(1, std::memory_order_relaxed);
            continue;
        }
        std::memcpy(copy->bytes.data(), f->bytes.data(), f->size);
        copy->size = f->size;
        copy->sealed = f->sealed;
        _counters.flooded.fetch_add(1, std::memory_order_relaxed);
        deliver(from, _uplinks[i], copy, now, false, false);
    }
    deliver(from, _uplinks[n - 1], f, now, false, true);
}

// with _state_lock held: one pcap record of `f`, sealed and whole
void wire::write_capture(frame* f) noexcept {
    if (f->payload_ref != nullptr) {
        materialize(*f);   // the capture shows the payload
    }
    if (!f->sealed) {   // the capture shows the frame as a link carries it, ICRC included
        rig::roce::seal(f->writable());
        f->sealed = true;
    }
    const auto wall = std::chrono::system_clock::now().time_since_epoch();
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(wall).count();
    const std::uint32_t record[4] = {static_cast<std::uint32_t>(us / 1000000), static_cast<std::uint32_t>(us % 1000000),
                                     f->size, f->size};
    std::fwrite(record, sizeof record, 1, _capture);
    std::fwrite(f->bytes.data(), 1, f->size, _capture);
}

// with _config_lock held (shared): forward_locked() once the destination is known
bool wire::deliver(port& from, port* to, frame* f, clock::time_point now, bool hold, bool capture) noexcept {
    const faults* each[3] = {&_faults, &from._faults, to != nullptr ? &to->_faults : nullptr};
    bool lost = !from._link_up || (to != nullptr && !to->_link_up);
    bool twice = false;
    std::chrono::nanoseconds delay{0}, delay_twin{0};
    constexpr auto relaxed = std::memory_order_relaxed;
    if (hold && !lost && to != nullptr) {
        // lossless: a full queue that its owner drains holds the frame back, before anything
        // (capture, faults) has seen it; it goes through them when it goes. Room once checked,
        // the frame and its duplicate go in (another sender may fill the queue meanwhile: the
        // limit is then passed by a few frames, as a PFC buffer's headroom takes what was on
        // the link when the pause went out).
        std::lock_guard q(to->_queue_lock);
        if (to->_queued + to->_ready_count.load(relaxed) >= _queue_limit && to->draining(from.held_since(now), now)) {
            return false;
        }
        hold = to->_queued + to->_ready_count.load(relaxed) < _queue_limit;   // else: tail-drop below
    }
    _counters.transmitted.fetch_add(1, relaxed);
    if (f->payload_ref != nullptr) {
        _counters.by_reference.fetch_add(1, relaxed);
    }
    {
        // the random state and the capture file need _state_lock; a wire without random faults
        // or capture (the fast path) takes no lock here
        bool draws = false;
        for (const faults* x : each) {
            draws = draws || (x != nullptr && (x->drop > 0 || x->duplicate > 0 || x->jitter.count() > 0));
        }
        std::unique_lock<std::mutex> state(_state_lock, std::defer_lock);
        if (draws || (capture && _capturing.load(std::memory_order_acquire))) {
            state.lock();
        }
        if (state.owns_lock() && _capture != nullptr && capture) {
            write_capture(f);
        }
        if (to == nullptr) {
            _counters.no_route.fetch_add(1, relaxed);
            lost = true;
        }
        for (const faults* x : each) {
            if (x == nullptr || lost) {
                continue;
            }
            if (x->drop > 0 && uniform() < x->drop) {
                lost = true;
            }
            if (x->duplicate > 0 && uniform() < x->duplicate) {
                twice = true;
            }
            delay += x->delay;
            delay_twin += x->delay;
            if (x->jitter.count() > 0) {
                delay += std::chrono::nanoseconds(static_cast<std::int64_t>(uniform() * static_cast<double>(x->jitter.count())));
                delay_twin += std::chrono::nanoseconds(static_cast<std::int64_t>(uniform() * static_cast<double>(x->jitter.count())));
            }
        }
        if (lost && to != nullptr) {
            _counters.dropped.fetch_add(1, relaxed);
        }
    }
    if (lost) {
        give(f);
        return true;
    }
    if (f->payload_ref != nullptr && (twice || delay.count() != 0 || delay_twin.count() != 0)) {
        materialize(*f);   // a duplicated or delayed frame leaves the core's round: self-contained
    }
    frame* twin = nullptr;
    if (twice) {
        twin = take();
        if (twin != nullptr) {
            std::memcpy(twin->bytes.data(), f->bytes.data(), f->size);
            twin->size = f->size;
            twin->sealed = f->sealed;
            twin->due = now + delay_twin;
        }
    }
    f->due = now + delay;
    std::size_t delivered = 0, overflow = twice && twin == nullptr ? 1 : 0;
    {
        std::lock_guard q(to->_queue_lock);
        for (frame* x : {f, twin}) {
            if (x == nullptr) {
                continue;
            }
            if (!hold && to->_queued + to->_ready_count.load(relaxed) >= _queue_limit) {
                give(x);
                ++overflow;
            } else {
                to->enqueue(x);
                ++delivered;
            }
        }
    }
    _counters.delivered.fetch_add(delivered, relaxed);
    if (overflow != 0) {
        _counters.overflow.fetch_add(overflow, relaxed);
    }
    if (twin != nullptr) {
        _counters.duplicated.fetch_add(1, relaxed);
    }
    return true;
}

}  // namespace rig::sim::roce
