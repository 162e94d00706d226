// mlx5 control plane: bring-up with the NIC's options and events, the NIC-wide UAR and PD,
// regions' memory keys, close (queue pairs: control_qp.cpp).
#include "qp/mlx5/control.hpp"  // first: see qp/mlx5/data_path.hpp

#include <string>
#include <utility>

#include "abi/bits.hpp"
#include "abi/mlx5/doorbell.hpp"
#include "qp/mlx5/error.hpp"

namespace rig::qp::mlx5 {

namespace mabi = ::rig::mlx5::abi;
namespace ifc = ::rig::mlx5::ifc;

namespace {

// After a timeout or a fatal error the firmware may still name the memory of what the command
// was about (objects.hpp detail::firmware_may_hold); a status or delivery refusal changed nothing.
bool firmware_gone(const fw::error& e) {
    return e.kind == fw::error_kind::timeout || e.kind == fw::error_kind::fatal;
}

// The NIC's options and its event routes as firmware/mlx5's: the user's hooks beside the NIC's
// own (the user's completion hook first: it has seen the event by the time a waiter wakes).
fw::hca_options hca_options_of(const nic_options& o, detail::family_events events) {
    fw::hca_options h;
    h.timeouts.wait_initializing = o.ready_timeout;
    h.events.health.interval = o.health_interval;
    h.events.vectors = 1 + o.completion_vectors;  // 0: the NIC's own; 1..: completion groups
    h.use_events = o.use_events;
    h.init_link_down = o.init_link_down;
    if (o.trace) {
        h.trace = [user = o.trace](const fw::command_record& r) { user(to_record(r)); };
    }
    if (o.port_change) {
        h.port_change = [user = o.port_change](std::uint8_t, bool up) { user(up); };
    }
    h.qp_event = [nic = events.qp_failure, user = o.qp_event](std::uint32_t qpn, std::uint8_t type) {
        const bool failure = is_failure_event(type);
        if (failure) {
            nic(qpn, type);
        }
        if (user) {
            user(qpn, ifc::to_string(static_cast<ifc::event_type>(type)), failure);
        }
    };
    h.completion = [nic = events.completion, user = o.completion](std::uint32_t cqn) {
        if (user) {
            user(cqn);
        }
        nic(cqn);
    };
    h.fatal = [nic = events.fatal, user = o.fatal](const fw::error& e) {
        nic();
        if (user) {
            user(to_error(e));
        }
    };
    return h;
}

}  // namespace

result<std::unique_ptr<detail::control_plane>> control::open(driver::function& fn, std::string_view where,
                                                             const nic_options& options,
                                                             detail::family_events events) {
    return detail::start_control(std::unique_ptr<control>(new control(fn, options)), where, options,
                                 std::move(events));
}

// The event thread (which calls into the NIC) ends with the hca, before the rest goes; the
// doorbell record pages before it (a page the firmware may still write goes to its registry).
control::~control() {
    _records.reset();
    _hca.reset();
}

result<void> control::start(std::string_view where, const nic_options& options, detail::family_events events) {
    auto up = fw::hca::bring_up(_fn, hca_options_of(options, std::move(events)));
    if (!up) {
        return std::unexpected(to_error(up.error(), "nic::open " + std::string(where)));
    }
    _hca = std::move(*up);
    if (_hca->gids().empty() || _hca->event_queue() == nullptr) {
        return std::unexpected(plain_error(error_kind::firmware, "nic::open " + std::string(where) +
                                                                      ": no GID 0 or no event queue after bring-up"));
    }
    _mac = ::rig::abi::byte_array(_hca->mac());
    _gid = ::rig::abi::byte_array(_hca->gids().front().gid);
    _records = std::make_unique<fw::doorbell_records>(_fn, stranded_registry());
    return nic_objects();
}

result<void> control::nic_objects() {
    // The queue pairs' doorbell page: BAR0 page `uar`, mapped write-combining like rdma-core's
    // BlueFlame pages (kernel uar.c; rdma-core mlx5.h MLX5_BF_OFFSET).
    auto bar = _fn.map_bar(driver::region::bar0, driver::caching::write_combining);
    if (!bar) {
        return std::unexpected(detail::os_error("nic::open: mapping BAR0", bar.error()));
    }
    _bar0 = std::move(*bar);
    auto uar = fw::alloc_uar(commands(), by());
    if (!uar) {
        return std::unexpected(detail::named("nic::open", refused(uar.error())));
    }
    _uar = *uar;
    if (!_bar0.covers(std::uint64_t{*_uar} * mabi::uar_page_size, mabi::uar_page_size)) {
        return std::unexpected(plain_error(error_kind::os, "nic::open: UAR page " + std::to_string(*_uar) +
                                                               " is not in a mapped area of BAR0"));
    }
    if (auto r = make_bfregs(); !r) {
        return r;
    }
    auto pd = fw::alloc_pd(commands(), by());
    if (!pd) {
        return std::unexpected(detail::named("nic::open", refused(pd.error())));
    }
    _pd = *pd;
    return {};
}

// The UAR page's four bfregs (rdma-core mlx5.c mlx5_init_context: bfs[i].reg = UAR +
// MLX5_BF_OFFSET + i * bf_reg_size, buf_size = bf_reg_size / 2). They copy entries (BlueFlame) only
// where the NIC has BlueFlame and the page is mapped write-combining: the kernel tells rdma-core
// bf_reg_size 0, so no copy, unless cmd_hca_cap.bf is set and its write-combining test passed
// (hw/mlx5/main.c set_ucontext_resp, core/wc.c mlx5_wc_support_get), and rdma-core never copies
// to a bfreg of a UAR it mapped uncached (verbs.c: nc_mode gives buf_size 0). Kernel VFIO maps
// BARs uncached: eight uncached stores would cost more than the one they replace. The model's
// page is ordinary shared memory, which takes a copy as a write-combining page would.
result<void> control::make_bfregs() {
    const fw::hca_caps& caps = _hca->caps();
    const std::uint32_t log_bf = caps.log_bf_reg_size;
    if (log_bf < mabi::min_log_bf_reg_size || log_bf > mabi::max_log_bf_reg_size) {
        return std::unexpected(plain_error(error_kind::firmware, "nic::open: log_bf_reg_size " + std::to_string(log_bf) +
                                                                     ": four bfregs do not fit the UAR page's upper half"));
    }
    const bool can_copy = caps.bf && _bar0.mode != driver::caching::uncached;
    copy_rule rule = copy_rule::never;
    if (can_copy && _copy == doorbell_copy::inline_entries) {
        rule = copy_rule::inline_entries;
    } else if (can_copy && _copy == doorbell_copy::single_entries) {
        rule = copy_rule::single_entries;
    }
    std::byte* const uar = uar_page();
    for (std::size_t k = 0; k < mabi::uar::bfregs_per_uar; ++k) {
        _bfregs.push_back(std::make_unique<bfreg>(uar + mabi::bfreg_offset(k, log_bf), mabi::bfreg_half(log_bf), rule));
    }
    return {};
}

std::uint32_t control::path_mtu() const {
    return 128u << static_cast<unsigned>(_hca->path_mtu());  // qpc mtu 1..5: 256..4096 bytes
}

std::uint8_t control::log_max_ring() const {
    const fw::hca_caps& caps = _hca->caps();
    return std::min(caps.log_max_qp_sz, caps.log_max_cq_sz);
}

void control::note(const fw::error& e) {
    if (firmware_gone(e) && _hca && !_hca->failed()) {
        // The firmware stopped answering: every later command is refused at once, and teardown
        // completes locally, keeping what the firmware may still name (hca.hpp).
        commands().fail(e);
    }
}

error control::refused(const fw::error& e) {
    note(e);
    return to_error(e);
}

std::vector<stranded_region> control::stranded() const {
    std::vector<stranded_region> out;
    if (_hca) {
        for (fw::stranded_region& r : _hca->stranded()) {
            out.push_back({std::move(r.what), r.iova, r.bytes});
        }
    }
    return out;
}

// ---- regions ----------------------------------------------------------------------------------

result<void> control::register_memory(detail::region_state& r) {
    // Local write always: receives and reads land in the region (rdma-core's reg_mr with
    // IBV_ACCESS_LOCAL_WRITE); remote rights as asked.
    const fw::mkey_access rights{.local_write = true,
                                 .remote_read = allows(r.rights, access::remote_read),
                                 .remote_write = allows(r.rights, access::remote_write)};
    auto key = fw::mkey::create(commands(), *_pd, r.iova, r.bytes, rights, by());
    if (!key) {
        error e = refused(key.error());
        if (_hca->failed()) {
            // The firmware may have made the key before it stopped answering: the memory stays.
            stranded_registry().keep("region (CREATE_MKEY unanswered)", r.iova, r.bytes, std::move(r.memory));
        }
        return std::unexpected(std::move(e));
    }
    auto objects = std::make_unique<region_objects>();
    objects->key = *key;
    r.key = key->lkey();
    r.family = std::move(objects);
    return {};
}

result<void> control::deregister_memory(detail::region_state& r) {
    auto& objects = static_cast<region_objects&>(*r.family);
    if (auto d = objects.key.destroy(commands(), by()); !d) {
        error e = refused(d.error());
        if (_hca->failed()) {
            // The firmware may still reach the memory through the key: kept, never reused.
            stranded_registry().keep("region key " + ::rig::abi::hex(r.key), r.iova, r.bytes, std::move(r.memory));
        }
        return std::unexpected(std::move(e));
    }
    return {};
}

// ---- close ------------------------------------------------------------------------------------

result<void> control::close() {
    if (!_hca || _hca->torn_down()) {
        return {};
    }
    std::optional<error> first;
    const auto keep = [&](error e) {
        if (!first) {
            first = std::move(e);
        }
    };
    if (_pd && !_hca->failed()) {
        if (auto r = fw::dealloc_pd(commands(), *_pd, by()); !r) {
            keep(refused(r.error()));
        }
    }
    if (_uar && !_hca->failed()) {
        if (auto r = fw::dealloc_uar(commands(), *_uar, by()); !r) {
            keep(refused(r.error()));
        }
    }
    if (auto r = _hca->teardown(); !r) {
        keep(to_error(r.error()));
    }
    if (first) {
        return std::unexpected(std::move(*first));
    }
    return {};
}

}  // namespace rig::qp::mlx5
