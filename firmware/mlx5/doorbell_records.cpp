// Doorbell records, many to a page (doorbell_records.hpp).
#include "firmware/mlx5/doorbell_records.hpp"

#include <bit>
#include <cstring>
#include <stdexcept>

namespace rig::firmware::mlx5 {

doorbell_records::~doorbell_records() {
    for (page& p : _pages) {
        // a page whose slots are all free or stranded: the stranded ones may still be written
        const auto free_slots = static_cast<std::uint32_t>(std::popcount(p.free));
        if (p.stranded != 0 && free_slots + p.stranded == slots_per_page) {
            p.memory.strand(_stranded);
        }
        // slots still in use: their objects were dropped alive; mapped_memory keeps the page
    }
}

std::expected<doorbell_records::record, std::string> doorbell_records::take() {
    std::scoped_lock hold(_lock);
    page* with_room = nullptr;
    for (page& p : _pages) {
        if (p.free != 0) {
            with_room = &p;
            break;
        }
    }
    if (with_room == nullptr) {
        auto memory = mapped_memory::create(_fn, page_bytes, "doorbell record page");
        if (!memory) {
            return std::unexpected(std::move(memory.error()));
        }
        with_room = &_pages.emplace_back(page{.memory = std::move(*memory)});
    }
    const auto slot = static_cast<std::uint32_t>(std::countr_zero(with_room->free));
    with_room->free &= ~(std::uint64_t{1} << slot);
    std::byte* data = with_room->memory.data() + slot * slot_bytes;
    std::memset(data, 0, slot_bytes);  // a record given back may hold its last counters
    return record{.data = data, .iova = with_room->memory.iova() + slot * slot_bytes, .page = with_room, .slot = slot};
}

doorbell_records::page& doorbell_records::owner(const record& r, const char* what) {
    for (page& p : _pages) {
        if (&p == r.page && r.slot < slots_per_page && (p.free & (std::uint64_t{1} << r.slot)) == 0) {
            return p;
        }
    }
    throw std::invalid_argument(std::string("mlx5 doorbell_records::") + what +
                                ": the record is not one this pool handed out");
}

void doorbell_records::give_back(record& r) {
    std::scoped_lock hold(_lock);
    page& p = owner(r, "give_back");
    p.free |= std::uint64_t{1} << r.slot;
    r = {};
    if (p.free == ~std::uint64_t{0}) {
        p.memory.release(_fn);
        _pages.remove_if([&](const page& q) { return &q == &p; });
    }
}

void doorbell_records::strand(record& r) {
    std::scoped_lock hold(_lock);
    page& p = owner(r, "strand");
    ++p.stranded;   // stays taken: never handed out again
    r = {};
}

std::size_t doorbell_records::pages() const {
    std::scoped_lock hold(_lock);
    return _pages.size();
}

std::size_t doorbell_records::in_use() const {
    std::scoped_lock hold(_lock);
    std::size_t n = 0;
    for (const page& p : _pages) {
        n += slots_per_page - static_cast<std::size_t>(std::popcount(p.free));
    }
    return n;
}

}  // namespace rig::firmware::mlx5
