// The firmware's resource commands (firmware.hpp): ALLOC/DEALLOC_UAR, ALLOC/DEALLOC_PD,
// CREATE/DESTROY_MKEY, CREATE/DESTROY_EQ, CREATE/DESTROY_CQ (mlx5_ifc.h),
// and the key translation the data path asks for. The QP commands are in qp.cpp.
//
// Statuses, as a card gives them (the kernel logs these as "bad resource state(0x9)" for a
// DESTROY_MKEY/DESTROY_CQ of a number that names nothing, and for a destroy of an object still
// in use): a number that names nothing or an object still named by another -> BAD_RES_STATE_ERR;
// a context that names a missing PD/UAR/EQ/CQ, or a value outside the capabilities ->
// BAD_PARAM_ERR; no number left -> NO_RES_ERR; inputs shorter than their translation/page list
// -> BAD_INP_LEN_ERR. Every command needs an initialized function (else BAD_SYS_STATE_ERR).
// A refused command changes nothing.
#include <algorithm>
#include <array>
#include <optional>

#include "abi/mlx5/ifc/queues.hpp"
#include "abi/mlx5/ifc/resources.hpp"
#include "sim/mlx5/call.hpp"

namespace rig::sim::mlx5 {

namespace {

constexpr std::uint64_t page_bytes(std::uint8_t log_page_size_4k) noexcept {
    return std::uint64_t{4096} << log_page_size_4k;
}

}  // namespace

bool firmware::in_state(call& c, hca_state needed) {
    if (_state != needed) {
        c.fail(cmd_status::bad_sys_state_err, failure::wrong_state);
        return false;
    }
    return true;
}

// The page list of a queue buffer of `bytes` (EQ, CQ, QP): ceil(bytes / page) entries of
// 4 KiB << log_page_size each, page aligned and in memory the driver mapped for the device (the
// probe is a DMA read, recorded as a fault by dma_space when it is refused). The entry count
// is not in the command: the firmware derives it from the queue's size, and the input must be
// long enough to hold it.
bool firmware::queue_pages(call& c, std::uint8_t log_page_size, std::uint32_t page_offset, std::size_t bytes,
                           abi::field (*entry)(std::size_t), std::vector<std::uint64_t>& pas) {
    if (log_page_size > 18 || page_offset != 0) {  // page_offset: not modelled; drivers write 0
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return false;
    }
    const std::uint64_t page = page_bytes(log_page_size);
    const std::size_t n = static_cast<std::size_t>((bytes + page - 1) / page);
    if (c.inlen < entry(0).off / 8 + 8 * n) {
        c.fail(cmd_status::bad_inp_len_err, failure::input_too_short);
        return false;
    }
    pas.clear();
    pas.reserve(n);
    std::array<std::byte, 8> probe;
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint64_t pa = c.get(entry(i));
        if ((pa & (page - 1)) != 0) {
            c.fail(cmd_status::bad_param_err, failure::unaligned_page);
            return false;
        }
        const std::uint64_t used = std::min<std::uint64_t>(page, bytes - i * page);
        if (c.dma == nullptr || !c.dma->read(pa, probe) || !c.dma->read(pa + used - probe.size(), probe)) {
            c.fail(cmd_status::bad_param_err, failure::page_not_mapped);
            return false;
        }
        pas.push_back(pa);
    }
    return true;
}

void firmware::drop_objects() {
    _changes.note_all();   // every table emptied: the data path follows them all
    _qps.clear();
    _cqs.clear();
    _eqs.clear();
    _mkeys.clear();
    _pds.clear();
    _uars.clear();
}

// ---- UAR ----------------------------------------------------------------------------------

void firmware::alloc_uar(call& c) {
    if (!c.sizes<ifc::alloc_uar_in, ifc::alloc_uar_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    std::uint32_t next = _options.first_uar_page;  // the lowest free page
    const auto uar = detail::free_number(_uars, next, _options.first_uar_page, _options.uar_pages);
    if (!uar) {
        c.fail(cmd_status::no_res_err, failure::no_resources);
        return;
    }
    _uars.insert(*uar);
    c.set(ifc::alloc_uar_out::uar, *uar);
}

void firmware::dealloc_uar(call& c) {
    destroy_named<ifc::dealloc_uar_in, ifc::dealloc_uar_out>(c, ifc::dealloc_uar_in::uar, _uars, [&](std::uint32_t uar) {
        const auto on_uar = [&](const auto& e) { return e.second.uar_page == uar; };
        return std::ranges::any_of(_eqs, on_uar) || std::ranges::any_of(_cqs, on_uar) || std::ranges::any_of(_qps, on_uar);
    });
}

// ---- PD -----------------------------------------------------------------------------------

void firmware::alloc_pd(call& c) {
    if (!c.sizes<ifc::alloc_pd_in, ifc::alloc_pd_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    const auto pd = detail::free_number(_pds, _next_pd, 1, _options.max_objects);
    if (!pd) {
        c.fail(cmd_status::no_res_err, failure::no_resources);
        return;
    }
    _pds.insert(*pd);
    c.set(ifc::alloc_pd_out::pd, *pd);
}

void firmware::dealloc_pd(call& c) {
    destroy_named<ifc::dealloc_pd_in, ifc::dealloc_pd_out>(c, ifc::dealloc_pd_in::pd, _pds, [&](std::uint32_t pd) {
        const auto in_pd = [&](const auto& e) { return e.second.pd == pd; };
        return std::ranges::any_of(_mkeys, in_pd) || std::ranges::any_of(_qps, in_pd);
    });
}

// ---- MKEY (rdma-core mlx5_vfio.c mlx5_vfio_reg_mr, mlx5_ifc.h) ----------------------------------

void firmware::create_mkey(call& c) {
    using In = ifc::create_mkey_in;
    if (!c.sizes<In, ifc::create_mkey_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    constexpr auto mkc = In::memory_key_mkey_entry;
    mkey_object m;
    m.access_mode = static_cast<std::uint8_t>(c.get(mkc(ifc::mkc::access_mode_4_2)) << 2 |
                                              c.get(mkc(ifc::mkc::access_mode_1_0)));
    m.pd = static_cast<std::uint32_t>(c.get(mkc(ifc::mkc::pd)));
    m.start_addr = c.get(mkc(ifc::mkc::start_addr));
    m.len = c.get(mkc(ifc::mkc::len));
    m.length64 = c.get(mkc(ifc::mkc::length64)) != 0;
    m.log_page_size = static_cast<std::uint8_t>(c.get(mkc(ifc::mkc::log_page_size)));
    m.rights = static_cast<std::uint8_t>((c.get(mkc(ifc::mkc::lr)) != 0 ? mkey_right::local_read : 0) |
                                         (c.get(mkc(ifc::mkc::lw)) != 0 ? mkey_right::local_write : 0) |
                                         (c.get(mkc(ifc::mkc::rr)) != 0 ? mkey_right::remote_read : 0) |
                                         (c.get(mkc(ifc::mkc::rw)) != 0 ? mkey_right::remote_write : 0) |
                                         (c.get(mkc(ifc::mkc::a)) != 0 ? mkey_right::atomic : 0));
    const auto mode = static_cast<ifc::mkc_access_mode>(m.access_mode);
    // Modelled: PA and MTT keys of a PD, not bound to a QP (qpn 0xffffff, mlx5_ifc.h), created
    // valid (free = 0), without UMEM. KLM/KSM/UMR keys get BAD_PARAM_ERR here.
    if ((mode != ifc::mkc_access_mode::pa && mode != ifc::mkc_access_mode::mtt) ||
        c.get(mkc(ifc::mkc::free)) != 0 || c.get(mkc(ifc::mkc::qpn)) != 0xffffff ||
        c.get(In::mkey_umem_valid) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    if (!_pds.contains(m.pd)) {
        c.fail(cmd_status::bad_param_err, failure::bad_reference);
        return;
    }
    const std::uint64_t octwords = c.get(mkc(ifc::mkc::translations_octword_size));
    const std::uint64_t actual = c.get(In::translations_octword_actual_size);
    if (mode == ifc::mkc_access_mode::pa) {
        if (octwords != 0 || actual != 0) {  // a PA key translates nothing
            c.fail(cmd_status::bad_param_err, failure::bad_translation);
            return;
        }
    } else {
        // MTT: one 64-bit entry per page of 2^log_page_size bytes (absolute shift) touched by
        // [start_addr, start_addr + len); the first page holds start_addr at its offset in the
        // page. translations_octword_actual_size octwords (2 entries each) follow the fixed part.
        if (m.length64 || m.log_page_size < 12 || m.log_page_size > 31) {
            c.fail(cmd_status::bad_param_err, failure::bad_parameter);
            return;
        }
        const std::uint64_t mask = (std::uint64_t{1} << m.log_page_size) - 1;
        const std::uint64_t span = (m.start_addr & mask) + m.len;
        if (span < m.len) {  // wrapped
            c.fail(cmd_status::bad_param_err, failure::bad_parameter);
            return;
        }
        const std::uint64_t pages = (span + mask) >> m.log_page_size;
        if (actual > octwords || 2 * actual < pages || actual > (std::uint64_t{1} << 20)) {
            c.fail(cmd_status::bad_param_err, failure::bad_translation);
            return;
        }
        if (c.inlen < In::size_bytes + 16 * actual) {
            c.fail(cmd_status::bad_inp_len_err, failure::input_too_short);
            return;
        }
        m.mtt.reserve(static_cast<std::size_t>(pages));
        for (std::size_t i = 0; i < pages; ++i) {
            const std::uint64_t e = c.get(ifc::pas_entry<In>(i));
            if ((e & ~std::uint64_t{3} & mask) != 0) {
                c.fail(cmd_status::bad_param_err, failure::unaligned_page);
                return;
            }
            m.mtt.push_back(e);
        }
    }
    const auto index = detail::free_number(_mkeys, _next_mkey, 1, std::min<std::uint32_t>(_options.max_objects, 0xffffff));
    if (!index) {
        c.fail(cmd_status::no_res_err, failure::no_resources);
        return;
    }
    m.index = *index;
    m.key = *index << 8 | static_cast<std::uint32_t>(c.get(mkc(ifc::mkc::mkey_7_0)));
    _mkeys.emplace(*index, std::move(m));
    _changes.note(&object_changes::keys, *index);
    c.set(ifc::create_mkey_out::mkey_index, *index);
}

void firmware::destroy_mkey(call& c) {
    destroy_named<ifc::destroy_mkey_in, ifc::destroy_mkey_out>(c, ifc::destroy_mkey_in::mkey_index, _mkeys,
                                                               [](std::uint32_t) { return false; });
    if (!c.failed) {
        _changes.note(&object_changes::keys, static_cast<std::uint32_t>(c.get(ifc::destroy_mkey_in::mkey_index)));
    }
}

const mkey_object* firmware::mkey(std::uint32_t key) const {
    const auto it = _mkeys.find(key >> 8);
    return it != _mkeys.end() && it->second.key == key ? &it->second : nullptr;
}

bool firmware::mkey_translate(std::uint32_t key, std::uint64_t va, std::size_t len, std::uint8_t needed,
                              std::vector<dma_segment>& out) const {
    out.clear();
    const mkey_object* m = mkey(key);
    if (m == nullptr || (m->rights & needed) != needed) {
        return false;
    }
    if (!m->length64) {
        if (va < m->start_addr || len > m->len || va - m->start_addr > m->len - len) {
            return false;
        }
    } else if (len != 0 && va + (len - 1) < va) {
        return false;
    }
    if (len == 0) {
        return true;
    }
    if (m->access_mode == static_cast<std::uint8_t>(ifc::mkc_access_mode::pa)) {
        out.push_back({va, len});
        return true;
    }
    // MTT: the page's read/write enables gate the device's reads and writes of it.
    const bool reads = (needed & (mkey_right::local_read | mkey_right::remote_read | mkey_right::atomic)) != 0;
    const bool writes = (needed & (mkey_right::local_write | mkey_right::remote_write | mkey_right::atomic)) != 0;
    const std::uint64_t page = std::uint64_t{1} << m->log_page_size;
    std::uint64_t offset = va - m->start_addr + (m->start_addr & (page - 1));
    std::size_t left = len;
    while (left > 0) {
        const std::uint64_t e = m->mtt[static_cast<std::size_t>(offset >> m->log_page_size)];
        if ((reads && (e & ifc::mtt::read_enable) == 0) || (writes && (e & ifc::mtt::write_enable) == 0)) {
            out.clear();
            return false;
        }
        const std::uint64_t in_page = offset & (page - 1);
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, page - in_page));
        out.push_back({(e & ~std::uint64_t{3} & ~(page - 1)) + in_page, n});
        offset += n;
        left -= n;
    }
    return true;
}

// ---- EQ (mlx5_ifc.h; kernel eq.c) ---------------------------------------------------------------

void firmware::create_eq(call& c) {
    using In = ifc::create_eq_in;
    if (!c.sizes<In, ifc::create_eq_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    constexpr auto eqc = In::eq_context_entry;
    eq_object e;
    e.log_eq_size = static_cast<std::uint8_t>(c.get(eqc(ifc::eqc::log_eq_size)));
    e.uar_page = static_cast<std::uint32_t>(c.get(eqc(ifc::eqc::uar_page)));
    e.intr = static_cast<std::uint16_t>(c.get(eqc(ifc::eqc::intr)));
    e.log_page_size = static_cast<std::uint8_t>(c.get(eqc(ifc::eqc::log_page_size)));
    e.page_offset = static_cast<std::uint32_t>(c.get(eqc(ifc::eqc::page_offset)));
    if (e.log_eq_size > _options.log_max_eq_sz) {
        c.fail(cmd_status::bad_param_err, failure::bad_size);
        return;
    }
    if (e.intr >= _options.msix_vectors) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    if (!_uars.contains(e.uar_page)) {
        c.fail(cmd_status::bad_param_err, failure::bad_reference);
        return;
    }
    if (!queue_pages(c, e.log_page_size, e.page_offset, std::size_t{64} << e.log_eq_size, &ifc::pas_entry<In>,
                     e.pas)) {
        return;
    }
    for (std::uint32_t i = 0; i < e.event_bitmask.size(); ++i) {
        e.event_bitmask[i] = c.get(ifc::event_bitmask_word(i));
    }
    // eq_number is 8 bits wide (create_eq_out)
    const auto eqn = detail::free_number(_eqs, _next_eq, 0, std::min<std::uint32_t>(_options.max_objects, 256));
    if (!eqn) {
        c.fail(cmd_status::no_res_err, failure::no_resources);
        return;
    }
    e.eqn = *eqn;
    _eqs.emplace(*eqn, std::move(e));
    c.set(ifc::create_eq_out::eq_number, *eqn);
}

void firmware::destroy_eq(call& c) {
    destroy_named<ifc::destroy_eq_in, ifc::destroy_eq_out>(c, ifc::destroy_eq_in::eq_number, _eqs, [&](std::uint32_t eqn) {
        return std::ranges::any_of(_cqs, [&](const auto& q) { return q.second.eqn == eqn; });
    });
}

const eq_object* firmware::eq(std::uint32_t eqn) const {
    const auto it = _eqs.find(eqn);
    return it != _eqs.end() ? &it->second : nullptr;
}

// ---- CQ (mlx5_ifc.h; kernel cq.c; rdma-core cq.c) -----------------------------------------------

void firmware::create_cq(call& c) {
    using In = ifc::create_cq_in;
    if (!c.sizes<In, ifc::create_cq_out>() || !in_state(c, hca_state::initialized)) {
        return;
    }
    constexpr auto cqc = In::cq_context;
    cq_object q;
    q.log_cq_size = static_cast<std::uint8_t>(c.get(cqc(ifc::cqc::log_cq_size)));
    q.uar_page = static_cast<std::uint32_t>(c.get(cqc(ifc::cqc::uar_page)));
    q.eqn = static_cast<std::uint32_t>(c.get(cqc(ifc::cqc::c_eqn_or_apu_element)));
    q.dbr_addr = c.get(cqc(ifc::cqc::dbr_addr));
    q.log_page_size = static_cast<std::uint8_t>(c.get(cqc(ifc::cqc::log_page_size)));
    q.page_offset = static_cast<std::uint32_t>(c.get(cqc(ifc::cqc::page_offset)));
    // Modelled: 64-byte CQEs, no compression, buffer and doorbell record by address (no UMEM).
    if (c.get(cqc(ifc::cqc::cqe_sz)) != static_cast<std::uint8_t>(ifc::cqc_cqe_sz::bytes_64) ||
        c.get(cqc(ifc::cqc::cqe_comp_en)) != 0 || c.get(cqc(ifc::cqc::dbr_umem_valid)) != 0 ||
        c.get(cqc(ifc::cqc::apu_cq)) != 0 || c.get(In::cq_umem_valid) != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    if (q.log_cq_size > _options.log_max_cq_sz) {
        c.fail(cmd_status::bad_param_err, failure::bad_size);
        return;
    }
    if (!_eqs.contains(q.eqn) || !_uars.contains(q.uar_page)) {
        c.fail(cmd_status::bad_param_err, failure::bad_reference);
        return;
    }
    std::array<std::byte, 8> probe;
    if (q.dbr_addr % 8 != 0) {
        c.fail(cmd_status::bad_param_err, failure::bad_parameter);
        return;
    }
    if (c.dma == nullptr || !c.dma->read(q.dbr_addr, probe)) {
        c.fail(cmd_status::bad_param_err, failure::page_not_mapped);
        return;
    }
    if (!queue_pages(c, q.log_page_size, q.page_offset, std::size_t{64} << q.log_cq_size, &ifc::pas_entry<In>,
                     q.pas)) {
        return;
    }
    const auto cqn = detail::free_number(_cqs, _next_cq, 1, std::min<std::uint32_t>(_options.max_objects, 0xffffff));
    if (!cqn) {
        c.fail(cmd_status::no_res_err, failure::no_resources);
        return;
    }
    q.cqn = *cqn;
    _cqs.emplace(*cqn, std::move(q));
    _changes.note(&object_changes::cqs, *cqn);
    c.set(ifc::create_cq_out::cqn, *cqn);
}

void firmware::destroy_cq(call& c) {
    destroy_named<ifc::destroy_cq_in, ifc::destroy_cq_out>(c, ifc::destroy_cq_in::cqn, _cqs, [&](std::uint32_t cqn) {
        return std::ranges::any_of(_qps, [&](const auto& q) { return q.second.cqn_snd == cqn || q.second.cqn_rcv == cqn; });
    });
    if (!c.failed) {
        _changes.note(&object_changes::cqs, static_cast<std::uint32_t>(c.get(ifc::destroy_cq_in::cqn)));
    }
}

const cq_object* firmware::cq(std::uint32_t cqn) const {
    const auto it = _cqs.find(cqn);
    return it != _cqs.end() ? &it->second : nullptr;
}

}  // namespace rig::sim::mlx5
