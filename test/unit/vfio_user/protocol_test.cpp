// abi/vfio_user: bounded decoding and the capabilities JSON.
#include <array>
#include <string>

#include <catch2/catch.hpp>

#include "abi/vfio_user/protocol.hpp"

namespace abi = rig::vfio_user::abi;

TEST_CASE("vfio-user decode reads only inside the bytes it is given", "[vfio_user][abi]") {
    std::array<std::byte, 20> b{};
    b[16] = std::byte{0x2a};
    CHECK(abi::decode<abi::header>(b, 0).has_value());
    CHECK(abi::decode<abi::header>(b, 4).has_value());
    CHECK_FALSE(abi::decode<abi::header>(b, 5).has_value());
    CHECK_FALSE(abi::decode<abi::header>(b, 1000).has_value());
    CHECK_FALSE(abi::decode<abi::region_info>(b).has_value());
    CHECK(abi::decode<std::uint8_t>(b, 16) == std::uint8_t{0x2a});
    CHECK_FALSE(abi::encode(std::span<std::byte>(b), 8, abi::header{}));
    CHECK(abi::command_name(9) == "VFIO_USER_REGION_READ");
    CHECK(abi::command_name(99) == "VFIO_USER_(unknown command)");
}

TEST_CASE("vfio-user capabilities: written, read back, defaults", "[vfio_user][abi]") {
    abi::caps c;
    c.max_msg_fds = 16;
    c.max_data_xfer_size = 65536;
    c.max_dma_maps = 100;
    c.pgsizes = 4096 | (1u << 21);
    std::array<char, 256> out{};
    const std::size_t n = abi::write_caps(c, out);
    REQUIRE(n > 0);
    CHECK(out[n - 1] == '\0');
    const auto back = abi::parse_caps(std::string_view(out.data(), n - 1));
    REQUIRE(back);
    CHECK(back->max_msg_fds == 16);
    CHECK(back->max_data_xfer_size == 65536);
    CHECK(back->max_dma_maps == 100);
    CHECK(back->pgsizes == (4096 | (1u << 21)));
    std::array<char, 20> small{};
    CHECK(abi::write_caps(c, small) == 0);

    const auto none = abi::parse_caps(" { } ");
    REQUIRE(none);
    CHECK(none->max_msg_fds == 1);
    CHECK(none->max_data_xfer_size == 1048576);
    CHECK(none->max_dma_maps == 65535);
    CHECK(none->pgsizes == 4096);

    // what QEMU's client sends (hw/vfio-user/proxy.c caps_json), with the retired migration member
    const auto qemu = abi::parse_caps(
        R"({"capabilities":{"migration":{"pgsize":4096,"max_bitmap_size":268435456},)"
        R"("max_msg_fds":16,"max_data_xfer_size":1048576,"pgsizes":4096,"max_dma_maps":65535}})");
    REQUIRE(qemu);
    CHECK(qemu->max_msg_fds == 16);

    const auto twin = abi::parse_caps(R"({"capabilities":{"twin_socket":{"supported":true,"fd_index":0},"x":[1,2.5e3,null]}})");
    REQUIRE(twin);
    CHECK(twin->twin_socket);
    CHECK(twin->twin_socket_fd_index == 0u);
}

TEST_CASE("vfio-user capabilities: malformed JSON is refused", "[vfio_user][abi]") {
    const char* bad[] = {
        "",
        "{",
        "[]",
        "{} x",
        R"({"capabilities":{"max_msg_fds":-1}})",
        R"({"capabilities":{"max_msg_fds":"8"}})",
        R"({"capabilities":{"max_msg_fds":1.5}})",
        R"({"capabilities":{"max_msg_fds":01}})",
        R"({"capabilities":{"max_msg_fds":99999999999999999999999}})",
        R"({"capabilities":{"write_multiple":1}})",
        R"({"capabilities":{"twin_socket":true}})",
        R"({"capabilities":[]})",
        R"({"capabilities":{"max_msg_fds":1,}})",
        R"({"a":"unterminated})",
        "{\"a\":\"ctrl\x01\"}",
    };
    for (const char* s : bad) {
        INFO(s);
        CHECK_FALSE(abi::parse_caps(s).has_value());
    }
    std::string deep = R"({"a":)";
    for (int i = 0; i < 100; ++i) {
        deep += "[";
    }
    for (int i = 0; i < 100; ++i) {
        deep += "]";
    }
    deep += "}";
    CHECK_FALSE(abi::parse_caps(deep).has_value());
    // a huge count is clamped, not refused
    const auto big = abi::parse_caps(R"({"capabilities":{"max_dma_maps":123456789012}})");
    REQUIRE(big);
    CHECK(big->max_dma_maps == 0xffffffffu);
}
