// nic: open (PCI layer, the family by PCI IDs, the family's control plane), make_qp, connect,
// destroy, close; the events' way from the family's event thread to the waiters.
#include "rig/nic.hpp"

#include "qp/state.hpp"  // first of the internal headers: see qp/mlx5/data_path.hpp
#include "qp/group_state.hpp"
#include "qp/nic_state.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "abi/bits.hpp"
#include "abi/pci_ids.hpp"
#include "driver/identify.hpp"
#include "qp/bnxt/control.hpp"
#include "qp/control.hpp"
#include "qp/mlx5/control.hpp"

namespace rig {

namespace {

// The control plane of each family Rig drives, by abi::pci::family; null: not driven yet.
struct family_entry {
    abi::pci::family family;
    detail::control_factory open;
};
constexpr family_entry families[] = {
    {abi::pci::family::mlx5, &qp::mlx5::control::open},
    {abi::pci::family::bnxt, &qp::bnxt::control::open},
};

// The family by the function's PCI IDs, before any family's bring-up touches it: a function of
// no family Rig drives, or of one not driven yet, is refused at once (driver/identify.hpp).
result<detail::control_factory> pick_family(driver::function& f) {
    auto id = driver::identify(f);
    if (!id) {
        return std::unexpected(detail::os_error("nic::open", id.error()));
    }
    const abi::pci::device_id& d = **id;
    for (const family_entry& e : families) {
        if (e.family == d.family && e.open != nullptr) {
            return e.open;
        }
    }
    char ids[16];
    std::snprintf(ids, sizeof ids, "%04x:%04x", d.vendor, d.device);
    const std::string family(abi::pci::to_string(d.family));
    return std::unexpected(plain_error(error_kind::os, "nic::open: " + std::string(f.name()) + ": " + ids + " (" +
                                                           std::string(d.name) + ") is a " + family + " function: " +
                                                           family + " is not driven yet"));
}

}  // namespace

namespace detail {
void no_data_path() { throw std::logic_error("queue pair without a data path"); }
}  // namespace detail

nic::nic() : _s(std::make_unique<detail::nic_state>()) {}

std::chrono::milliseconds nic::wait_look_interval() const noexcept { return _s->options.wait_look_interval; }

result<std::unique_ptr<nic>> nic::open(std::string_view where, const nic_options& options) {
    std::unique_ptr<nic> n(new nic());
    if (auto r = n->start(where, options); !r) {
        return std::unexpected(std::move(r.error()));
    }
    return n;
}

result<void> nic::start(std::string_view where, const nic_options& options) {
    _s->options = options;
    _s->random.seed(std::random_device{}());
    auto fn = driver::open(where, options.open);
    if (!fn) {
        return std::unexpected(detail::os_error("nic::open", fn.error()));
    }
    _s->fn = std::move(*fn);
    auto factory = pick_family(*_s->fn);
    if (!factory) {
        return std::unexpected(std::move(factory.error()));
    }
    detail::family_events events{
        .qp_failure = [this](std::uint32_t qpn, std::uint8_t code) { on_qp_failure(qpn, code); },
        .completion = [this](std::uint32_t cqn) { on_completion(cqn); },
        .fatal = [this] { on_fatal(); },
    };
    auto control = (*factory)(*_s->fn, where, options, std::move(events));
    if (!control) {
        return std::unexpected(std::move(control.error()));
    }
    _s->control = std::move(*control);
    _mac = _s->control->mac();
    _gid = _s->control->gid();
    _path_mtu = _s->control->path_mtu();
    _s->log_ring = std::min(options.log_ring_entries, _s->control->log_max_ring());
    watch_removal();
    return {};
}

nic::~nic() {
    static_cast<void>(close());
    stop_removal_watch();  // a removal being answered finishes first (it lets go of the device)
    _s->control.reset();  // its event thread (which calls into this object) ends before the rest goes
}

// ---- events (the family's event thread) -------------------------------------------------------

void nic::on_qp_failure(std::uint32_t qpn, std::uint8_t code) {
    {
        std::lock_guard g(_s->event_lock);
        if (auto it = _s->by_qpn.find(qpn); it != _s->by_qpn.end()) {
            it->second->nic_event.store(code, std::memory_order_release);   // qp::reported_event
            if (detail::group_state* group = it->second->group) {
                wake_group(*group);
            }
        }
    }
    {
        std::lock_guard w(_s->wake_lock);
    }
    _s->wake.notify_all();
}

void nic::on_completion(std::uint32_t cqn) {
    {
        std::lock_guard g(_s->event_lock);
        const auto it = _s->events_by_cqn.find(cqn);
        if (it == _s->events_by_cqn.end()) {
            return;  // a CQ destroyed since the event was written
        }
        it->second->fetch_add(1, std::memory_order_release);
    }
    // Taking the lock orders the count before a waiter's predicate check: no lost wake-up.
    {
        std::lock_guard w(_s->wake_lock);
    }
    _s->wake.notify_all();
}

void nic::on_fatal() {
    _machine_failed.store(true, std::memory_order_relaxed);
    {
        std::lock_guard g(_s->event_lock);
        for (detail::group_state* group : _s->live_groups) {
            wake_group(*group);
        }
    }
    {
        std::lock_guard w(_s->wake_lock);
    }
    _s->wake.notify_all();
}

void nic::sleep_until_event(const std::atomic<std::uint32_t>& events, std::uint32_t seen,
                            std::chrono::nanoseconds bound) {
    std::unique_lock w(_s->wake_lock);
    _s->wake.wait_for(w, bound, [&] {
        return events.load(std::memory_order_acquire) != seen || machine_failed();
    });
}

// ---- the NIC ----------------------------------------------------------------------------------

std::string_view nic::name() const noexcept { return _s->fn ? _s->fn->name() : std::string_view("(closed)"); }

bool nic::closed() const {
    std::lock_guard g(_s->lock);
    return _s->closed;
}

std::size_t nic::queue_pairs() const {
    std::lock_guard g(_s->lock);
    std::size_t k = 0;
    for (const auto& s : _s->qps) {
        k += s->destroyed ? 0 : 1;
    }
    return k;
}

std::size_t nic::regions() const {
    std::lock_guard g(_s->lock);
    std::size_t k = 0;
    for (const auto& s : _s->regions) {
        k += s->registered ? 1 : 0;
    }
    return k;
}

std::vector<stranded_region> nic::stranded() const {
    std::lock_guard g(_s->lock);
    if (!_s->control) {
        return {};
    }
    return _s->control->stranded();
}

// ---- queue pairs ----------------------------------------------------------------------------

bool nic::has_queue_pair(std::uint32_t qpn) const {
    std::lock_guard g(_s->lock);
    return std::any_of(_s->qps.begin(), _s->qps.end(), [&](const auto& s) { return !s->destroyed && s->number == qpn; });
}

result<queue_pair> nic::make_qp() {
    std::lock_guard g(_s->lock);
    if (_s->closed) {
        misuse("make_qp: the NIC is closed");
    }
    return add_qp(std::make_unique<detail::qp_state>(), _s->log_ring, nullptr);
}

// The queue pair's firmware objects, then its place in the NIC's maps (and its group's). Lock held.
result<queue_pair> nic::add_qp(std::unique_ptr<detail::qp_state> s, std::uint8_t log_ring, detail::group_state* group) {
    if (auto r = _s->control->make_qp(*s, log_ring, group); !r) {
        return std::unexpected(detail::named("make_qp", std::move(r.error())));
    }
    s->psn = static_cast<std::uint32_t>(_s->random()) & 0xffffff;
    s->group = group;
    {
        std::lock_guard e(_s->event_lock);
        _s->by_qpn[s->number] = s.get();
        if (group == nullptr) {
            _s->events_by_cqn[s->send_cq] = &s->send_events;
            _s->events_by_cqn[s->receive_cq] = &s->receive_events;
        }
    }
    if (group != nullptr) {
        std::lock_guard m(group->lock);
        group->members[s->group_key] = s.get();
        group->reserved += detail::ring_slots(*s);
        group->ready.reserve(2 * group->members.size());
    }
    _s->qps.push_back(std::move(s));
    return queue_pair(this, _s->qps.back().get());
}

result<void> nic::connect(detail::qp_state& s, const endpoint& e, std::uint32_t path_mtu_bytes) {
    std::lock_guard g(_s->lock);
    if (_s->closed) {
        misuse("connect: the NIC is closed");
    }
    if (s.destroyed) {
        misuse("connect: the queue pair is destroyed");
    }
    if (s.connected) {
        misuse("connect: queue pair " + abi::hex(s.number) + " is already connected");
    }
    if (e.qp > 0xffffff || e.psn > 0xffffff) {
        misuse("connect: endpoint qp " + abi::hex(e.qp) + " or psn " + abi::hex(e.psn) + " is over 24 bits");
    }
    if (path_mtu_bytes < 256 || path_mtu_bytes > _path_mtu || !std::has_single_bit(path_mtu_bytes)) {
        misuse("connect: path MTU " + std::to_string(path_mtu_bytes) + " is not one of 256, 512, 1024, 2048, 4096 up to " +
               "the NIC's " + std::to_string(_path_mtu));
    }
    const auto refused = [&](const char* step, error err) -> result<void> {
        return std::unexpected(detail::named(std::string("connect ") + step, std::move(err)));
    };
    if (s.dirty) {
        // A connect refused part-way left the QP in INIT or RTR: back to RESET, then from there.
        if (auto r = _s->control->to_reset(s); !r) {
            return refused("(back to RESET)", std::move(r.error()));
        }
        s.dirty = false;
    }
    s.dirty = true;
    if (auto r = _s->control->reset_to_init(s); !r) {
        return refused("(RESET to INIT)", std::move(r.error()));
    }
    if (auto r = _s->control->init_to_rtr(s, e, path_mtu_bytes); !r) {
        return refused("(INIT to RTR)", std::move(r.error()));
    }
    if (auto r = _s->control->rtr_to_rts(s); !r) {
        return refused("(RTR to RTS)", std::move(r.error()));
    }
    s.dirty = false;
    s.connected = true;
    s.peer = e;
    return {};
}

result<void> nic::destroy(detail::qp_state& s) {
    std::lock_guard g(_s->lock);
    if (s.destroyed) {
        misuse("destroy: the queue pair is already destroyed");
    }
    s.destroyed = true;   // Ok or not: it counts as destroyed
    s.connected = false;
    if (_s->closed) {
        return {};        // close() destroyed it
    }
    return release_qp(s);
}

result<qp_info> nic::query(const detail::qp_state& s) {
    std::lock_guard g(_s->lock);
    if (_s->closed) {
        misuse("query: the NIC is closed");
    }
    auto r = _s->control->query(s);
    if (!r) {
        return std::unexpected(detail::named("query", std::move(r.error())));
    }
    return *r;
}

result<void> nic::release_qp(detail::qp_state& s) {
    {
        std::lock_guard e(_s->event_lock);
        _s->by_qpn.erase(s.number);
        std::erase_if(_s->events_by_cqn, [&](const auto& entry) {
            return entry.second == &s.send_events || entry.second == &s.receive_events;
        });
    }
    if (detail::group_state* group = s.group) {
        // Its completions still in the group's CQ are passed over from now on (no member).
        std::lock_guard m(group->lock);
        for (auto& waiting : group->ready) {
            if (waiting.first == &s) {
                waiting.first = nullptr;  // its results are no one's now
            }
        }
        if (group->members.erase(s.group_key) != 0) {
            group->reserved -= detail::ring_slots(s);
        }
    }
    if (auto r = _s->control->release_qp(s); !r) {
        return std::unexpected(detail::named("destroy", std::move(r.error())));
    }
    return {};
}

// ---- close ------------------------------------------------------------------------------------

result<void> nic::close() {
    std::lock_guard g(_s->lock);
    if (_s->close_result) {
        return *_s->close_result;
    }
    _s->closed = true;
    if (!_s->control) {
        _s->close_result = result<void>{};
        return *_s->close_result;
    }
    std::optional<error> first;
    const auto keep = [&](result<void> r) {
        if (!r && !first) {
            first = std::move(r.error());
        }
    };
    if (!_s->control->torn_down()) {
        for (auto& s : _s->qps) {
            s->destroyed = true;
            s->connected = false;
            keep(release_qp(*s));
        }
        for (auto& group : _s->groups) {
            if (!group->destroyed) {
                group->destroyed = true;
                wake_group(*group);   // a sleeper on its eventfd wakes to find it destroyed
                keep(release_group(*group));
            }
        }
        for (auto& s : _s->regions) {
            if (s->registered) {
                keep(release_region(*s));
            }
        }
        if (auto r = _s->control->close(); !r) {
            keep(std::unexpected(detail::named("close", std::move(r.error()))));
        }
    }
    _s->close_result = first ? result<void>(std::unexpected(std::move(*first))) : result<void>{};
    {
        std::lock_guard hold(_s->removal_lock);   // a removal waiting for close() hears of it
        _s->closed_for_removal = true;
    }
    _s->removal_closed.notify_all();
    return *_s->close_result;
}

}  // namespace rig
