// Event queues, completion queues and RC queue pairs (objects.hpp; mlx5_ifc.h,
// the kernel's eq.c, cq.c and hw/mlx5/qp.c): their memory, CREATE/DESTROY, and the QP transitions.
#include <algorithm>
#include <bit>
#include <stdexcept>
#include <utility>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/eqe.hpp"
#include "abi/mlx5/ifc/qp.hpp"
#include "abi/mlx5/ifc/queues.hpp"
#include "firmware/mlx5/objects.hpp"

namespace rig::firmware::mlx5 {

namespace {

// The page list of a queue buffer: the largest page (4 KiB << k, at most the buffer rounded up
// to a power of two) that the buffer's IOVA is aligned to, so a buffer the IOVA allocator
// aligned to its size gets one PAS entry, as rdma-core's mlx5_vfio gives its EQs; otherwise
// 4 KiB pages, as the kernel's queues. log_page_size is relative to 4 KiB (eqc/cqc/qpc).
struct page_list {
    std::uint8_t log_page_size = 0;
    std::vector<std::uint64_t> pas;
};

page_list pages_of(std::uint64_t iova, std::size_t bytes) {
    page_list l;
    const std::uint64_t span = std::max<std::uint64_t>(std::bit_ceil(bytes), 4096);
    while (l.log_page_size < 18 && (std::uint64_t{4096} << (l.log_page_size + 1)) <= span &&
           iova % (std::uint64_t{4096} << (l.log_page_size + 1)) == 0) {
        ++l.log_page_size;
    }
    const std::uint64_t page = std::uint64_t{4096} << l.log_page_size;
    for (std::uint64_t at = 0; at < bytes; at += page) {
        l.pas.push_back(iova + at);
    }
    return l;
}

// A command input of layout In followed by a page list.
template <class In>
std::vector<std::byte> with_pages(ifc::opcode op, const page_list& pages) {
    std::vector<std::byte> in(ifc::length_with_pas<In>(pages.pas.size()));
    abi::set<In::opcode>(in, static_cast<std::uint16_t>(op));
    for (std::size_t i = 0; i < pages.pas.size(); ++i) {
        abi::set(in, ifc::pas_entry<In>(i), pages.pas[i]);
    }
    return in;
}

// The memory an object lends the device: its buffer and, for a CQ or QP, its doorbell record.
struct lent {
    mapped_memory& memory;
    doorbell_records* records = nullptr;
    doorbell_records::record* record = nullptr;

    void let_go(driver::function& fn, stranded_memory& stranded, bool firmware_may_hold) {
        memory.let_go(fn, stranded, firmware_may_hold);
        if (record != nullptr && record->taken()) {
            records->let_go(*record, firmware_may_hold);
        }
    }
};

// After a create the firmware refused or may have taken: its memory is given back, or
// stranded when the firmware may still name it.
template <class T>
result<T> refused(error e, lent memory, driver::function& fn, stranded_memory& stranded) {
    memory.let_go(fn, stranded, detail::firmware_may_hold(e));
    return std::unexpected(std::move(e));
}

// DESTROY_EQ/CQ/QP: header and one number.
template <class In, class Out>
result<void> destroy_object(command_queue& q, driver::function& fn, stranded_memory& stranded, ifc::opcode op,
                            abi::field number, std::uint32_t n, lent memory, deadline by) {
    if (!memory.memory.mapped()) {
        throw std::invalid_argument("mlx5 " + std::string(ifc::to_string(op)) + ": the object is not alive");
    }
    std::vector<std::byte> in(In::size_bytes);
    abi::set<In::opcode>(in, static_cast<std::uint16_t>(op));
    abi::set(in, number, n);
    auto out = q.exec<In, Out>(in, by);
    if (!out) {
        if (detail::firmware_may_hold(out.error())) {
            memory.let_go(fn, stranded, true);  // gone for us; the memory never comes back
        }
        return std::unexpected(std::move(out.error()));  // refused: the object stays as it was
    }
    memory.let_go(fn, stranded, false);
    return {};
}

// A CQ's or QP's buffer and record, taken before its CREATE; on a failure, neither is kept.
result<std::pair<mapped_memory, doorbell_records::record>> take_memory(driver::function& fn, doorbell_records& records,
                                                              std::size_t bytes, const char* what) {
    auto memory = mapped_memory::create(fn, bytes, what);
    if (!memory) {
        return std::unexpected(transport_error(std::move(memory.error())));
    }
    auto record = records.take();
    if (!record) {
        memory->release(fn);
        return std::unexpected(transport_error(std::string(what) + " doorbell record: " + record.error()));
    }
    return std::pair{std::move(*memory), *record};
}

}  // namespace

// ---- EQ -------------------------------------------------------------------------------------

result<eq> eq::create(command_queue& q, driver::function& fn, stranded_memory& stranded, const eq_params& params,
                      deadline by) {
    if (params.log_size > 24) {
        throw std::invalid_argument("mlx5 eq::create: log_size " + std::to_string(params.log_size) + " over 24");
    }
    const std::size_t bytes = std::size_t{64} << params.log_size;
    auto memory = mapped_memory::create(fn, bytes, "EQ buffer");
    if (!memory) {
        return std::unexpected(transport_error(std::move(memory.error())));
    }
    // Every EQE's owner bit 1 before CREATE_EQ (MLX5_EQE_OWNER_INIT_VAL): the device writes 0
    // on its first pass.
    for (std::size_t i = 0; i < (std::size_t{1} << params.log_size); ++i) {
        abi::set<ifc::eqe::owner>(std::span<std::byte>(memory->data() + 64 * i, 64), 1);
    }
    using In = ifc::create_eq_in;
    constexpr auto eqc = In::eq_context_entry;
    const page_list pages = pages_of(memory->iova(), bytes);
    auto in = with_pages<In>(ifc::opcode::create_eq, pages);
    abi::set<eqc(ifc::eqc::log_eq_size)>(in, params.log_size);
    abi::set<eqc(ifc::eqc::uar_page)>(in, params.uar);
    abi::set<eqc(ifc::eqc::intr)>(in, params.vector);
    abi::set<eqc(ifc::eqc::log_page_size)>(in, pages.log_page_size);
    for (std::uint32_t i = 0; i < params.event_bitmask.size(); ++i) {
        abi::set(in, ifc::event_bitmask_word(i), params.event_bitmask[i]);
    }
    auto out = q.exec<In, ifc::create_eq_out>(in, by);
    if (!out) {
        return refused<eq>(std::move(out.error()), {*memory}, fn, stranded);
    }
    eq e;
    e._eqn = static_cast<std::uint32_t>(abi::get<ifc::create_eq_out::eq_number>(*out));
    e._params = params;
    e._memory = std::move(*memory);
    e._memory.name("EQ " + abi::hex(e._eqn) + " buffer");
    return e;
}

result<void> eq::destroy(command_queue& q, driver::function& fn, stranded_memory& stranded, deadline by) {
    return destroy_object<ifc::destroy_eq_in, ifc::destroy_eq_out>(
        q, fn, stranded, ifc::opcode::destroy_eq, ifc::destroy_eq_in::eq_number, _eqn, {_memory}, by);
}

// ---- CQ -------------------------------------------------------------------------------------

result<cq> cq::create(command_queue& q, driver::function& fn, stranded_memory& stranded, doorbell_records& records,
                      const cq_params& params, deadline by) {
    if (params.log_size > 24) {
        throw std::invalid_argument("mlx5 cq::create: log_size " + std::to_string(params.log_size) + " over 24");
    }
    cq c;
    c._params = params;
    auto taken = take_memory(fn, records, c.buffer_bytes(), "CQ buffer");
    if (!taken) {
        return std::unexpected(std::move(taken.error()));
    }
    auto& [buffer, record] = *taken;
    // Every CQE's op_own (byte 0x3f) = 0xf0: opcode INVALID (15), owner 0 (kernel hw/mlx5/cq.c
    // init_cq_frag_buf, rdma-core cq.c; abi/mlx5/completion.hpp cqe_opcode::invalid).
    constexpr std::size_t op_own = 0x3f;
    for (std::size_t i = 0; i < (std::size_t{1} << params.log_size); ++i) {
        buffer.data()[64 * i + op_own] = std::byte{0xf0};
    }
    using In = ifc::create_cq_in;
    constexpr auto cqc = In::cq_context;
    const page_list pages = pages_of(buffer.iova(), c.buffer_bytes());
    auto in = with_pages<In>(ifc::opcode::create_cq, pages);
    abi::set<cqc(ifc::cqc::cqe_sz)>(in, static_cast<std::uint8_t>(ifc::cqc_cqe_sz::bytes_64));
    abi::set<cqc(ifc::cqc::log_cq_size)>(in, params.log_size);
    abi::set<cqc(ifc::cqc::uar_page)>(in, params.uar);
    abi::set<cqc(ifc::cqc::c_eqn_or_apu_element)>(in, params.eqn);
    abi::set<cqc(ifc::cqc::log_page_size)>(in, pages.log_page_size);
    abi::set<cqc(ifc::cqc::dbr_addr)>(in, record.iova);
    auto out = q.exec<In, ifc::create_cq_out>(in, by);
    if (!out) {
        return refused<cq>(std::move(out.error()), {buffer, &records, &record}, fn, stranded);
    }
    c._cqn = static_cast<std::uint32_t>(abi::get<ifc::create_cq_out::cqn>(*out));
    c._memory = std::move(buffer);
    c._records = &records;
    c._record = record;
    c._memory.name("CQ " + abi::hex(c._cqn) + " buffer");
    return c;
}

result<void> cq::destroy(command_queue& q, driver::function& fn, stranded_memory& stranded, deadline by) {
    return destroy_object<ifc::destroy_cq_in, ifc::destroy_cq_out>(q, fn, stranded, ifc::opcode::destroy_cq,
                                                                   ifc::destroy_cq_in::cqn, _cqn, {_memory, _records, &_record}, by);
}

// ---- QP -------------------------------------------------------------------------------------

result<qp> qp::create(command_queue& q, driver::function& fn, stranded_memory& stranded, doorbell_records& records,
                      const qp_params& params, deadline by) {
    if (params.log_sq_size > 24 || params.log_rq_size > 24 || params.log_rq_stride > 7) {
        throw std::invalid_argument("mlx5 qp::create: log_sq_size " + std::to_string(params.log_sq_size) +
                                    ", log_rq_size " + std::to_string(params.log_rq_size) + ", log_rq_stride " +
                                    std::to_string(params.log_rq_stride) + " out of range");
    }
    qp p;
    p._params = params;
    auto taken = take_memory(fn, records, p.rq_bytes() + p.sq_bytes(), "QP buffer");
    if (!taken) {
        return std::unexpected(std::move(taken.error()));
    }
    auto& [buffer, record] = *taken;
    using In = ifc::create_qp_in;
    constexpr auto qpc = In::qpc;
    const page_list pages = pages_of(buffer.iova(), p.rq_bytes() + p.sq_bytes());
    auto in = with_pages<In>(ifc::opcode::create_qp, pages);
    abi::set<qpc(ifc::qpc::st)>(in, static_cast<std::uint8_t>(ifc::qpc_st::rc));
    abi::set<qpc(ifc::qpc::pm_state)>(in, static_cast<std::uint8_t>(ifc::qpc_pm_state::migrated));
    abi::set<qpc(ifc::qpc::pd)>(in, params.pd);
    abi::set<qpc(ifc::qpc::cqn_snd)>(in, params.send_cq);
    abi::set<qpc(ifc::qpc::cqn_rcv)>(in, params.receive_cq);
    abi::set<qpc(ifc::qpc::uar_page)>(in, params.uar);
    abi::set<qpc(ifc::qpc::log_sq_size)>(in, params.log_sq_size);
    abi::set<qpc(ifc::qpc::log_rq_size)>(in, params.log_rq_size);
    abi::set<qpc(ifc::qpc::log_rq_stride)>(in, params.log_rq_stride);
    abi::set<qpc(ifc::qpc::log_page_size)>(in, pages.log_page_size);
    abi::set<qpc(ifc::qpc::dbr_addr)>(in, record.iova);
    auto out = q.exec<In, ifc::create_qp_out>(in, by);
    if (!out) {
        return refused<qp>(std::move(out.error()), {buffer, &records, &record}, fn, stranded);
    }
    p._qpn = static_cast<std::uint32_t>(abi::get<ifc::create_qp_out::qpn>(*out));
    p._memory = std::move(buffer);
    p._records = &records;
    p._record = record;
    p._memory.name("QP " + abi::hex(p._qpn) + " buffer");
    return p;
}

namespace {

// A modify command (rst2init_qp_in and its siblings share one layout): header, qpn, qpc.
std::vector<std::byte> modify_input(ifc::opcode op, std::uint32_t qpn) {
    std::vector<std::byte> in(ifc::rst2init_qp_in::size_bytes);
    abi::set<ifc::rst2init_qp_in::opcode>(in, static_cast<std::uint16_t>(op));
    abi::set<ifc::rst2init_qp_in::qpn>(in, qpn);
    return in;
}
constexpr abi::field ctx(abi::field f) noexcept { return ifc::rst2init_qp_in::qpc(f); }
constexpr abi::field primary(abi::field f) noexcept {
    return ifc::rst2init_qp_in::qpc(ifc::qpc::primary_address_path(f));
}

result<void> run(command_queue& q, std::span<const std::byte> in, deadline by) {
    auto out = q.exec<ifc::rst2init_qp_in, ifc::rst2init_qp_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return {};
}

}  // namespace

result<void> qp::rst2init(command_queue& q, std::uint8_t port, std::uint16_t pkey_index, qp_access access,
                          deadline by) {
    auto in = modify_input(ifc::opcode::rst2init_qp, _qpn);
    abi::set(in, ctx(ifc::qpc::rre), access.remote_read ? 1 : 0);
    abi::set(in, ctx(ifc::qpc::rwe), access.remote_write ? 1 : 0);
    abi::set(in, ctx(ifc::qpc::rae), access.remote_atomic ? 1 : 0);
    abi::set(in, primary(ifc::ads::vhca_port_num), port);
    abi::set(in, primary(ifc::ads::pkey_index), pkey_index);
    return run(q, in, by);
}

result<void> qp::init2rtr(command_queue& q, const qp_rtr_params& p, deadline by) {
    if (p.remote_qpn > 0xffffff || p.next_rcv_psn > 0xffffff) {
        throw std::invalid_argument("mlx5 qp::init2rtr: remote qpn " + abi::hex(p.remote_qpn) + " or psn " +
                                    abi::hex(p.next_rcv_psn) + " wider than 24 bits");
    }
    auto in = modify_input(ifc::opcode::init2rtr_qp, _qpn);
    abi::set(in, ctx(ifc::qpc::mtu), static_cast<std::uint8_t>(p.mtu));
    abi::set(in, ctx(ifc::qpc::log_msg_max), p.log_msg_max);
    abi::set(in, ctx(ifc::qpc::remote_qpn), p.remote_qpn);
    abi::set(in, ctx(ifc::qpc::next_rcv_psn), p.next_rcv_psn);
    abi::set(in, ctx(ifc::qpc::min_rnr_nak), p.min_rnr_nak);
    abi::set(in, ctx(ifc::qpc::log_rra_max), p.log_rra_max);
    abi::set_bytes(in, primary(ifc::ads::rgid_rip), std::as_bytes(std::span(p.rgid)));
    abi::set(in, primary(ifc::ads::rmac_47_32), std::uint64_t{p.rmac[0]} << 8 | p.rmac[1]);
    abi::set(in, primary(ifc::ads::rmac_31_0),
             std::uint64_t{p.rmac[2]} << 24 | std::uint64_t{p.rmac[3]} << 16 | std::uint64_t{p.rmac[4]} << 8 | p.rmac[5]);
    abi::set(in, primary(ifc::ads::src_addr_index), p.gid_index);
    abi::set(in, primary(ifc::ads::hop_limit), p.hop_limit);
    abi::set(in, primary(ifc::ads::udp_sport), p.udp_sport);
    abi::set(in, primary(ifc::ads::vhca_port_num), p.port);
    return run(q, in, by);
}

result<void> qp::rtr2rts(command_queue& q, const qp_rts_params& p, deadline by) {
    if (p.next_send_psn > 0xffffff || p.ack_timeout > 31 || p.retry_count > 7 || p.rnr_retry > 7 ||
        p.log_sra_max > 7) {
        throw std::invalid_argument("mlx5 qp::rtr2rts: psn " + abi::hex(p.next_send_psn) + ", ack timeout " +
                                    std::to_string(p.ack_timeout) + ", retry " + std::to_string(p.retry_count) +
                                    ", rnr retry " + std::to_string(p.rnr_retry) + " out of range");
    }
    auto in = modify_input(ifc::opcode::rtr2rts_qp, _qpn);
    abi::set(in, ctx(ifc::qpc::next_send_psn), p.next_send_psn);
    abi::set(in, ctx(ifc::qpc::retry_count), p.retry_count);
    abi::set(in, ctx(ifc::qpc::rnr_retry), p.rnr_retry);
    abi::set(in, ctx(ifc::qpc::log_sra_max), p.log_sra_max);
    abi::set(in, ctx(ifc::qpc::log_ack_req_freq), 8);  // the kernel's MLX5_IB_ACK_REQ_FREQ (hw/mlx5/qp.c)
    abi::set(in, primary(ifc::ads::ack_timeout), p.ack_timeout);
    abi::set(in, primary(ifc::ads::vhca_port_num), p.port);
    return run(q, in, by);
}

result<void> qp::to_error(command_queue& q, deadline by) {
    std::vector<std::byte> in(ifc::qp_2err_in::size_bytes);
    abi::set<ifc::qp_2err_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::qp_2err));
    abi::set<ifc::qp_2err_in::qpn>(in, _qpn);
    auto out = q.exec<ifc::qp_2err_in, ifc::qp_2err_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return {};
}

result<void> qp::to_reset(command_queue& q, deadline by) {
    std::vector<std::byte> in(ifc::qp_2rst_in::size_bytes);
    abi::set<ifc::qp_2rst_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::qp_2rst));
    abi::set<ifc::qp_2rst_in::qpn>(in, _qpn);
    auto out = q.exec<ifc::qp_2rst_in, ifc::qp_2rst_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return {};
}

result<qp_state_info> qp::query(command_queue& q, deadline by) const {
    using Out = ifc::query_qp_out;
    std::vector<std::byte> in(ifc::query_qp_in::size_bytes);
    abi::set<ifc::query_qp_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::query_qp));
    abi::set<ifc::query_qp_in::qpn>(in, _qpn);
    auto out = q.exec<ifc::query_qp_in, Out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    const std::span<const std::byte> o = *out;
    const auto get = [&](abi::field f) { return abi::get(o, Out::qpc(f)); };
    const auto path = [&](abi::field f) { return abi::get(o, Out::qpc(ifc::qpc::primary_address_path(f))); };
    qp_state_info s;
    s.state = static_cast<ifc::qpc_state>(get(ifc::qpc::state));
    s.remote_qpn = static_cast<std::uint32_t>(get(ifc::qpc::remote_qpn));
    s.next_rcv_psn = static_cast<std::uint32_t>(get(ifc::qpc::next_rcv_psn));
    s.next_send_psn = static_cast<std::uint32_t>(get(ifc::qpc::next_send_psn));
    s.mtu = static_cast<ifc::qpc_mtu>(get(ifc::qpc::mtu));
    s.ack_timeout = static_cast<std::uint8_t>(path(ifc::ads::ack_timeout));
    s.retry_count = static_cast<std::uint8_t>(get(ifc::qpc::retry_count));
    s.rnr_retry = static_cast<std::uint8_t>(get(ifc::qpc::rnr_retry));
    s.src_addr_index = static_cast<std::uint8_t>(path(ifc::ads::src_addr_index));
    s.udp_sport = static_cast<std::uint16_t>(path(ifc::ads::udp_sport));
    const auto gid = abi::bytes_of(o, Out::qpc(ifc::qpc::primary_address_path(ifc::ads::rgid_rip)));
    std::ranges::transform(gid, s.rgid.begin(), [](std::byte b) { return std::to_integer<std::uint8_t>(b); });
    const auto hi = path(ifc::ads::rmac_47_32);
    const auto lo = path(ifc::ads::rmac_31_0);
    s.rmac = {static_cast<std::uint8_t>(hi >> 8), static_cast<std::uint8_t>(hi),
              static_cast<std::uint8_t>(lo >> 24), static_cast<std::uint8_t>(lo >> 16),
              static_cast<std::uint8_t>(lo >> 8), static_cast<std::uint8_t>(lo)};
    s.access = {get(ifc::qpc::rre) != 0, get(ifc::qpc::rwe) != 0, get(ifc::qpc::rae) != 0};
    return s;
}

result<void> qp::destroy(command_queue& q, driver::function& fn, stranded_memory& stranded, deadline by) {
    return destroy_object<ifc::destroy_qp_in, ifc::destroy_qp_out>(q, fn, stranded, ifc::opcode::destroy_qp,
                                                                   ifc::destroy_qp_in::qpn, _qpn, {_memory, _records, &_record}, by);
}

}  // namespace rig::firmware::mlx5
