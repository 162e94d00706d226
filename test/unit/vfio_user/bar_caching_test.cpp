// vfio-user: what map_bar's caching request gives over a server's shared pages. The pages are
// ordinary memory (a memfd the server shares), so every mapping says write_back, and a
// write-combining request (the UAR's, qp/nic.cpp) gets a mapping of its own beside the uncached
// one bring-up made (firmware/), over the same pages, as a card's WC UAR mapping sits beside
// BAR0's uncached one. Kernel VFIO answers every request with its one uncached mapping
// (driver/function.hpp).
#include <sys/mman.h>

#include <cstring>

#include <catch2/catch.hpp>

#include "helpers.hpp"

using namespace rig::test;
using namespace rig::driver;

TEST_CASE("vfio-user: a write-combining request maps the shared pages apart; both mappings say write-back",
          "[vfio_user]") {
    local_server s;
    auto f = open_ok(s.where());
    auto uc = f->map_bar(region::bar0, caching::uncached);
    REQUIRE(uc);
    auto wc = f->map_bar(region::bar0, caching::write_combining);
    REQUIRE(wc);
    CHECK(wc->base != uc->base);
    CHECK(uc->mode == caching::write_back);
    CHECK(wc->mode == caching::write_back);
    CHECK(to_string(wc->mode) == "write-back");
    REQUIRE(wc->mapped.size() == uc->mapped.size());
    for (std::size_t i = 0; i < wc->mapped.size(); ++i) {
        CHECK(wc->mapped[i].offset == uc->mapped[i].offset);
        CHECK(wc->mapped[i].size == uc->mapped[i].size);
    }
    CHECK(wc->covers(0x1000, 8));
    CHECK_FALSE(wc->covers(0, 4));   // the register page stays trapped
    // the same pages: a store through one mapping is what the other and the device read
    const std::uint32_t v = 0xabcd1234;
    std::memcpy(wc->base + 0x1000, &v, 4);
    std::uint32_t seen = 0;
    std::memcpy(&seen, uc->base + 0x1000, 4);
    CHECK(seen == v);
    CHECK(reg_read(*f, reg::peek) == v);
    // asking again gives the same mapping for each
    auto wc2 = f->map_bar(region::bar0, caching::write_combining);
    auto uc2 = f->map_bar(region::bar0, caching::uncached);
    REQUIRE(wc2);
    REQUIRE(uc2);
    CHECK(wc2->base == wc->base);
    CHECK(uc2->base == uc->base);
    // release unmaps both
    std::byte* const wc_page = wc->base + 0x1000;
    std::byte* const uc_page = uc->base + 0x1000;
    f->release();
    CHECK(::msync(wc_page, 4096, MS_ASYNC) != 0);
    CHECK(::msync(uc_page, 4096, MS_ASYNC) != 0);
}
