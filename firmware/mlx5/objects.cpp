// UAR and PD numbers, mapped memory, memory keys (objects.hpp; rdma-core
// mlx5_vfio.c mlx5_vfio_reg_mr; mlx5_ifc.h create_mkey_in).
// The queues (EQ, CQ, QP) are in queue_objects.cpp.
#include "firmware/mlx5/objects.hpp"

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

#include "abi/bits.hpp"
#include "abi/mlx5/ifc/resources.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::mlx5 {

// ---- command plumbing (objects.hpp, detail) -------------------------------------------------

bool detail::firmware_may_hold(const error& e) noexcept {
    // status, delivery: the firmware answered and did nothing; bad_input: nothing was sent.
    return e.kind != error_kind::status && e.kind != error_kind::delivery && e.kind != error_kind::bad_input;
}

// ---- UAR, PD --------------------------------------------------------------------------------

result<std::uint32_t> alloc_uar(command_queue& q, deadline by) {
    std::vector<std::byte> in(ifc::alloc_uar_in::size_bytes);
    abi::set<ifc::alloc_uar_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::alloc_uar));
    auto out = q.exec<ifc::alloc_uar_in, ifc::alloc_uar_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return static_cast<std::uint32_t>(abi::get<ifc::alloc_uar_out::uar>(*out));
}

result<void> dealloc_uar(command_queue& q, std::uint32_t uar, deadline by) {
    std::vector<std::byte> in(ifc::dealloc_uar_in::size_bytes);
    abi::set<ifc::dealloc_uar_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::dealloc_uar));
    abi::set<ifc::dealloc_uar_in::uar>(in, uar);
    auto out = q.exec<ifc::dealloc_uar_in, ifc::dealloc_uar_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return {};
}

result<std::uint32_t> alloc_pd(command_queue& q, deadline by) {
    std::vector<std::byte> in(ifc::alloc_pd_in::size_bytes);
    abi::set<ifc::alloc_pd_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::alloc_pd));
    auto out = q.exec<ifc::alloc_pd_in, ifc::alloc_pd_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return static_cast<std::uint32_t>(abi::get<ifc::alloc_pd_out::pd>(*out));
}

result<void> dealloc_pd(command_queue& q, std::uint32_t pd, deadline by) {
    std::vector<std::byte> in(ifc::dealloc_pd_in::size_bytes);
    abi::set<ifc::dealloc_pd_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::dealloc_pd));
    abi::set<ifc::dealloc_pd_in::pd>(in, pd);
    auto out = q.exec<ifc::dealloc_pd_in, ifc::dealloc_pd_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return {};
}

// ---- MKEY (rdma-core mlx5_vfio.c mlx5_vfio_reg_mr) ----------------------------------------------

result<mkey> mkey::create(command_queue& q, std::uint32_t pd, std::uint64_t iova, std::size_t length,
                          mkey_access access, deadline by) {
    if (length == 0) {
        throw std::invalid_argument("mlx5 create_mkey: length 0");
    }
    if (iova + (length - 1) < iova) {
        throw std::invalid_argument("mlx5 create_mkey: [" + abi::hex(iova) + ", +" + std::to_string(length) +
                                    ") wraps the address space");
    }
    // One MTT entry per 4 KiB page touched, each `page | read | write` (rdma-core mlx5_vfio
    // reg_mr sets both enables; the key's own rights gate the accesses).
    constexpr unsigned shift = 12;
    const std::uint64_t first = iova >> shift;
    const std::uint64_t last = (iova + length - 1) >> shift;
    const std::size_t pages = static_cast<std::size_t>(last - first + 1);
    const std::size_t octwords = (pages + 1) / 2;
    using In = ifc::create_mkey_in;
    constexpr auto mkc = In::memory_key_mkey_entry;
    std::vector<std::byte> in(In::size_bytes + 16 * octwords);
    abi::set<In::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::create_mkey));
    abi::set<In::pg_access>(in, 1);
    abi::set<mkc(ifc::mkc::access_mode_1_0)>(in, static_cast<std::uint8_t>(ifc::mkc_access_mode::mtt));
    abi::set<mkc(ifc::mkc::lr)>(in, 1);
    abi::set<mkc(ifc::mkc::lw)>(in, access.local_write ? 1 : 0);
    abi::set<mkc(ifc::mkc::rr)>(in, access.remote_read ? 1 : 0);
    abi::set<mkc(ifc::mkc::rw)>(in, access.remote_write ? 1 : 0);
    abi::set<mkc(ifc::mkc::qpn)>(in, 0xffffff);
    static std::atomic<std::uint8_t> variant{0};
    const std::uint8_t key_low = variant.fetch_add(1, std::memory_order_relaxed);
    abi::set<mkc(ifc::mkc::mkey_7_0)>(in, key_low);
    abi::set<mkc(ifc::mkc::pd)>(in, pd);
    abi::set<mkc(ifc::mkc::start_addr)>(in, iova);
    abi::set<mkc(ifc::mkc::len)>(in, length);
    abi::set<mkc(ifc::mkc::translations_octword_size)>(in, octwords);
    abi::set<mkc(ifc::mkc::log_page_size)>(in, shift);
    abi::set<In::translations_octword_actual_size>(in, octwords);
    for (std::size_t i = 0; i < pages; ++i) {
        abi::set(in, ifc::pas_entry<In>(i), ((first + i) << shift) | ifc::mtt::read_enable | ifc::mtt::write_enable);
    }
    auto out = q.exec<In, ifc::create_mkey_out>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    mkey m;
    m._index = static_cast<std::uint32_t>(abi::get<ifc::create_mkey_out::mkey_index>(*out));
    m._key = m._index << 8 | key_low;
    m._alive = true;
    return m;
}

result<void> mkey::destroy(command_queue& q, deadline by) {
    if (!_alive) {
        throw std::invalid_argument("mlx5 mkey::destroy: the key is not alive");
    }
    std::vector<std::byte> in(ifc::destroy_mkey_in::size_bytes);
    abi::set<ifc::destroy_mkey_in::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::destroy_mkey));
    abi::set<ifc::destroy_mkey_in::mkey_index>(in, _index);
    auto out = q.exec<ifc::destroy_mkey_in, ifc::destroy_mkey_out>(in, by);
    if (!out) {
        if (detail::firmware_may_hold(out.error())) {
            _alive = false;  // the key may or may not exist: it counts as gone, its memory is the caller's
        }
        return std::unexpected(std::move(out.error()));
    }
    _alive = false;
    return {};
}

}  // namespace rig::firmware::mlx5
