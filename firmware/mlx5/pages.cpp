#include "firmware/mlx5/pages.hpp"

#include <algorithm>

#include "abi/bits.hpp"
#include "firmware/log.hpp"

namespace rig::firmware::mlx5 {

namespace {

using In = ifc::manage_pages_in;
using Out = ifc::manage_pages_out;

std::vector<std::byte> manage_pages_in(ifc::manage_pages_op_mod op_mod, std::size_t entries, std::size_t count) {
    std::vector<std::byte> in(ifc::length_with_pas<In>(entries));
    abi::set<In::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::manage_pages));
    abi::set<In::op_mod>(in, static_cast<std::uint16_t>(op_mod));
    abi::set<In::input_num_entries>(in, count);
    return in;
}

error supply_error(std::string message) {
    error e = transport_error(std::move(message));
    e.opcode = ifc::opcode::manage_pages;
    return e;
}

}  // namespace

page_supply::page_supply(driver::function& fn, command_queue& q, stranded_memory& stranded,
                         const page_supply_options& options)
    : _fn(fn), _q(q), _stranded(stranded), _options(options) {
    _options.chunk_pages = std::max<std::size_t>(_options.chunk_pages, 1);
    _options.take_batch = std::max<std::size_t>(_options.take_batch, 1);
}

page_supply::~page_supply() {
    std::lock_guard g(_lock);
    if (!_given.empty()) {
        // Nobody took them back and nobody said the firmware is gone: it may still use them.
        log().warn("mlx5 page supply on {}: {} page(s) still with the firmware at destruction; stranded",
                   _fn.name(), _given.size());
        strand_locked(std::vector<std::uint64_t>(_given.begin(), _given.end()), "not taken back");
    }
    for (auto& [iova, c] : _chunks) {
        if (c.stranded == 0) {
            static_cast<void>(_fn.dma_unmap(c.iova, c.bytes));
        }
    }
}

bool page_supply::firmware_gone(const error& e) {
    return e.kind == error_kind::timeout || e.kind == error_kind::fatal;
}

result<std::vector<std::byte>> page_supply::run(std::span<const std::byte> in, std::size_t out_bytes,
                                                clock::time_point by, slot s) {
    return s == slot::page_request ? _q.exec_page_command(in, out_bytes, by) : _q.exec(in, out_bytes, by);
}

result<void> page_supply::grow() {
    const std::size_t bytes = _options.chunk_pages * page_bytes;
    auto mem = driver::dma_memory::allocate(bytes);
    if (!mem) {
        return std::unexpected(supply_error("firmware pages: " + mem.error().message));
    }
    auto iova = _fn.dma_map(*mem, 0, mem->size(), driver::dma_access::read_write);
    if (!iova) {
        return std::unexpected(supply_error("firmware pages: " + iova.error().message));
    }
    if ((*iova & (page_bytes - 1)) != 0) {
        static_cast<void>(_fn.dma_unmap(*iova, mem->size()));
        return std::unexpected(supply_error("firmware pages mapped at " + abi::hex(*iova) + ", not 4 KiB aligned"));
    }
    const std::size_t pages = mem->size() / page_bytes;
    chunk c;
    c.iova = *iova;
    c.bytes = mem->size();
    c.memory = std::move(*mem);
    // pushed in reverse so that pages are given in address order
    for (std::size_t i = pages; i-- > 0;) {
        _free.push_back(c.iova + i * page_bytes);
    }
    _chunks.emplace(c.iova, std::move(c));
    return {};
}

page_supply::chunk* page_supply::chunk_of(std::uint64_t iova) {
    auto it = _chunks.upper_bound(iova);
    if (it == _chunks.begin()) {
        return nullptr;
    }
    --it;
    chunk& c = it->second;
    return iova - c.iova < c.bytes ? &c : nullptr;
}

void page_supply::strand_locked(const std::vector<std::uint64_t>& pages, const std::string& why) {
    for (const std::uint64_t pa : pages) {
        chunk* c = chunk_of(pa);
        // The first stranded page of a chunk carries the chunk's memory into the registry,
        // which keeps it (mapped) for the life of the process; later pages name their bytes.
        driver::dma_memory keep;
        if (c != nullptr && c->stranded++ == 0) {
            keep = std::move(c->memory);
            c->memory = driver::dma_memory{};
        }
        _stranded.keep("firmware page (" + why + ")", pa, page_bytes, std::move(keep));
        _given.erase(pa);
        ++_stranded_pages;
    }
    // the free pages of a stranded chunk are never given again either
    std::erase_if(_free, [&](std::uint64_t pa) {
        const chunk* c = chunk_of(pa);
        return c != nullptr && c->stranded > 0;
    });
}

void page_supply::strand(const std::string& why) {
    std::lock_guard g(_lock);
    strand_locked(std::vector<std::uint64_t>(_given.begin(), _given.end()), why);
}

result<void> page_supply::satisfy(ifc::query_pages_op_mod op_mod, clock::time_point by) {
    using QIn = ifc::query_pages_in;
    using QOut = ifc::query_pages_out;
    std::vector<std::byte> in(QIn::size_bytes);
    abi::set<QIn::opcode>(in, static_cast<std::uint16_t>(ifc::opcode::query_pages));
    abi::set<QIn::op_mod>(in, static_cast<std::uint16_t>(op_mod));
    auto out = _q.exec<QIn, QOut>(in, by);
    if (!out) {
        return std::unexpected(std::move(out.error()));
    }
    // num_pages is signed: negative means the firmware has pages to return (pagealloc.c
    // req_pages_handler)
    const auto n = static_cast<std::int32_t>(abi::get<QOut::num_pages>(*out));
    log().debug("mlx5 QUERY_PAGES op_mod {} on {}: {} page(s)", static_cast<unsigned>(op_mod), _fn.name(), n);
    if (n > 0) {
        return give(static_cast<std::size_t>(n), by);
    }
    if (n < 0) {
        auto r = take(static_cast<std::size_t>(-static_cast<std::int64_t>(n)), by);
        if (!r) {
            return std::unexpected(std::move(r.error()));
        }
    }
    return {};
}

result<void> page_supply::give(std::size_t n, clock::time_point by, slot s) {
    std::lock_guard g(_lock);
    if (n == 0) {
        return {};
    }
    if (n > _options.max_pages || _given.size() + n > _options.max_pages) {
        return std::unexpected(supply_error("the firmware asks for " + std::to_string(n) + " page(s) with " +
                                            std::to_string(_given.size()) + " given, past the limit of " +
                                            std::to_string(_options.max_pages)));
    }
    while (_free.size() < n) {
        if (auto r = grow(); !r) {
            return r;
        }
    }
    std::vector<std::uint64_t> pages(_free.end() - static_cast<std::ptrdiff_t>(n), _free.end());
    std::reverse(pages.begin(), pages.end());
    _free.resize(_free.size() - n);
    auto in = manage_pages_in(ifc::manage_pages_op_mod::allocation_success, n, n);
    for (std::size_t i = 0; i < n; ++i) {
        abi::set(in, ifc::pas_entry<In>(i), pages[i]);
    }
    auto out = run(in, Out::size_bytes, by, s);
    if (!out) {
        if (firmware_gone(out.error())) {
            // the firmware may have taken them before it stopped answering
            _given.insert(pages.begin(), pages.end());
            strand_locked(pages, "GIVE never completed");
        } else {
            _free.insert(_free.end(), pages.rbegin(), pages.rend());
        }
        return std::unexpected(std::move(out.error()));
    }
    _given.insert(pages.begin(), pages.end());
    return {};
}

result<std::size_t> page_supply::take(std::size_t n, clock::time_point by, slot s) {
    std::lock_guard g(_lock);
    if (n == 0) {
        return 0;
    }
    auto in = manage_pages_in(ifc::manage_pages_op_mod::hca_return_pages, 0, n);
    auto out = run(in, ifc::length_with_pas<Out>(n), by, s);
    if (!out) {
        if (firmware_gone(out.error())) {
            strand_locked(std::vector<std::uint64_t>(_given.begin(), _given.end()), "TAKE never completed");
        }
        return std::unexpected(std::move(out.error()));
    }
    const std::uint64_t returned = abi::get<Out::output_num_entries>(*out);
    if (returned > n) {
        error e = supply_error("MANAGE_PAGES TAKE returned " + std::to_string(returned) + " pages for " +
                               std::to_string(n) + " asked");
        e.kind = error_kind::bad_output;
        return std::unexpected(std::move(e));
    }
    std::vector<std::uint64_t> foreign;
    for (std::size_t i = 0; i < returned; ++i) {
        const std::uint64_t pa = abi::get(*out, ifc::pas_entry<Out>(i));
        if (_given.erase(pa) == 1) {
            _free.push_back(pa);
        } else {
            foreign.push_back(pa);
        }
    }
    if (!foreign.empty()) {
        error e = supply_error("MANAGE_PAGES TAKE returned " + std::to_string(foreign.size()) +
                               " page(s) never given, the first at " + abi::hex(foreign.front()));
        e.kind = error_kind::bad_output;
        return std::unexpected(std::move(e));
    }
    return static_cast<std::size_t>(returned);
}

result<void> page_supply::reclaim(clock::time_point by) {
    for (;;) {
        const std::size_t held = given();
        if (held == 0) {
            return {};
        }
        auto got = take(std::min(held, _options.take_batch), by);
        if (!got) {
            return std::unexpected(std::move(got.error()));
        }
        if (*got == 0) {
            error e = supply_error("the firmware returned none of the " + std::to_string(held) + " page(s) it holds");
            e.kind = error_kind::bad_output;
            return std::unexpected(std::move(e));
        }
    }
}

std::size_t page_supply::given() const {
    std::lock_guard g(_lock);
    return _given.size();
}

std::size_t page_supply::stranded_pages() const {
    std::lock_guard g(_lock);
    return _stranded_pages;
}

std::size_t page_supply::chunks_mapped() const {
    std::lock_guard g(_lock);
    return _chunks.size();
}

std::vector<page_supply::window> page_supply::windows() const {
    std::lock_guard g(_lock);
    std::vector<window> out;
    for (const auto& [iova, c] : _chunks) {
        out.push_back({iova, c.bytes});
    }
    return out;
}

}  // namespace rig::firmware::mlx5
