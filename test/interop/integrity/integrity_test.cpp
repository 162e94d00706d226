// The integrity checker (integrity.h) sees every kind of damage a transport could do: a byte
// changed, a message landed one byte off, written one byte long, not landed at all, landed in
// the wrong area; and it passes a buffer that holds exactly what the steps put there.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

extern "C" {
#include "integrity.h"
}

namespace {

// Side `is_server`'s buffer after steps 1..done, as a correct transport leaves it.
std::vector<std::uint8_t> after_steps(int is_server, int done) {
    std::vector<std::uint8_t> mine(INTEGRITY_BUFFER), peer(INTEGRITY_BUFFER);
    integrity_fill(mine.data(), is_server);
    integrity_fill(peer.data(), !is_server);
    for (int area : {AREA_W, AREA_L, AREA_S}) {
        const int step = integrity_landing_step(is_server, area);
        if (step == 0 || done < step) continue;
        for (std::size_t k = 0; k < INTEGRITY_CHUNKS; ++k) {
            const std::size_t at = integrity_chunk_offset(k);
            std::memcpy(mine.data() + area * INTEGRITY_AREA + at, peer.data() + AREA_R * INTEGRITY_AREA + at, integrity_chunk_sizes[k]);
        }
    }
    return mine;
}

std::string check(const std::vector<std::uint8_t>& b, int is_server, int done) {
    char why[INTEGRITY_LINE] = "";
    return integrity_check(b.data(), is_server, done, why) ? "ok" : why;
}

}  // namespace

TEST_CASE("integrity: a correct buffer passes after every step, on both sides") {
    for (int side : {0, 1})
        for (int done = 0; done <= INTEGRITY_STEPS; ++done) REQUIRE(check(after_steps(side, done), side, done) == "ok");
}

TEST_CASE("integrity: the chunks cross every MTU and fit an area with room for a receive's slack") {
    const std::size_t last = INTEGRITY_CHUNKS - 1;
    REQUIRE(integrity_chunk_offset(last) + integrity_chunk_sizes[last] + 64 <= INTEGRITY_AREA);
    for (std::uint32_t mtu : {256u, 1024u, 4096u}) {
        bool below = false, equal = false, above = false;
        for (std::size_t k = 0; k < INTEGRITY_CHUNKS; ++k) {
            below |= integrity_chunk_sizes[k] == mtu - 1;
            equal |= integrity_chunk_sizes[k] == mtu;
            above |= integrity_chunk_sizes[k] == mtu + 1;
        }
        REQUIRE((below && equal && above));
    }
}

TEST_CASE("integrity: every kind of damage is named") {
    const std::size_t w = AREA_W * INTEGRITY_AREA, at5 = integrity_chunk_offset(5);
    SECTION("a byte changed in a chunk that landed") {
        auto b = after_steps(1, 1);
        b[w + at5 + 10] ^= 0x40;
        REQUIRE(check(b, 1, 1).starts_with("area W byte " + std::to_string(at5 + 10) + " (chunk 5)"));
    }
    SECTION("a WRITE one byte long: the gap after its chunk is overwritten") {
        auto b = after_steps(1, 1);
        const std::size_t end = at5 + integrity_chunk_sizes[5];
        b[w + end] = static_cast<std::uint8_t>(~integrity_byte(integrity_fill_seed(1, AREA_W), end));
        REQUIRE(check(b, 1, 1).find("untouched fill") != std::string::npos);
    }
    SECTION("a message that did not land") {
        auto b = after_steps(0, 6);
        auto fill = after_steps(0, 5);
        std::memcpy(b.data() + AREA_S * INTEGRITY_AREA, fill.data() + AREA_S * INTEGRITY_AREA, 64);
        REQUIRE(check(b, 0, 6).find("area S") != std::string::npos);
    }
    SECTION("a READ landed in W instead of L") {
        auto b = after_steps(0, 2);
        auto c = after_steps(0, 3);
        std::memcpy(b.data() + w, c.data() + AREA_L * INTEGRITY_AREA, INTEGRITY_AREA);
        REQUIRE(check(b, 0, 3).starts_with("area W"));
    }
    SECTION("a chunk landed one byte off") {
        auto b = after_steps(1, 1);
        std::memmove(b.data() + w + at5 + 1, b.data() + w + at5, integrity_chunk_sizes[5]);
        REQUIRE(check(b, 1, 1) != "ok");
    }
}
