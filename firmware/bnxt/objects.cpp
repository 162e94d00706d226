// PD numbers, queue memory, completion queues and memory regions over the RCFW channel
// (objects.hpp; bnxt_re qplib_sp.c, qplib_fp.c). Queue pairs are in queue_pair.cpp.
#include "firmware/bnxt/objects.hpp"

#include <atomic>
#include <stdexcept>
#include <string>
#include <utility>

#include "abi/bits.hpp"
#include "abi/bnxt/hwrm.hpp"

namespace rig::firmware::bnxt {

namespace {

constexpr std::size_t table_page = 4096;
constexpr std::size_t ptes_per_page = table_page / 8;

// The page list of `pages` (4 KiB page addresses) written into `tables` (page-aligned, IOVA
// `tables_iova`, room for the tables): level 1 up to 512 pages, level 2 beyond (qplib_res.c
// __alloc_pbl, bnxt_qplib_alloc_init_hwq). Returns the top table's IOVA and the level.
std::pair<std::uint64_t, std::uint8_t> write_page_list(const std::vector<std::uint64_t>& pages, std::byte* tables,
                                                       std::uint64_t tables_iova) {
    const std::size_t pte_pages = (pages.size() + ptes_per_page - 1) / ptes_per_page;
    for (std::size_t i = 0; i < pages.size(); ++i) {
        rig::abi::store_le<std::uint64_t>(tables + 8 * i, pages[i] | abi::PTU_PTE_VALID);
    }
    if (pte_pages == 1) {
        return {tables_iova, 1};
    }
    std::byte* pde = tables + pte_pages * table_page;
    for (std::size_t t = 0; t < pte_pages; ++t) {
        rig::abi::store_le<std::uint64_t>(pde + 8 * t, (tables_iova + t * table_page) | abi::PTU_PDE_VALID);
    }
    return {tables_iova + pte_pages * table_page, 2};
}

// Table pages a list of `pages` needs (none for one page: level 0).
std::size_t table_pages(std::size_t pages) {
    if (pages <= 1) {
        return 0;
    }
    const std::size_t pte_pages = (pages + ptes_per_page - 1) / ptes_per_page;
    return pte_pages == 1 ? 1 : pte_pages + 1;
}

// After a create the firmware refused or may have taken: its memory given back, or stranded.
template <class T>
result<T> refused(error e, mapped_memory& memory, driver::function& fn, stranded_memory& stranded) {
    memory.let_go(fn, stranded, detail::firmware_may_hold(e));
    return std::unexpected(std::move(e));
}

// A handle for the firmware to echo (cq_handle, mrw_handle): unique in the process.
std::uint64_t next_handle() {
    static std::atomic<std::uint64_t> n{0x52494700000000};   // "RIG"
    return ++n;
}

}  // namespace

bool detail::firmware_may_hold(const error& e) noexcept {
    return e.kind != error_kind::status && e.kind != error_kind::bad_input;
}

result<detail::paged_memory> detail::paged(driver::function& fn, std::size_t data_bytes, std::string what) {
    const std::size_t pages = (data_bytes + table_page - 1) / table_page;
    auto memory = mapped_memory::create(fn, (pages + table_pages(pages)) * table_page, std::move(what));
    if (!memory) {
        return std::unexpected(plain_error(error_kind::transport, memory.error()));
    }
    paged_memory p;
    p.data_bytes = data_bytes;
    if (pages == 1) {
        p.pbl = memory->iova();
    } else {
        std::vector<std::uint64_t> list(pages);
        for (std::size_t i = 0; i < pages; ++i) {
            list[i] = memory->iova() + i * table_page;
        }
        std::tie(p.pbl, p.level) = write_page_list(list, memory->data() + pages * table_page, memory->iova() + pages * table_page);
    }
    p.memory = std::move(*memory);
    return p;
}

// ---- PD numbers --------------------------------------------------------------------------------

pd_numbers::pd_numbers(std::uint32_t max) : _taken(max, false) {}

result<std::uint32_t> pd_numbers::alloc() {
    for (std::size_t i = 0; i < _taken.size(); ++i) {
        if (!_taken[i]) {
            _taken[i] = true;
            return static_cast<std::uint32_t>(i);
        }
    }
    error e = plain_error(error_kind::status, "no free protection domain: all " + std::to_string(_taken.size()) +
                                                  " (QUERY_FUNC max_pd) taken");
    e.channel = "rcfw";
    e.error_code = abi::CREQ_QP_EVENT_STATUS_RESOURCES;
    return std::unexpected(std::move(e));
}

void pd_numbers::free(std::uint32_t pd) {
    if (pd >= _taken.size() || !_taken[pd]) {
        throw std::invalid_argument("bnxt pd_numbers::free: protection domain " + std::to_string(pd) +
                                    " is not allocated");
    }
    _taken[pd] = false;
}

// ---- CQ ------------------------------------------------------------------------------------------

result<cq> cq::create(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, const cq_params& params,
                      deadline by) {
    if (params.entries == 0 || params.entries > 0xfffff) {
        throw std::invalid_argument("bnxt cq::create: " + std::to_string(params.entries) +
                                    " entries (1..1048575, QUERY_FUNC max_cqe)");
    }
    cq c;
    c._params = params;
    if (c._params.handle == 0) {
        c._params.handle = next_handle();
    }
    auto queue = detail::paged(fn, std::size_t{32} * params.entries, "CQ buffer");
    if (!queue) {
        return std::unexpected(std::move(queue.error()));
    }
    c._queue = std::move(*queue);
    abi::cmdq_create_cq in;
    in.cq_handle = c._params.handle;
    in.lvl = c._queue.level;
    in.pg_size = 0;   // 4 KiB (CMDQ_CREATE_CQ_PG_SIZE_PG_4K)
    in.cnq_id = params.nq_ring;
    in.dpi = params.dpi;
    in.cq_size = params.entries;
    in.pbl = c._queue.pbl;
    auto out = ch.send<abi::creq_create_cq_resp>(in, 0, by);
    if (!out) {
        return refused<cq>(std::move(out.error()), c._queue.memory, fn, stranded);
    }
    c._id = out->xid;
    c._queue.memory.name("CQ " + std::to_string(c._id) + " buffer");
    return c;
}

result<void> cq::destroy(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, deadline by) {
    if (!alive()) {
        throw std::invalid_argument("bnxt cq::destroy: the CQ is not alive");
    }
    abi::cmdq_destroy_cq in;
    in.cq_cid = _id;
    auto out = ch.send<abi::creq_destroy_cq_resp>(in, 0, by);
    if (!out) {
        if (detail::firmware_may_hold(out.error())) {
            _queue.memory.strand(stranded);
        }
        return std::unexpected(std::move(out.error()));
    }
    _queue.memory.release(fn);
    return {};
}

// ---- MR ------------------------------------------------------------------------------------------

namespace {

std::uint8_t register_access(mr_access a) {
    if ((a.remote_write) && !a.local_write) {
        throw std::invalid_argument("bnxt mr::create: remote write without local write (IB 10.6.3.1)");
    }
    return static_cast<std::uint8_t>((a.local_write ? abi::CMDQ_REGISTER_MR_ACCESS_LOCAL_WRITE : 0) |
                                     (a.remote_read ? abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_READ : 0) |
                                     (a.remote_write ? abi::CMDQ_REGISTER_MR_ACCESS_REMOTE_WRITE : 0));
}

result<void> deallocate_key(rcfw_channel& ch, std::uint32_t key, deadline by) {
    abi::cmdq_deallocate_key in;
    in.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR;
    in.key = key;
    auto out = ch.send<abi::creq_deallocate_key_resp>(in, 0, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    return {};
}

}  // namespace

result<mr> mr::create(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, std::uint32_t pd,
                      std::uint64_t iova, std::size_t length, mr_access access, deadline by) {
    if (length == 0 || iova + length < iova) {
        throw std::invalid_argument("bnxt mr::create: [" + rig::abi::hex(iova) + ", +" + std::to_string(length) +
                                    ") is empty or wraps");
    }
    abi::cmdq_register_mr reg;
    reg.access = register_access(access);
    const std::uint64_t first = iova & ~std::uint64_t{table_page - 1};
    const std::size_t pages = static_cast<std::size_t>((iova + length - first + table_page - 1) / table_page);
    mr m;
    if (pages == 1) {
        reg.pbl = first;   // level 0: the page itself
    } else {
        auto list = mapped_memory::create(fn, table_pages(pages) * table_page, "MR page list");
        if (!list) {
            return std::unexpected(plain_error(error_kind::transport, list.error()));
        }
        std::vector<std::uint64_t> addresses(pages);
        for (std::size_t i = 0; i < pages; ++i) {
            addresses[i] = first + i * table_page;
        }
        std::tie(reg.pbl, m._level) = write_page_list(addresses, list->data(), list->iova());
        m._page_list = std::move(*list);
    }
    abi::cmdq_allocate_mrw alloc;
    alloc.mrw_handle = next_handle();
    alloc.mrw_flags = abi::CMDQ_ALLOCATE_MRW_MRW_FLAGS_MR;
    alloc.pd_id = pd;
    auto key = ch.send<abi::creq_allocate_mrw_resp>(alloc, 0, by);
    if (!key) {
        return refused<mr>(std::move(key.error()), m._page_list, fn, stranded);
    }
    reg.lvl = m._level;
    reg.log2_pg_size = 12;
    reg.log2_pbl_pg_size = 12;
    reg.key = key->xid;
    reg.va = iova;
    reg.mr_size = length;
    if (auto r = ch.send<abi::creq_register_mr_resp>(reg, 0, by); !r) {
        if (!detail::firmware_may_hold(r.error())) {
            (void)deallocate_key(ch, key->xid, by);   // the key goes back; its own failure changes nothing
        }
        return refused<mr>(std::move(r.error()), m._page_list, fn, stranded);
    }
    m._key = key->xid;
    m._alive = true;
    m._page_list.name("MR " + rig::abi::hex(m._key) + " page list");
    return m;
}

result<void> mr::destroy(rcfw_channel& ch, driver::function& fn, stranded_memory& stranded, deadline by) {
    if (!_alive) {
        throw std::invalid_argument("bnxt mr::destroy: the MR is not alive");
    }
    if (auto r = deallocate_key(ch, _key, by); !r) {
        if (detail::firmware_may_hold(r.error())) {
            _page_list.strand(stranded);
            _alive = false;
        }
        return r;
    }
    _page_list.release(fn);
    _alive = false;
    return {};
}

}  // namespace rig::firmware::bnxt
