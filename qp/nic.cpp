// nic: open (PCI layer + firmware bring-up + UAR + PD), make_qp, connect, destroy, close.
#include "qp/nic.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "qp/mlx5/qp_state.hpp"  // first: see its comment
#include "abi/bits.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "abi/pci_ids.hpp"
#include "driver/identify.hpp"

namespace rig {

namespace fw = firmware::mlx5;
namespace mabi = ::rig::mlx5::abi;

namespace {

// After a timeout or a fatal error the firmware may still name the memory of what the command
// was about (objects.hpp detail::firmware_may_hold); a status or delivery refusal changed nothing.
bool firmware_gone(const fw::error& e) {
    return e.kind == fw::error_kind::timeout || e.kind == fw::error_kind::fatal;
}


// The family by the function's PCI IDs, before any family's bring-up touches it: a function of
// no family Rig drives, or of one not driven yet, is refused at once (driver/identify.hpp).
result<void> pick_family(driver::function& f) {
    auto id = driver::identify(f);
    if (!id) {
        return std::unexpected(os_error("nic::open", id.error()));
    }
    const abi::pci::device_id& d = **id;
    if (d.family != abi::pci::family::mlx5) {
        char ids[16];
        std::snprintf(ids, sizeof ids, "%04x:%04x", d.vendor, d.device);
        return std::unexpected(error{"nic::open: " + std::string(f.name()) + ": " + ids + " (" + std::string(d.name) +
                                         ") is a " + std::string(abi::pci::to_string(d.family)) +
                                         " function: bnxt is not driven yet",
                                     error_kind::os, std::nullopt, std::nullopt, std::nullopt, false});
    }
    return {};
}

}  // namespace

result<std::unique_ptr<nic>> nic::open(std::string_view where, const nic_options& options) {
    std::unique_ptr<nic> n(new nic());
    if (auto r = n->start(where, options); !r) {
        return std::unexpected(std::move(r.error()));
    }
    return n;
}

result<void> nic::start(std::string_view where, const nic_options& options) {
    _options = options;
    _random.seed(std::random_device{}());
    auto fn = driver::open(where, options.open);
    if (!fn) {
        return std::unexpected(os_error("nic::open", fn.error()));
    }
    _fn = std::move(*fn);
    if (auto r = pick_family(*_fn); !r) {
        return std::unexpected(std::move(r.error()));
    }
    fw::hca_options hca_options = options.hca;
    hca_options.qp_event = [this, user = options.hca.qp_event](std::uint32_t qpn, std::uint8_t type) {
        on_qp_event(qpn, type);
        if (user) {
            user(qpn, type);
        }
    };
    // the user's hook first: it has seen the event by the time a waiter wakes
    hca_options.completion = [this, user = options.hca.completion](std::uint32_t cqn) {
        if (user) {
            user(cqn);
        }
        on_completion(cqn);
    };
    hca_options.fatal = [this, user = options.hca.fatal](const fw::error& e) {
        _machine_failed.store(true, std::memory_order_relaxed);
        {
            std::lock_guard w(_wake_lock);
        }
        _wake.notify_all();
        if (user) {
            user(e);
        }
    };
    auto up = fw::hca::bring_up(*_fn, hca_options);
    if (!up) {
        return std::unexpected(firmware_error("nic::open " + std::string(where), up.error()));
    }
    _hca = std::move(*up);
    const auto fail = [&](error e) -> result<void> {
        static_cast<void>(close());
        return std::unexpected(std::move(e));
    };
    if (_hca->gids().empty() || _hca->event_queue() == nullptr) {
        return fail(error{"nic::open " + std::string(where) + ": no GID 0 or no event queue after bring-up",
                          error_kind::firmware, std::nullopt, std::nullopt, std::nullopt, false});
    }
    const auto mac = _hca->mac();
    for (std::size_t i = 0; i < mac.size(); ++i) {
        _mac[i] = std::byte{mac[i]};
    }
    const auto gid = _hca->gids().front().gid;
    for (std::size_t i = 0; i < gid.size(); ++i) {
        _gid[i] = std::byte{gid[i]};
    }
    _path_mtu = 128u << static_cast<unsigned>(_hca->path_mtu());  // qpc mtu 1..5: 256..4096 bytes
    const fw::hca_caps& caps = _hca->caps();
    _log_ring = std::min({options.log_ring_entries, caps.log_max_qp_sz, caps.log_max_cq_sz});
    // The queue pairs' doorbell page: BAR0 page `uar`, mapped write-combining like rdma-core's
    // BlueFlame pages (§4.1).
    auto bar = _fn->map_bar(driver::region::bar0, driver::caching::write_combining);
    if (!bar) {
        return fail(os_error("nic::open: mapping BAR0", bar.error()));
    }
    _bar0 = std::move(*bar);
    auto uar = fw::alloc_uar(commands(), by());
    if (!uar) {
        note(uar.error());
        return fail(firmware_error("nic::open", uar.error()));
    }
    _uar = *uar;
    if (!_bar0.covers(std::uint64_t{*_uar} * mabi::uar_page_size, mabi::uar_page_size)) {
        return fail(error{"nic::open: UAR page " + std::to_string(*_uar) + " is not in a mapped area of BAR0",
                          error_kind::os, std::nullopt, std::nullopt, std::nullopt, false});
    }
    auto pd = fw::alloc_pd(commands(), by());
    if (!pd) {
        note(pd.error());
        return fail(firmware_error("nic::open", pd.error()));
    }
    _pd = *pd;
    return {};
}

nic::~nic() {
    static_cast<void>(close());
    _hca.reset();  // its event thread (which calls into this object) ends before the rest goes
}

void nic::on_qp_event(std::uint32_t qpn, std::uint8_t event_type) {
    namespace ifc = ::rig::mlx5::ifc;
    using t = ifc::event_type;
    const auto type = static_cast<t>(event_type);
    if (type != t::wq_catas_error && type != t::wq_inval_req_error && type != t::wq_access_error &&
        type != t::path_mig_failed) {
        return;  // PATH_MIG, COMM_EST, SQ_DRAINED: not failures
    }
    {
        std::lock_guard g(_event_lock);
        if (auto it = _by_qpn.find(qpn); it != _by_qpn.end()) {
            it->second->nic_event.store(event_type, std::memory_order_relaxed);
        }
    }
    {
        std::lock_guard w(_wake_lock);
    }
    _wake.notify_all();
}

void nic::on_completion(std::uint32_t cqn) {
    {
        std::lock_guard g(_event_lock);
        const auto it = _events_by_cqn.find(cqn);
        if (it == _events_by_cqn.end()) {
            return;  // a CQ destroyed since the event was written
        }
        it->second->fetch_add(1, std::memory_order_release);
    }
    // Taking the lock orders the count before a waiter's predicate check: no lost wake-up.
    {
        std::lock_guard w(_wake_lock);
    }
    _wake.notify_all();
}

void nic::sleep_until_event(const std::atomic<std::uint32_t>& events, std::uint32_t seen,
                            std::chrono::nanoseconds bound) {
    std::unique_lock w(_wake_lock);
    _wake.wait_for(w, bound, [&] {
        return events.load(std::memory_order_acquire) != seen || machine_failed();
    });
}

std::string_view nic::name() const noexcept { return _fn ? _fn->name() : std::string_view("(closed)"); }

fw::command_queue::clock::time_point nic::by() const { return fw::command_queue::clock::now() + _options.command_timeout; }

fw::command_queue& nic::commands() { return _hca->commands(); }

void nic::note(const fw::error& e) {
    if (firmware_gone(e) && _hca && !_hca->failed()) {
        // The firmware stopped answering: every later command is refused at once, and teardown
        // completes locally, keeping what the firmware may still name (hca.hpp).
        commands().fail(e);
    }
}

bool nic::closed() const {
    std::lock_guard g(_lock);
    return _closed;
}

std::size_t nic::queue_pairs() const {
    std::lock_guard g(_lock);
    std::size_t k = 0;
    for (const auto& s : _qps) {
        k += s->destroyed ? 0 : 1;
    }
    return k;
}

std::size_t nic::regions() const {
    std::lock_guard g(_lock);
    std::size_t k = 0;
    for (const auto& s : _regions) {
        k += s->registered ? 1 : 0;
    }
    return k;
}

std::vector<fw::stranded_region> nic::stranded() const {
    std::lock_guard g(_lock);
    if (!_hca) {
        return {};
    }
    return _hca->stranded();
}


// ---- queue pairs ----------------------------------------------------------------------------

result<queue_pair> nic::make_qp() {
    std::lock_guard g(_lock);
    if (_closed) {
        misuse("make_qp: the NIC is closed");
    }
    auto s = std::make_unique<detail::qp_state>();
    fw::stranded_memory& stranded = _hca->stranded_registry();
    const fw::cq_params cp{.log_size = _log_ring, .uar = *_uar, .eqn = _hca->event_queue()->eqn()};
    // A refused make gives back what it took (release_qp); what a firmware that stopped
    // answering may name is stranded by the objects themselves.
    const auto refused = [&](const fw::error& e) -> result<queue_pair> {
        note(e);
        static_cast<void>(release_qp(*s));
        return std::unexpected(firmware_error("make_qp", e));
    };
    auto scq = fw::cq::create(commands(), *_fn, stranded, cp, by());
    if (!scq) {
        return refused(scq.error());
    }
    s->send_cq = std::move(*scq);
    auto rcq = fw::cq::create(commands(), *_fn, stranded, cp, by());
    if (!rcq) {
        return refused(rcq.error());
    }
    s->receive_cq = std::move(*rcq);
    const fw::qp_params qpp{.pd = *_pd,
                            .send_cq = s->send_cq.cqn(),
                            .receive_cq = s->receive_cq.cqn(),
                            .uar = *_uar,
                            .log_sq_size = _log_ring,
                            .log_rq_size = _log_ring,
                            // 32-byte receives: one data segment and the end-of-list segment,
                            // or the two a 2^31-byte message takes (abi write_receive)
                            .log_rq_stride = 1};
    auto q = fw::qp::create(commands(), *_fn, stranded, qpp, by());
    if (!q) {
        return refused(q.error());
    }
    s->object = std::move(*q);

    // The data path over the objects' memory. BlueFlame registers: bfreg k of the UAR page, two
    // halves of bf_reg_size / 2 used in turn (rdma-core mlx5 bf->buf_size); queue pairs take the
    // four bfregs of the page in turn.
    std::byte* uar_page = _bar0.base + std::uint64_t{*_uar} * mabi::uar_page_size;
    const std::uint32_t log_bf = _hca->caps().log_bf_reg_size;
    const std::size_t k = _next_bfreg++ % mabi::uar::bfregs_per_uar;
    const std::span<std::byte> qp_record(s->object.doorbell_record(), mabi::qp_dbr::size);
    s->sq.emplace(qp::mlx5::send_queue_memory{s->object.send_queue(), qp_record,
                                              uar_page + mabi::bfreg_offset(k, log_bf),
                                              (std::size_t{1} << log_bf) / 2},
                  s->object.qpn());
    s->rq.emplace(qp::mlx5::receive_queue_memory{s->object.receive_queue(),
                                                 std::size_t{16} << qpp.log_rq_stride, qp_record});
    s->scq.emplace(qp::mlx5::completion_queue_memory{s->send_cq.entries(),
                                                     {s->send_cq.doorbell_record(), 8}, uar_page},
                   s->send_cq.cqn());
    s->rcq.emplace(qp::mlx5::completion_queue_memory{s->receive_cq.entries(),
                                                     {s->receive_cq.doorbell_record(), 8}, uar_page},
                   s->receive_cq.cqn());
    s->psn = static_cast<std::uint32_t>(_random()) & 0xffffff;
    {
        std::lock_guard e(_event_lock);
        _by_qpn[s->object.qpn()] = s.get();
        _events_by_cqn[s->send_cq.cqn()] = &s->send_events;
        _events_by_cqn[s->receive_cq.cqn()] = &s->receive_events;
    }
    _qps.push_back(std::move(s));
    return queue_pair(this, _qps.back().get());
}

result<void> nic::connect(detail::qp_state& s, const endpoint& e, std::uint32_t path_mtu_bytes) {
    std::lock_guard g(_lock);
    if (_closed) {
        misuse("connect: the NIC is closed");
    }
    if (s.destroyed) {
        misuse("connect: the queue pair is destroyed");
    }
    if (s.connected) {
        misuse("connect: queue pair " + abi::hex(s.object.qpn()) + " is already connected");
    }
    if (e.qp > 0xffffff || e.psn > 0xffffff) {
        misuse("connect: endpoint qp " + abi::hex(e.qp) + " or psn " + abi::hex(e.psn) + " is over 24 bits");
    }
    // qpc.mtu 1..5 is 256 << (mtu - 1) bytes (MLX5_QPC_MTU_*)
    if (path_mtu_bytes < 256 || path_mtu_bytes > _path_mtu || !std::has_single_bit(path_mtu_bytes)) {
        misuse("connect: path MTU " + std::to_string(path_mtu_bytes) + " is not one of 256, 512, 1024, 2048, 4096 up to " +
               "the NIC's " + std::to_string(_path_mtu));
    }
    const auto mtu = static_cast<::rig::mlx5::ifc::qpc_mtu>(std::countr_zero(path_mtu_bytes) - 7);
    fw::command_queue& q = commands();
    const auto refused = [&](const char* step, const fw::error& err) -> result<void> {
        note(err);
        return std::unexpected(firmware_error(std::string("connect ") + step, err));
    };
    if (s.dirty) {
        // A connect refused part-way left the QP in INIT or RTR: back to RESET, then from there.
        if (auto r = s.object.to_reset(q, by()); !r) {
            return refused("(back to RESET)", r.error());
        }
        s.dirty = false;
    }
    s.dirty = true;
    if (auto r = s.object.rst2init(q, 1, 0, {.remote_read = true, .remote_write = true}, by()); !r) {
        return refused("(RESET to INIT)", r.error());
    }
    fw::qp_rtr_params rtr;
    rtr.remote_qpn = e.qp;
    rtr.next_rcv_psn = e.psn;
    for (std::size_t i = 0; i < e.gid.size(); ++i) {
        rtr.rgid[i] = std::to_integer<std::uint8_t>(e.gid[i]);
    }
    for (std::size_t i = 0; i < e.mac.size(); ++i) {
        rtr.rmac[i] = std::to_integer<std::uint8_t>(e.mac[i]);
    }
    rtr.gid_index = 0;
    rtr.mtu = mtu;
    if (auto r = s.object.init2rtr(q, rtr, by()); !r) {
        return refused("(INIT to RTR)", r.error());
    }
    fw::qp_rts_params rts;  // ack timeout 14 (67 ms), retry 7, RNR retry 7: the seed's connect
    rts.next_send_psn = s.psn;
    if (auto r = s.object.rtr2rts(q, rts, by()); !r) {
        return refused("(RTR to RTS)", r.error());
    }
    s.dirty = false;
    s.connected = true;
    return {};
}

result<void> nic::destroy(detail::qp_state& s) {
    std::lock_guard g(_lock);
    if (s.destroyed) {
        misuse("destroy: the queue pair is already destroyed");
    }
    s.destroyed = true;   // Ok or not: it counts as destroyed
    s.connected = false;
    if (_closed) {
        return {};        // close() destroyed it
    }
    return release_qp(s);
}

result<fw::qp_state_info> nic::query(const detail::qp_state& s) {
    std::lock_guard g(_lock);
    if (_closed) {
        misuse("query: the NIC is closed");
    }
    auto r = s.object.query(commands(), by());
    if (!r) {
        note(r.error());
        return std::unexpected(firmware_error("query", r.error()));
    }
    return *r;
}

result<void> nic::release_qp(detail::qp_state& s) {
    fw::stranded_memory& stranded = _hca->stranded_registry();
    {
        std::lock_guard e(_event_lock);
        _by_qpn.erase(s.object.qpn());
        std::erase_if(_events_by_cqn, [&](const auto& entry) {
            return entry.second == &s.send_events || entry.second == &s.receive_events;
        });
    }
    std::optional<fw::error> first;
    if (s.object.alive()) {
        if (auto r = s.object.destroy(commands(), *_fn, stranded, by()); !r) {
            note(r.error());
            first = r.error();
            if (s.object.alive()) {
                // Refused: the QP still uses its CQs; all of it is kept until close.
                return std::unexpected(firmware_error("destroy", *first));
            }
        }
    }
    for (fw::cq* c : {&s.send_cq, &s.receive_cq}) {
        if (c->alive()) {
            if (auto r = c->destroy(commands(), *_fn, stranded, by()); !r) {
                note(r.error());
                if (!first) {
                    first = r.error();
                }
            }
        }
    }
    if (first) {
        return std::unexpected(firmware_error("destroy", *first));
    }
    return {};
}

// ---- close ------------------------------------------------------------------------------------

result<void> nic::close() {
    std::lock_guard g(_lock);
    if (_close_result) {
        return *_close_result;
    }
    _closed = true;
    if (!_hca) {
        _close_result = result<void>{};
        return *_close_result;
    }
    std::optional<error> first;
    const auto keep = [&](result<void> r) {
        if (!r && !first) {
            first = std::move(r.error());
        }
    };
    if (!_hca->torn_down()) {
        for (auto& s : _qps) {
            s->destroyed = true;
            s->connected = false;
            keep(release_qp(*s));
        }
        for (auto& s : _regions) {
            if (s->registered) {
                keep(release_region(*s));
            }
        }
        if (_pd && !_hca->failed()) {
            if (auto r = fw::dealloc_pd(commands(), *_pd, by()); !r) {
                note(r.error());
                keep(std::unexpected(firmware_error("close", r.error())));
            }
        }
        if (_uar && !_hca->failed()) {
            if (auto r = fw::dealloc_uar(commands(), *_uar, by()); !r) {
                note(r.error());
                keep(std::unexpected(firmware_error("close", r.error())));
            }
        }
        if (auto r = _hca->teardown(); !r) {
            keep(std::unexpected(firmware_error("close", r.error())));
        }
    }
    _close_result = first ? result<void>(std::unexpected(std::move(*first))) : result<void>{};
    return *_close_result;
}

}  // namespace rig
