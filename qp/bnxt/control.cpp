// bnxt control plane: bring-up with the NIC's options and events, BAR2's doorbell pages and the
// NIC's PD, regions' MRs, close (queue pairs: control_qp.cpp).
#include "qp/bnxt/control.hpp"  // first: see qp/mlx5/data_path.hpp

#include <algorithm>
#include <array>
#include <bit>
#include <string>
#include <utility>

#include "abi/barriers.hpp"
#include "abi/bits.hpp"
#include "abi/bnxt/doorbell.hpp"
#include "abi/bnxt/rcfw.hpp"
#include "qp/bnxt/error.hpp"
#include "qp/device_words.hpp"

namespace rig::qp::bnxt {

namespace babi = ::rig::bnxt::abi;

namespace {

constexpr std::uint64_t doorbell_page = 4096;

// After a timeout or a fatal error the firmware may still name the memory of what the command
// was about (objects.hpp detail::firmware_may_hold); a status or bad input changed nothing.
bool firmware_gone(const fw::error& e) {
    return e.kind == fw::error_kind::timeout || e.kind == fw::error_kind::fatal;
}

// The RoCE headers a port's MTU carries beside the payload, as iboe_get_mtu (include/rdma/
// ib_addr.h) takes them off: GRH 40, UDP 8, BTH 12, XRC ETH 4, AtomicETH 28, ICRC 4.
constexpr std::uint32_t roce_header_bytes = 40 + 8 + 12 + 4 + 28 + 4;

}  // namespace

// The NIC's options and its event routes as firmware/bnxt's: the user's hooks beside the NIC's
// own (the user's completion hook first: it has seen the event by the time a waiter wakes).
fw::device_options control::device_options_of(const nic_options& o, detail::family_events events) {
    fw::device_options d;
    d.timeouts.ready = o.ready_timeout;
    d.timeouts.teardown_step = std::max(_command_timeout, std::chrono::milliseconds(100));
    d.rcfw_events = o.use_events;
    d.completion_vectors = o.use_events ? o.completion_vectors : 0;   // completion groups' NQs
    d.health_interval = o.health_interval;
    if (o.trace) {
        d.trace = [user = o.trace](const fw::command_record& r) { user(to_record(r)); };
    }
    _completion = [nic = events.completion, user = o.completion](std::uint32_t cqn) {
        if (user) {
            user(cqn);
        }
        nic(cqn);
    };
    d.events.completion = [this](std::uint64_t cq_handle) { on_notification(cq_handle); };
    // bnxt_qplib_process_qp_event: QP_ERROR_NOTIFICATION marks the QP in error (its CQEs flushed
    // by the driver, docs/bnxt-data-path.md "Completions").
    d.events.qp_error = [nic = events.qp_failure, user = o.qp_event](std::uint32_t qpn, std::uint8_t, std::uint8_t) {
        nic(qpn, babi::CREQ_QP_EVENT_EVENT_QP_ERROR_NOTIFICATION);
        if (user) {
            user(qpn, "QP_ERROR_NOTIFICATION", true);
        }
    };
    // LINK_STATUS_CHANGE on the NQ (firmware/bnxt ASYNC_CR), as mlx5's PORT_CHANGE
    d.events.port_change = o.port_change;
    // the firmware stopped answering, the function is gone, or RESET_NOTIFY: the NIC fails
    d.events.fatal = [nic = events.fatal, user = o.fatal](const fw::error& e) {
        nic();
        if (user) {
            user(to_error(e));
        }
    };
    return d;
}

result<std::unique_ptr<detail::control_plane>> control::open(driver::function& fn, std::string_view where,
                                                             const nic_options& options,
                                                             detail::family_events events) {
    return detail::start_control(std::unique_ptr<control>(new control(fn, options)), where, options,
                                 std::move(events));
}

// The event thread (which calls into the NIC) ends with the device, before the rest goes.
control::~control() { _device.reset(); }

result<void> control::start(std::string_view where, const nic_options& options, detail::family_events events) {
    auto up = fw::device::bring_up(_fn, device_options_of(options, std::move(events)));
    if (!up) {
        return std::unexpected(to_error(up.error(), "nic::open " + std::string(where)));
    }
    _device = std::move(*up);
    if (!_device->gid_index() || _device->rcfw() == nullptr) {
        return std::unexpected(plain_error(error_kind::firmware, "nic::open " + std::string(where) +
                                                                      ": no GID or no RoCE channel after bring-up"));
    }
    _mac = ::rig::abi::byte_array(_device->mac());
    _gid = ::rig::abi::byte_array(_device->gid());
    return nic_objects();
}

result<void> control::nic_objects() {
    // The doorbell pages: BAR2, uncached (one 64-bit store a doorbell; bnxt_re maps user DPIs
    // uncached unless the chip pushes WQEs).
    auto bar = _fn.map_bar(driver::region::bar2, driver::caching::uncached);
    if (!bar) {
        return std::unexpected(detail::os_error("nic::open: mapping BAR2", bar.error()));
    }
    _bar2 = std::move(*bar);
    const std::uint64_t db_offset = _device->doorbell_offset();
    const std::uint64_t l2_end = _device->doorbell_size();
    if (l2_end <= db_offset || !_bar2.covers(l2_end, doorbell_page)) {
        return std::unexpected(plain_error(error_kind::os, "nic::open: no user doorbell page: the L2 doorbell area "
                                                           "ends at " + ::rig::abi::hex(l2_end) + " of BAR2 (" +
                                                           ::rig::abi::hex(_bar2.size) + " bytes, mapped or not)"));
    }
    _first_user_dpi = static_cast<std::uint32_t>((l2_end - db_offset) / doorbell_page);
    std::uint64_t pages = (_bar2.size - db_offset) / doorbell_page;
    if (_device->roce().max_dpi != 0) {
        pages = std::min<std::uint64_t>(pages, _device->roce().max_dpi);
    }
    _max_blocks = pages > _first_user_dpi ? static_cast<std::uint32_t>((pages - _first_user_dpi) * blocks_per_page) : 0;
    _pds.emplace(std::max<std::uint32_t>(_device->roce().max_pd, 1));
    auto pd = _pds->alloc();
    if (!pd) {
        return std::unexpected(detail::named("nic::open", refused(pd.error())));
    }
    _pd = *pd;
    return {};
}

std::uint32_t control::path_mtu() const {
    // bnxt_re_query_port: iboe_get_mtu(netdev mtu), the largest IB MTU under the port MTU less
    // the RoCE headers (1500 when FUNC_QCFG says none: bnxt_en's default).
    const std::uint32_t port = _device->port_mtu() != 0 ? _device->port_mtu() : 1500;
    const std::uint32_t room = port > roce_header_bytes ? port - roce_header_bytes : 0;
    return std::clamp<std::uint32_t>(room != 0 ? std::bit_floor(room) : 256, 256, 4096);
}

std::uint8_t control::log_max_ring() const {
    // A ring and its CQ of 2^n entries: n within QUERY_FUNC max_qp_wr (bnxt_qplib_get_dev_attr
    // keeps one back, the device already took it off: + 1 here) and max_cqe, and CREATE_QP's
    // 16-bit sizes.
    const fw::roce_caps& caps = _device->roce();
    const std::uint32_t limit = std::min({caps.max_qp_wr + 1, caps.max_cqe, std::uint32_t{0xffff}});
    return static_cast<std::uint8_t>(limit != 0 ? std::bit_width(limit) - 1 : 0);
}

bool control::failed() const {
    if (!_device) {
        return false;
    }
    const fw::events* ev = _device->event_thread();
    return _device->failure().has_value() || (_device->rcfw() != nullptr && _device->rcfw()->failure().has_value()) ||
           (ev != nullptr && ev->failed());
}

void control::note(const fw::error& e) {
    if (firmware_gone(e) && _device && _device->rcfw() != nullptr && !_device->rcfw()->failure()) {
        // The firmware stopped answering: every later command is refused at once, and teardown
        // completes locally, keeping what the firmware may still name (device.hpp).
        _device->rcfw()->fail(e);
    }
}

error control::refused(const fw::error& e) {
    note(e);
    return to_error(e);
}

std::vector<stranded_region> control::stranded() const {
    std::vector<stranded_region> out;
    if (_device) {
        for (auto& r : _device->stranded()) {
            out.push_back({std::move(r.what), r.iova, r.bytes});
        }
    }
    return out;
}

// ---- completion events ------------------------------------------------------------------------

void control::on_notification(std::uint64_t cq_handle) {
    std::uint32_t cqn = 0;
    {
        std::lock_guard g(_handles_lock);
        const auto it = _cq_by_handle.find(cq_handle);
        if (it == _cq_by_handle.end()) {
            return;   // a CQ destroyed since the notification was written
        }
        cqn = it->second;
    }
    enable_arming(cqn);
    _completion(cqn);
}

// CQ_ARMENA (index 0) on the privileged page before the CQ's notification is handled, as bnxt_re's
// NQ handler does for each CQ notification on P5/P7 (qplib_fp.c bnxt_qplib_service_nq:
// bnxt_qplib_armen_db): the CQ's next CQ_ARMALL may notify again. Word 2 of the privileged page
// (docs/bnxt-data-path.md "Rig's layout"), written by this (the event) thread only.
// A privileged page the back end does not map (the model traps it) takes a region write.
void control::enable_arming(std::uint32_t cqn) {
    const std::uint64_t offset = _device->doorbell_offset() + doorbell_word::armena;
    const std::uint64_t db = babi::fast_doorbell(babi::DBC_DBC_TYPE_CQ_ARMENA, cqn, 0, false);
    ::rig::abi::barrier::to_device();
    if (_bar2.covers(offset, 8)) {
        qp::store_register(_bar2.base + offset, db);
        return;
    }
    std::array<std::byte, 8> b{};
    ::rig::abi::store_le<std::uint64_t>(b.data(), db);
    static_cast<void>(_fn.region_write(driver::region::bar2, offset, b));
}

// ---- regions ----------------------------------------------------------------------------------

result<void> control::register_memory(detail::region_state& r) {
    // Local write always: receives and reads land in the region (bnxt_re_reg_user_mr with
    // IB_ACCESS_LOCAL_WRITE); remote rights as asked.
    const fw::mr_access rights{.local_write = true,
                               .remote_read = allows(r.rights, access::remote_read),
                               .remote_write = allows(r.rights, access::remote_write)};
    auto key = fw::mr::create(commands(), _fn, stranded_registry(), *_pd, r.iova, r.bytes, rights, by());
    if (!key) {
        error e = refused(key.error());
        if (failed()) {
            // The firmware may have registered the MR before it stopped answering: the memory stays.
            stranded_registry().keep("region (REGISTER_MR unanswered)", r.iova, r.bytes, std::move(r.memory));
        }
        return std::unexpected(std::move(e));
    }
    auto objects = std::make_unique<region_objects>();
    r.key = key->lkey();
    objects->key = std::move(*key);
    r.family = std::move(objects);
    return {};
}

result<void> control::deregister_memory(detail::region_state& r) {
    auto& objects = static_cast<region_objects&>(*r.family);
    if (auto d = objects.key.destroy(commands(), _fn, stranded_registry(), by()); !d) {
        error e = refused(d.error());
        if (failed()) {
            // The firmware may still reach the memory through the key: kept, never reused.
            stranded_registry().keep("region key " + ::rig::abi::hex(r.key), r.iova, r.bytes, std::move(r.memory));
        }
        return std::unexpected(std::move(e));
    }
    return {};
}

// ---- close ------------------------------------------------------------------------------------

result<void> control::close() {
    if (!_device || _device->torn_down()) {
        return {};
    }
    if (_pd) {
        _pds->free(*_pd);   // a number only: no command
        _pd.reset();
    }
    if (auto r = _device->teardown(); !r) {
        return std::unexpected(to_error(r.error()));
    }
    return {};
}

}  // namespace rig::qp::bnxt
